"""Readers: formats accepted, and one clear file:line error per kind of bad input.

tests/core/test_properties.py checks the same readers on any bytes and on near-valid files."""
import gzip
import json
import re
import uuid

import pytest

from conftest import SAMPLE
from lsr_pyserini.core.readers import CorpusCheck, InputError, read_corpus, read_qrels, read_queries, read_run
from lsr_pyserini.train.data import read_teacher


def write_jsonl(path, records):
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_jsonl_fields_and_title_text_join(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": "Title", "text": "Body text."},
        {"id": 7, "contents": "Only contents"},
        {"docid": "c", "title": "", "text": "No title"},
    ])
    docs = list(read_corpus(str(path)))
    assert [(d.id, d.text) for d in docs] == [("a", "Title Body text."), ("7", "Only contents"), ("c", "No title")]
    assert [d.line for d in docs] == [1, 2, 3]


def test_the_title_is_kept_alone_for_the_shards(tmp_path):
    """The search page shows a title apart from the text: the joined text is what is encoded, and
    the shard record keeps the title beside it (only where there is one: untitled records as before)."""
    path = write_jsonl(tmp_path / "c.jsonl", [
        {"_id": "a", "title": " Title ", "text": "Body text."},
        {"_id": "b", "title": "Only a title"},
        {"_id": "c", "title": " ", "text": "No title"},
        {"id": "d", "contents": "Only contents"},
    ])
    docs = list(read_corpus(str(path)))
    assert [d.title for d in docs] == ["Title", "Only a title", "", ""]
    assert [d.record(vector={"t": 1}) for d in docs] == [
        {"id": "a", "title": "Title", "contents": "Title Body text.", "vector": {"t": 1}},
        {"id": "b", "title": "Only a title", "contents": "Only a title", "vector": {"t": 1}},
        {"id": "c", "contents": "No title", "vector": {"t": 1}},
        {"id": "d", "contents": "Only contents", "vector": {"t": 1}}]
    assert list(docs[0].record()) == ["id", "title", "contents"]  # the id first: stores/documents reads it there


def test_gzip_and_beir_folder(tmp_path):
    folder = tmp_path / "beir"
    folder.mkdir()
    with gzip.open(folder / "corpus.jsonl.gz", "wt") as handle:
        handle.write(json.dumps({"_id": "x", "title": "T", "text": "U"}) + "\n")
    assert [d.text for d in read_corpus(str(folder))] == ["T U"]
    assert [d.id for d in read_corpus(str(folder / "corpus.jsonl.gz"))] == ["x"]


@pytest.mark.parametrize("line, problem", [
    ('{"_id": "a", "text": "ok"}\n{"_id": "b", "text": \n', "c.jsonl:2: malformed JSON"),
    ('{"_id": "a", "text": "ok"}\n{"text": "no id"}\n', "c.jsonl:2: missing document id"),
    ('{"_id": "a", "body": "x"}\n', "c.jsonl:1: no text field"),
    ('[1, 2]\n', "c.jsonl:1: expected a JSON object"),
])
def test_corpus_errors_name_file_and_line(tmp_path, line, problem):
    path = tmp_path / "c.jsonl"
    path.write_text(line)
    with pytest.raises(InputError, match=problem):
        list(read_corpus(str(path)))


def test_duplicate_ids_and_empty_texts(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": " "},
                                              {"_id": "a", "text": "y"}])
    with pytest.raises(InputError, match=r"c.jsonl:3: duplicate document id 'a' \(first seen at line 1\)"):
        CorpusCheck(str(path)).run()
    path = write_jsonl(tmp_path / "d.jsonl", [{"_id": "a", "text": "x"}, {"_id": "b", "text": ""}])
    check = CorpusCheck(str(path)).run()
    assert (check.count, check.empty) == (2, 1)


