"""Properties (hypothesis) of the readers (core/readers.py, train/data.py's teacher) and of fusion.

Readers: for any bytes, and for near-valid files (valid lines with one corrupted, odd Unicode, CRLF,
blank lines, a byte-order mark, gzip), a reader returns valid records or raises one InputError
whose one-line message starts with ``FILE:LINE:``; no other exception escapes. A valid file reads
back exactly what was written, and a corrupted line is the line the message names.

Fusion: each method of core/fusion.py keeps what the module's docstring promises.
"""
import gzip
import json
import math
import os
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lsr_pyserini.core.fusion import METHODS, fuse, normalise
from lsr_pyserini.core.readers import CorpusCheck, InputError, read_corpus, read_qrels, read_queries, read_run
from lsr_pyserini.core.topics import HEADER_IDS
from lsr_pyserini.train.data import read_teacher

# Inherits the profile tests/conftest.py loads ("ci": derandomized, no example database), so every
# run draws the same examples; no test here picks a seed of its own.
PROPERTY = settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_the_property_tests_draw_the_same_examples_every_run():
    assert PROPERTY.derandomize == (os.environ.get("HYPOTHESIS_PROFILE", "ci") == "ci") and PROPERTY.database is None


# ---------------------------------------------------------------- readers

def checked_corpus_documents(path: str):
    documents = list(read_corpus(path))
    CorpusCheck(path).run()  # duplicate ids are CorpusCheck's to refuse
    return documents


READERS = {  # kind: (file name, reader)
    "corpus": ("corpus.jsonl", checked_corpus_documents),
    "corpus.gz": ("corpus.jsonl.gz", checked_corpus_documents),
    "queries": ("queries.tsv", lambda path: list(read_queries(path))),
    "qrels": ("qrels.txt", read_qrels),
    "run": ("run.txt", read_run),
    "teacher": ("teacher.txt", read_teacher),
}


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return tmp_path_factory.mktemp("properties")


def read(kind: str, folder, data: bytes):
    """(records, None), or (None, the line the InputError names); any other exception fails the test."""
    name, reader = READERS[kind]
    path = folder / name
    path.write_bytes(data)
    try:
        return reader(str(path)), None
    except InputError as err:
        message = str(err)
        assert len(message.splitlines()) == 1, message
        located = re.match(re.escape(str(path)) + r":([0-9]+): \S", message)
        assert located, message
        return None, int(located.group(1))


def lines_in(data: bytes) -> int:
    """Lines as the readers count them (\\n, \\r\\n and a lone \\r end one)."""
    return data.count(b"\n") + data.count(b"\r") - data.count(b"\r\n") + 1


def encodes(text: str) -> bool:
    try:
        text.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


def is_id(value) -> bool:
    return isinstance(value, str) and value.split() == [value] and encodes(value)


def is_score(value) -> bool:
    return isinstance(value, float) and math.isfinite(value)


def assert_valid(kind: str, records) -> None:
    if kind.startswith("corpus"):
        assert all(is_id(d.id) and isinstance(d.text, str) and encodes(d.text) and d.line >= 1 for d in records)
        assert len({d.id for d in records}) == len(records)
    elif kind == "queries":
        assert all(is_id(q.id) and encodes(q.text) and q.text == q.text.strip() for q in records)
        assert len({q.id for q in records}) == len(records)
    elif kind == "run":
        for qid, ranking in records.items():
            assert is_id(qid) and all(is_id(doc) and is_score(score) for doc, score in ranking)
            assert len({doc for doc, _ in ranking}) == len(ranking)
    else:  # qrels: int relevance; teacher: finite scores
        value_ok = (lambda v: type(v) is int) if kind == "qrels" else is_score
        assert all(is_id(qid) and is_id(doc) and value_ok(value)
                   for qid, docs in records.items() for doc, value in docs.items())