def test_missing_files(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        list(read_corpus(str(tmp_path / "nope.jsonl")))
    with pytest.raises(InputError, match="no such file"):
        list(read_queries(str(tmp_path / "nope.tsv")))
    with pytest.raises(InputError, match="no corpus.jsonl"):
        list(read_corpus(str(tmp_path)))


def test_queries_tsv(tmp_path):
    path = tmp_path / "q.tsv"
    path.write_text("1\tfirst query\n\n2\tsecond\twith tab\n")
    assert [(q.id, q.text) for q in read_queries(str(path))] == [("1", "first query"), ("2", "second\twith tab")]
    path.write_text("1\tok\nno tab here\n")
    with pytest.raises(InputError, match=r"q.tsv:2: expected 'qid<TAB>query text'"):
        list(read_queries(str(path)))


def test_qrels_and_run(tmp_path):
    qrels = tmp_path / "qrels"
    qrels.write_text("1 0 d1 1\n1 0 d2 0\n2 0 d3 2\n")
    assert read_qrels(str(qrels)) == {"1": {"d1": 1, "d2": 0}, "2": {"d3": 2}}
    qrels.write_text("1 0 d1\n")
    with pytest.raises(InputError, match="qrels:1: expected"):
        read_qrels(str(qrels))
    run = tmp_path / "run"
    run.write_text("1 Q0 d1 1 2.5 tag\n1 Q0 d2 2 1.0 tag\n")
    assert read_run(str(run)) == {"1": [("d1", 2.5), ("d2", 1.0)]}
    run.write_text("1 Q0 d1 1 high tag\n")
    with pytest.raises(InputError, match="run:1: score 'high'"):
        read_run(str(run))


def test_corrupt_gzip_is_one_clear_error(tmp_path):
    path = tmp_path / "c.jsonl.gz"
    data = gzip.compress(b'{"_id": "a", "text": "x"}\n' * 100)
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(InputError, match="c.jsonl.gz:1: cannot read"):
        list(read_corpus(str(path)))
    path.write_bytes(b"not gzip at all")
    with pytest.raises(InputError, match="c.jsonl.gz:1: cannot read"):
        list(read_corpus(str(path)))


@pytest.mark.parametrize("value", ["nan", "-inf", "inf", "Infinity", "1e999"])
def test_non_finite_scores_are_refused_in_runs_and_teacher_files(tmp_path, value):
    run, teacher = tmp_path / "run.txt", tmp_path / "teacher.txt"
    run.write_text(f"q1 Q0 d1 1 2.5 t\nq1 Q0 d2 2 {value} t\n")
    teacher.write_text(f"q1 d1 2.5\nq1 d2 {value}\n")
    for path, reader in ((run, read_run), (run, read_teacher), (teacher, read_teacher)):
        with pytest.raises(InputError, match=rf"{path.name}:2: score '{value}' is not a finite number"):
            reader(str(path))


@pytest.mark.parametrize("name, content, reader, problem", [
    ("run", "q1 Q0 d1 1 2 t\nq2 Q0 d1 1 2 t\nq1 Q0 d1 2 1 t\n", read_run,
     "run:3: document 'd1' appears twice for query 'q1' (first seen at line 1)"),
    ("qrels", "q1 0 d1 1\nq1 0 d2 0\nq1 0 d1 0\n", read_qrels,
     "qrels:3: document 'd1' is judged twice for query 'q1' (first seen at line 1)"),
    ("teacher", "q1 d1 2\nq1 d1 3\n", read_teacher, "teacher:2: document 'd1' has two scores for query 'q1' (first seen at line 1)"),
    ("q.tsv", "q1\tone\n\nq1\tagain\n", lambda path: list(read_queries(path)),
     "q.tsv:3: duplicate query id 'q1' (first seen at line 1)"),
])
def test_a_pair_or_an_id_given_twice_is_refused_naming_both_lines(tmp_path, name, content, reader, problem):
    path = tmp_path / name
    path.write_text(content)
    with pytest.raises(InputError, match=re.escape(problem)):
        reader(str(path))


@pytest.fixture(scope="module")
def sample_irds(tmp_path_factory) -> str:
    """The sample corpus and queries registered as an ir_datasets id, over the very files that the
    file inputs read. The registration lives in this process, so commands are called in-process."""
    import ir_datasets  # pinned: a broken install fails, not skips
    from typing import NamedTuple

    from ir_datasets.formats import JsonlDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    class SampleDoc(NamedTuple):
        doc_id: str
        title: str
        text: str

    name = f"lsr-pyserini-test/sample-{uuid.uuid4().hex[:8]}"  # a slash, as in beir/scifact/test
    docs = JsonlDocs(LocalDownload(SAMPLE / "corpus.jsonl"), doc_cls=SampleDoc,
                     mapping={"doc_id": "_id", "title": "title", "text": "text"},
                     docstore_path=str(tmp_path_factory.mktemp("irds") / "docs.pklz4"))
    ir_datasets.registry.register(name, ir_datasets.Dataset(docs, TsvQueries(LocalDownload(SAMPLE / "queries.test.tsv"))))
    return name


def test_an_ir_datasets_id_reads_as_its_files(sample_irds):
    from_files = [(d.id, d.text) for d in read_corpus(str(SAMPLE / "corpus.jsonl"))]
    assert len(from_files) == 12 and [(d.id, d.text) for d in read_corpus(sample_irds)] == from_files
    queries = list(read_queries(str(SAMPLE / "queries.test.tsv")))
    assert len(queries) == 7 and list(read_queries(sample_irds)) == queries
    assert CorpusCheck(sample_irds).run().count == 12
    for reader, named in ((read_corpus, ""), (read_queries, ", Pyserini topics name")):
        with pytest.raises(InputError, match=f"^lsr-pyserini-test/none: no such file, folder{named} or ir_datasets id$"):
            list(reader("lsr-pyserini-test/none"))


def test_encode_reads_an_ir_datasets_id_as_it_reads_the_files(sample_irds, tiny_preset, tmp_path):
    from lsr_pyserini.commands.encode import main as encode  # in-process: the id is registered in this process

    common = ["--encoder", str(tiny_preset), "--threads", "1", "--quiet"]
    outputs = {}
    for name, corpus, queries in (("files", SAMPLE / "corpus.jsonl", SAMPLE / "queries.test.tsv"),
                                  ("irds", sample_irds, sample_irds)):
        encode(["corpus", *common, "--input", str(corpus), "--output", str(tmp_path / name)])
        encode(["queries", *common, "--input", str(queries), "--output", str(tmp_path / f"{name}.tsv")])
        shards = "".join(p.read_text() for p in sorted((tmp_path / name).iterdir()))
        outputs[name] = (shards, (tmp_path / f"{name}.tsv").read_text())
    shards, queries = outputs["files"]
    assert len(shards.splitlines()) == 12 and len(queries.splitlines()) == 7
    assert outputs["irds"] == outputs["files"]