TOKENS = [b"q1", b"d1", b"0", b"Q0", b"1", b"2.5", b"nan", b"-inf", b"1e999", b"\t", b" ", b"\n", b"\r\n", b"\r",
          b"\xef\xbb\xbf", b"\xff", b"\xc3", b"\xa0", b"\xc2\x85", b"\xe2\x80\xa8", b'{"_id": ', b'"a b"', b'"x"',
          b'"text": ', b'"\\ud800"', b"null", b"[", b"]", b"{", b"}", b", ", b'"title": ', b"9" * 5000,
          b"q1 Q0 d1 1 2.5 t\n", b"q1 0 d1 1\n", b"q1 d2 -3\n", b'{"_id": "d1", "text": "x"}\n', b"q1\tfoo\n"]
BYTES = st.binary(max_size=300) | st.lists(st.sampled_from(TOKENS), max_size=40).map(b"".join)


@PROPERTY
@given(kind=st.sampled_from(sorted(READERS)), data=BYTES, compress=st.booleans())
def test_any_bytes_give_valid_records_or_one_located_error(folder, kind, data, compress):
    compressed = kind.endswith(".gz") and compress
    records, line = read(kind, folder, gzip.compress(data) if compressed else data)
    if records is not None:
        assert_valid(kind, records)
    elif compressed or not kind.endswith(".gz"):  # the line is in the text (a raw .gz is damaged at line 1)
        assert 1 <= line <= lines_in(data)


# Near-valid files: every kind draws valid lines (text, expected value, unique key); near_valid_file
# lays them out and may corrupt one line in a way that makes it invalid whatever the others say.

IDS = st.one_of(
    st.from_regex(r"[a-z][0-9]{1,2}", fullmatch=True),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\ufeff"), min_size=1, max_size=6),
).filter(lambda value: value.split() == [value])
LINE_TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=20)
ANY_TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
SEPARATORS = st.sampled_from([" ", "\t", "  ", " \t"])
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCORE_TEXT = st.one_of(FLOATS.map(repr), FLOATS.map(lambda x: f"{x:.6f}"), FLOATS.map(lambda x: f"{x:e}"),
                       st.integers(-10**6, 10**6).map(str))
BAD_NUMBERS = ["nan", "NaN", "-nan", "inf", "-inf", "+Infinity", "1e999", "-1e400", "high", "1_0", "\u0661",
               "0x10", "1.5.2", "--1"]


@st.composite
def corpus_line(draw):
    doc_id = draw(IDS | st.integers(-10**30, 10**30))
    fields = draw(st.sampled_from([("title", "text"), ("text",), ("contents",), ("title",)]))
    record = {draw(st.sampled_from(["_id", "id", "docid"])): doc_id, **{f: draw(ANY_TEXT) for f in fields}}
    parts = [record[f].strip() for f in ("title", "text") if f in record and record[f].strip()]
    if not parts and "contents" in record:
        parts = [record["contents"].strip()]
    text = json.dumps(record, ensure_ascii=draw(st.booleans()))
    return text, (str(doc_id), " ".join(parts)), str(doc_id)


@st.composite
def queries_line(draw):
    # an id spelled as a column name ("query", "QID") on the first line is a header, skipped by design
    qid, text = draw(IDS.filter(lambda qid: qid.lower() not in HEADER_IDS)), draw(LINE_TEXT)
    return f"{draw(st.sampled_from(['', ' ']))}{qid}\t{text}", (qid, text.strip()), qid


@st.composite
def qrels_line(draw):
    qid, doc, relevance, sep = draw(IDS), draw(IDS), draw(st.integers(-3, 10**20)), draw(SEPARATORS)
    return sep.join([qid, "0", doc, str(relevance)]), (qid, doc, relevance), (qid, doc)


@st.composite
def run_line(draw):
    qid, doc, score, sep = draw(IDS), draw(IDS), draw(SCORE_TEXT), draw(SEPARATORS)
    return sep.join([qid, "Q0", doc, str(draw(st.integers(1, 1000))), score, "tag"]), (qid, doc, float(score)), (qid, doc)


@st.composite
def teacher_line(draw):
    qid, doc, score, sep = draw(IDS), draw(IDS), draw(SCORE_TEXT), draw(SEPARATORS)
    return sep.join([qid, doc, score]), (qid, doc, float(score)), (qid, doc)


def corrupt_fields(how: str, text: str, number_field: int) -> str:
    """A whitespace-separated line made invalid: a field dropped or added, an id holding a no-break
    space (which splits it in two), or `how` (a bad number) in the number field."""
    fields = text.split()
    if how == "drop":
        fields.pop()
    elif how == "add":
        fields.append("extra")
    elif how == "nbsp":
        fields[0] += "\u00a0x"
    else:
        fields[number_field] = how
    return " ".join(fields)


def corrupt_corpus(how: str, text: str) -> str:
    record = json.loads(text)
    id_field = next(f for f in ("_id", "id", "docid") if f in record)
    bad_ids = {"id-float": 1.5, "id-list": [1], "id-bool": True, "id-object": {"a": 1}, "id-space": "a b", "no-id": ""}
    if how in bad_ids:
        record[id_field] = bad_ids[how]
    elif how == "no-text":
        record = {id_field: record[id_field], "body": "x"}
    elif how == "text-type":
        record[next(f for f in ("title", "text", "contents") if f in record)] = 5
    else:
        return {"truncate": text[:-1], "not-object": json.dumps(list(record.values())),
                "surrogate": text[:-1] + ', "text": "\\ud800"}', "long-number": '{"_id": ' + "9" * 5000 + ', "text": "x"}',
                "deep": "[" * 100_000 + "]" * 100_000}[how]
    return json.dumps(record)


def corrupt_queries(how: str, text: str) -> str:
    rest = text.partition("\t")[2]
    return {"no-tab": text.replace("\t", " "), "no-id": f"\tx{rest}", "id-space": f"a b\t{rest}"}[how]


FIELDS = ["drop", "add", "nbsp"]
KINDS = {  # kind: (valid line: (text, expected value, unique key), corruptions that make it invalid, corrupt)
    "corpus": (corpus_line(), ["truncate", "not-object", "id-float", "id-list", "id-bool", "id-object", "id-space",
                               "no-id", "no-text", "text-type", "surrogate", "long-number", "deep"], corrupt_corpus),
    "queries": (queries_line(), ["no-tab", "no-id", "id-space"], corrupt_queries),
    "qrels": (qrels_line(), FIELDS + BAD_NUMBERS + ["1.5"], lambda how, text: corrupt_fields(how, text, 3)),
    "run": (run_line(), FIELDS + BAD_NUMBERS, lambda how, text: corrupt_fields(how, text, 4)),
    "teacher": (teacher_line(), FIELDS + BAD_NUMBERS, lambda how, text: corrupt_fields(how, text, 2)),
}
FILE_KINDS = ["corpus", "corpus.gz", "queries", "qrels", "run", "teacher"]
LINE_ENDS = st.sampled_from([b"\n", b"\r\n", b"\r"])


def expected_records(kind: str, numbered: list[tuple[int, tuple]]):
    if kind.startswith("corpus"):
        return [(doc_id, text, line) for line, (doc_id, text) in numbered]
    if kind == "queries":
        return [value for _, value in numbered]
    grouped: dict = {}
    for _, (qid, doc, value) in numbered:
        if kind == "run":
            grouped.setdefault(qid, []).append((doc, value))
        else:
            grouped.setdefault(qid, {})[doc] = value
    return grouped


def comparable(kind: str, records):
    if kind.startswith("corpus"):
        return [(d.id, d.text, d.line) for d in records]
    if kind == "queries":
        return [(q.id, q.text) for q in records]
    return records


@st.composite
def near_valid_file(draw, kind: str, corrupt: bool):
    """(bytes, expected records, the number of the corrupted line): valid lines laid out with blank
    lines, LF, CRLF or CR ends, maybe a byte-order mark and a last line without its end; with
    `corrupt`, one line made invalid (see KINDS; also a non-UTF-8 byte, or a copy of an earlier
    line, whose id or pair is then given twice)."""
    line_strategy, corruptions, corrupt_line = KINDS[kind.removesuffix(".gz")]
    how = draw(st.sampled_from(corruptions + ["utf-8", "duplicate"])) if corrupt else None
    drawn = draw(st.lists(line_strategy, min_size=2 if how == "duplicate" else int(corrupt), max_size=8,
                          unique_by=lambda item: item[2]))
    bad_index = draw(st.integers(1 if how == "duplicate" else 0, len(drawn) - 1)) if corrupt else None
    chunks, numbered, line_no, bad_line = [], [], 0, None
    if draw(st.booleans()):
        chunks.append("\ufeff".encode())
    for index, (text, value, _) in enumerate(drawn):
        for blank in draw(st.lists(st.sampled_from(["", " ", "\t"]), max_size=2)):
            if not blank and chunks and chunks[-1].endswith(b"\r"):
                blank = " "  # an empty line after a CR end would make it a CRLF end
            line_no += 1
            chunks.append(blank.encode() + draw(LINE_ENDS))
        line_no += 1
        raw = text.encode()
        if index == bad_index:
            bad_line = line_no
            if how == "duplicate":
                raw = drawn[draw(st.integers(0, index - 1))][0].encode()
            elif how == "utf-8":
                at = draw(st.integers(0, len(raw)))
                raw = raw[:at] + b"\xff" + raw[at:]
            else:
                raw = corrupt_line(how, text).encode()
        else:
            numbered.append((line_no, value))
        last = index == len(drawn) - 1 and draw(st.booleans())
        chunks.append(raw + (b"" if last else draw(LINE_ENDS)))
    data = b"".join(chunks)
    return gzip.compress(data) if kind.endswith(".gz") else data, expected_records(kind, numbered), bad_line


@pytest.mark.parametrize("kind", FILE_KINDS)
@PROPERTY
@given(data=st.data())
def test_a_valid_file_reads_back_exactly(folder, kind, data):
    content, expected, _ = data.draw(near_valid_file(kind, corrupt=False))
    records, line = read(kind, folder, content)
    assert line is None and comparable(kind, records) == expected


@pytest.mark.parametrize("kind", FILE_KINDS)
@PROPERTY
@given(data=st.data())
def test_a_corrupted_line_is_the_line_the_error_names(folder, kind, data):
    content, _, bad_line = data.draw(near_valid_file(kind, corrupt=True))
    records, line = read(kind, folder, content)
    assert records is None and line == bad_line


@PROPERTY
@given(lines=st.lists(corpus_line(), min_size=1, max_size=20, unique_by=lambda item: item[2]),
       cut=st.floats(0, 1, exclude_min=True, exclude_max=True), flip=st.booleans())
def test_a_damaged_gzip_file_is_one_located_error(folder, lines, cut, flip):
    data = bytearray(gzip.compress("".join(text + "\n" for text, _, _ in lines).encode()))
    at = max(1, int(cut * len(data)))  # an empty .gz file is an empty file
    if flip:
        data[at] ^= 0xFF
    else:
        del data[at:]
    records, line = read("corpus.gz", folder, bytes(data))
    if records is not None:  # a flipped byte in a field gzip does not check (e.g. the header's time)
        assert flip
        assert_valid("corpus", records)
    elif not flip:  # lines before the cut are read, and the error is at the line the cut is in
        assert 1 <= line <= len(lines) + 1


# ---------------------------------------------------------------- fusion

DOCS = st.sampled_from([f"d{i}" for i in range(8)])
INTEGER_SCORES = st.one_of(st.integers(-3, 3), st.integers(-1000, 1000)).map(float)
WEIGHTS = st.floats(-100, 100)


def ranking_of(scores):
    return st.lists(st.tuples(DOCS, scores), min_size=1, max_size=6, unique_by=lambda pair: pair[0])


def runs_of(scores, min_runs: int = 1):
    """1-4 runs that all have q1 (the query they share) and maybe q2 and q3."""
    run = st.fixed_dictionaries({"q1": ranking_of(scores)},
                                optional={"q2": ranking_of(scores), "q3": ranking_of(scores)})
    return st.lists(run, min_size=min_runs, max_size=4)


def weights_for(data, runs, weights=WEIGHTS):
    return data.draw(st.lists(weights, min_size=len(runs), max_size=len(runs)))


@PROPERTY
@given(ranking=ranking_of(FLOATS))
def test_normalised_scores_keep_the_order_and_are_finite(ranking):
    scores = dict(ranking)
    minmax, zscore = normalise(ranking, "minmax"), normalise(ranking, "zscore")
    assert minmax.keys() == zscore.keys() == scores.keys()
    assert all(math.isfinite(v) for v in [*minmax.values(), *zscore.values()])
    if len(set(scores.values())) == 1:
        assert set(minmax.values()) == {1.0} and set(zscore.values()) == {0.0}
        return
    assert min(minmax.values()) == 0.0 and max(minmax.values()) == 1.0
    assert abs(math.fsum(zscore.values())) <= 1e-9 * len(ranking) * max(abs(v) for v in zscore.values())
    for a in scores:
        for b in scores:
            if scores[a] < scores[b]:
                assert minmax[a] <= minmax[b] and zscore[a] <= zscore[b]


@PROPERTY
@given(runs=runs_of(FLOATS), method=st.sampled_from(METHODS), data=st.data())
def test_fused_runs_are_finite_complete_and_sorted_with_ties_by_docid(runs, method, data):
    weights = data.draw(st.none() | st.lists(WEIGHTS, min_size=len(runs), max_size=len(runs)))
    fused = fuse(runs, weights, method, depth=None)
    assert set(fused) == {qid for run in runs for qid in run}
    for qid, ranking in fused.items():
        assert {doc for doc, _ in ranking} == {doc for run in runs for doc, _ in run.get(qid, [])}
        assert len(ranking) == len({doc for doc, _ in ranking})
        assert all(math.isfinite(score) for _, score in ranking)
        assert ranking == sorted(ranking, key=lambda pair: (-pair[1], pair[0]))
    depth = data.draw(st.integers(1, 8))
    assert fuse(runs, weights, method, depth=depth) == {qid: ranking[:depth] for qid, ranking in fused.items()}


@PROPERTY
@given(runs=runs_of(FLOATS, min_runs=2), method=st.sampled_from(METHODS), data=st.data())
def test_the_order_of_the_runs_does_not_change_the_fused_run(runs, method, data):
    weights = weights_for(data, runs)
    order = data.draw(st.permutations(range(len(runs))))
    permuted = fuse([runs[i] for i in order], [weights[i] for i in order], method, depth=None)
    assert permuted == fuse(runs, weights, method, depth=None)


def affine(run, scale: float, shift: float):
    return {qid: [(doc, scale * score + shift) for doc, score in ranking] for qid, ranking in run.items()}


@PROPERTY
@given(runs=runs_of(INTEGER_SCORES), method=st.sampled_from(METHODS), data=st.data())
def test_a_shift_and_a_positive_scaling_of_a_run_change_nothing(runs, method, data):
    """Integer scores, integer shifts and power-of-two scales keep the transformed scores exact, so
    the fused run is equal to the bit."""
    weights = weights_for(data, runs)
    changed = [affine(run, 2.0 ** data.draw(st.integers(-20, 20)), float(data.draw(st.integers(-10**6, 10**6))))
               for run in runs]
    assert fuse(changed, weights, method, depth=None) == fuse(runs, weights, method, depth=None)


@PROPERTY
@given(runs=runs_of(FLOATS), data=st.data())
def test_rrf_sees_only_the_order_of_each_run(runs, data):
    weights = weights_for(data, runs)
    changed = []
    for run in runs:
        distinct = sorted({score for ranking in run.values() for _, score in ranking})
        image = sorted(data.draw(st.lists(FLOATS, min_size=len(distinct), max_size=len(distinct), unique=True)))
        increasing = dict(zip(distinct, image))  # a strictly increasing map of the run's scores
        changed.append({qid: [(doc, increasing[score]) for doc, score in ranking] for qid, ranking in run.items()})
    assert fuse(changed, weights, "rrf", depth=None) == fuse(runs, weights, "rrf", depth=None)
