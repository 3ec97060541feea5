"""Seismic, the second serving engine (`[seismic]` extra): on the sample collection encoded with
SPLADE-tiny, the exact Seismic run equals the Lucene run line for line (docids, ranks, scores);
`Searcher(engine="seismic")` equals the command; ties are ordered by docid; the large-vocabulary
path; the missing extra and bad inputs are one line each."""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

from conftest import SAMPLE, encoded_sample, error_lines, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.readers import read_queries

import seismic  # noqa: E402,F401  pinned (pyseismic-lsr): a broken install fails, not skips

from lsr_pyserini.engines.seismic import index as engine  # noqa: E402

QUERIES = SAMPLE / "queries.test.tsv"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """SPLADE-tiny vectors of the sample, its Lucene and Seismic indexes and their full runs."""
    work = tmp_path_factory.mktemp("seismic")
    return encoded_sample(work, ("seismic", "index", "--input", work / "vectors", "--index", work / "seismic"),
                          ("seismic", "search", "--index", work / "seismic", "--topics", work / "queries.tsv",
                           "--output", work / "run.seismic.txt", "--hits", "1000"))


def without_tag(path):
    return [line.rsplit(" ", 1)[0] for line in path.read_text().splitlines()]


def test_exact_seismic_run_is_the_lucene_run_line_for_line(sample):
    lucene, seismic = without_tag(sample / "run.lucene.txt"), without_tag(sample / "run.seismic.txt")
    assert len(lucene) > 20 and len({line.split()[0] for line in lucene}) == 7
    assert seismic == lucene
    manifest = json.loads((sample / "seismic" / "seismic.json").read_text())
    assert manifest["exact"] and manifest["documents"] == 12 and not manifest["large_vocabulary"]


def test_searcher_with_the_seismic_engine_equals_the_command(sample):
    import lsr_pyserini

    loaded = list(read_queries(str(QUERIES)))
    texts, qids = [q.text for q in loaded], [q.id for q in loaded]
    searcher = lsr_pyserini.Searcher(str(sample / "seismic"), encoder="splade-tiny", engine="seismic")
    expected = {}
    for line in without_tag(sample / "run.seismic.txt"):
        qid, _, docid, _, score = line.split()
        expected.setdefault(qid, []).append((docid, float(score)))
    for threads in (1, 2):
        got = searcher.batch_search(texts, qids, k=5, threads=threads)
        assert {qid: [(h.docid, h.score) for h in hits] for qid, hits in got.items()} == \
            {qid: expected.get(qid, [])[:5] for qid in qids}
    # texts and titles come from the shards the index was built from (the search page shows the title apart)
    assert searcher.doc_fields(["s1", "nope"]) == [{"contents": searcher.doc("s1"), "title": "Vitamin D and bone health"},
                                                   None]
    cut = lsr_pyserini.Searcher(str(sample / "seismic"), encoder="splade-tiny", engine="seismic",
                                engine_options={"query_cut": 1})
    assert cut.search(texts[0], k=3) != searcher.search(texts[0], k=3)  # one query term: another ranking
    for kwargs, message in [
        ({"engine": "elastic"}, "engine 'elastic': expected one of lucene, bm25, sharded, seismic, dense"),
        ({"engine": "seismic", "engine_options": {"heap": 1}}, "engine 'seismic' has no option 'heap'"),
        ({"engine": "seismic", "engine_options": {"heap_factor": 0}}, "heap_factor: expected a finite number > 0"),
        ({"engine": "lucene", "engine_options": {"query_cut": 3}}, "engine 'lucene' has no option 'query_cut'"),
    ]:
        with pytest.raises(InputError, match=message):
            lsr_pyserini.Searcher(str(sample / "seismic"), encoder="splade-tiny", **kwargs)
    with pytest.raises(InputError, match="not a Seismic index"):
        lsr_pyserini.Searcher(str(sample / "lucene"), encoder="splade-tiny", engine="seismic")
    with pytest.raises(InputError, match="searched by engine 'seismic': give the encoder"):
        lsr_pyserini.Searcher(str(sample / "seismic"), engine="seismic")


def write_shard(folder, vectors: dict[str, dict]):
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "part-00000.jsonl", "w") as handle:
        for docid, vector in vectors.items():
            handle.write(json.dumps({"id": docid, "contents": "", "vector": vector}) + "\n")
    return folder


def brute_force(vectors, query, k):
    scores = {docid: sum(query.get(term, 0) * impact for term, impact in vector.items())
              for docid, vector in vectors.items()}
    return sorted(((d, float(s)) for d, s in scores.items() if s > 0), key=lambda hit: (-hit[1], hit[0]))[:k]


def tied_collection():
    """60 documents whose scores tie in large groups (only 3 distinct vectors)."""
    shapes = [{"a": 2, "b": 1}, {"a": 1, "c": 3}, {"b": 2, "c": 1}]
    return {f"doc{(i * 37) % 60:02d}": dict(shapes[i % 3]) for i in range(60)}


def test_ties_are_ordered_by_docid_even_beyond_k(tmp_path):
    vectors = tied_collection()
    engine.build_seismic_index(str(write_shard(tmp_path / "v", vectors)), str(tmp_path / "ix"))
    searcher = engine.SeismicIndex(str(tmp_path / "ix"))
    for query in ({"a": 1}, {"a": 3, "b": 1, "c": 2}, {"c": 5, "zzz": 4}):
        for k in (1, 7, 20, 21, 100):
            assert searcher.search_one("q", query, k) == brute_force(vectors, query, k), (query, k)
    assert searcher.search_one("q", {"unknown": 3}, 10) == []


def test_large_vocabulary_index_and_refusal(tmp_path, monkeypatch):
    vectors = tied_collection()
    shards = write_shard(tmp_path / "v", vectors)
    monkeypatch.setattr(engine, "SMALL_VOCABULARY", 2)  # 3 terms: beyond the (lowered) 16-bit limit
    with pytest.raises(InputError, match="3 distinct terms exceed Seismic's 16-bit component ids"):
        engine.build_seismic_index(str(shards), str(tmp_path / "refused"),
                                   engine.SeismicBuild(large_vocabulary="never"))
    assert not (tmp_path / "refused").exists() or not any((tmp_path / "refused").iterdir())
    manifest = engine.build_seismic_index(str(shards), str(tmp_path / "lv"))
    assert manifest["large_vocabulary"]
    searcher = engine.SeismicIndex(str(tmp_path / "lv"))
    assert type(searcher.index).__name__ == "SeismicIndexLV"
    query = {"a": 3, "b": 1, "c": 2}
    assert searcher.search_one("q", query, 25) == brute_force(vectors, query, 25)


def test_beyond_65536_terms_the_16_bit_index_is_refused_in_one_line(tmp_path):
    vectors = {f"d{i}": {f"t{i}_{j}": 1 for j in range(1093)} for i in range(60)}  # 65,580 terms
    with pytest.raises(InputError, match="65,580 distinct terms exceed Seismic's 16-bit component ids"):
        engine.build_seismic_index(str(write_shard(tmp_path / "v", vectors)), str(tmp_path / "ix"),
                                   engine.SeismicBuild(large_vocabulary="never"))


def test_the_missing_extra_is_one_line_naming_it(tmp_path, monkeypatch):
    from lsr_pyserini.engines.seismic.command import main

    monkeypatch.setitem(sys.modules, "seismic", None)  # import seismic raises ImportError
    with pytest.raises(InputError, match=r"pip install 'lsr-pyserini\[seismic\]'"):
        main(["index", "--input", str(tmp_path), "--index", str(tmp_path / "ix")])
    (tmp_path / "seismic.json").write_text(json.dumps({"format": engine.FORMAT}))
    with pytest.raises(InputError, match=r"pip install 'lsr-pyserini\[seismic\]'"):
        engine.SeismicIndex(str(tmp_path))


def test_bad_inputs_are_one_line(tmp_path):
    shards = write_shard(tmp_path / "v", {"d1": {"a": 1}})
    bad = write_shard(tmp_path / "bad", {"d1": {"a": "x"}})
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine")
    (tmp_path / "q.tsv").write_text("no tab here\n")
    ok = run_tool("seismic", "index", "--input", shards, "--index", tmp_path / "ix")  # as a user runs it
    assert ok.returncode == 0 and "indexed 1 documents" in ok.stderr, ok.stderr
    from lsr_pyserini.engines.seismic.command import main
    cases = [
        (("index", "--input", tmp_path / "absent", "--index", tmp_path / "x"), "no such folder"),
        (("index", "--input", bad, "--index", tmp_path / "x"), "term 'a' has impact 'x'"),
        (("index", "--input", shards, "--index", tmp_path / "ix"), "already exists: pass --overwrite"),
        (("index", "--input", shards, "--index", tmp_path / "foreign"), "not written by this tool"),
        (("search", "--index", tmp_path / "absent", "--topics", tmp_path / "q.tsv", "--output", tmp_path / "r"),
         "no such Seismic index folder"),
        (("search", "--index", tmp_path / "ix", "--topics", tmp_path / "q.tsv", "--output", tmp_path / "r"),
         "expected 'qid<TAB>terms repeated by impact'"),
    ]
    for args, message in cases:
        with pytest.raises(InputError, match=re.escape(message)):
            main([str(arg) for arg in args])
    result = run_tool("seismic", "search", "--index", tmp_path / "ix", "--topics", tmp_path / "q.tsv",
                      "--output", tmp_path / "r")
    assert result.returncode == 2 and len(error_lines(result)) == 1, result.stderr
    (tmp_path / "ix" / "vocabulary.json").write_text("[\"a\"")  # truncated
    with pytest.raises(InputError, match="truncated or not JSON"):
        engine.SeismicIndex(str(tmp_path / "ix"))


@pytest.mark.parametrize("vector, message", [
    ({"a": 1, "b": True}, "term 'b' has impact True"),
    ({"a": 1, "b": -2}, "term 'b' has impact -2"),
    ({"a": float("nan")}, "term 'a' has impact nan"),
    ({"a": None}, "term 'a' has impact None"),
    ({"a": [1]}, "term 'a' has impact [1]"),
    ({"a b": 1, "": 2}, "term 'a b' is empty or contains whitespace"),
    ({"a": 1, "": 2}, "term '' is empty or contains whitespace"),
    ({"a\u00a0b": 1}, "term 'a\\xa0b' is empty or contains whitespace"),
    ({"a\tb": 1, "c": 2}, "term 'a\\tb' is empty or contains whitespace"),
])
def test_the_whole_vector_check_sends_every_bad_entry_to_the_line_that_names_it(tmp_path, vector, message):
    good = {"d1": {"a": 3, "b": 2.5, "c": 0}}
    shards = write_shard(tmp_path / "v", {**good, "d2": vector})
    with pytest.raises(InputError, match=re.escape(f"part-00000.jsonl:2: {message}")):
        list(engine.read_vectors(shards))
    assert list(engine.read_vectors(write_shard(tmp_path / "ok", good))) == [("d1", good["d1"])]


def test_the_progress_bar_counts_every_byte_of_the_shards(tmp_path):
    shards = write_shard(tmp_path / "v", {f"d{i}": {"a": i + 1, "b": 2} for i in range(3000)})

    class Bar:
        n = 0

        def update(self, by):
            self.n += by

        def set_description(self, text):
            self.text = text

    bar = Bar()
    engine.build_seismic_index(str(shards), str(tmp_path / "ix"), progress=bar)
    assert bar.n == engine.vector_bytes(shards) > 0 and "read 3,000 documents" in bar.text


def test_the_knob_sweep_measures_recall_against_a_given_exact_run(sample, tmp_path):
    """bench_seismic_knobs.py --reference: a pruned index's whole-query search is not exact, so recall
    is measured against another engine's exact run when one is given; a query it lacks is refused."""
    import subprocess

    from conftest import REPO

    def sweep(*extra):
        return subprocess.run([sys.executable, REPO / "benchmarks" / "bench_seismic_knobs.py", "--index",
                               sample / "seismic", "--queries", sample / "queries.tsv", "--qrels",
                               SAMPLE / "qrels.test.trec", "--json", tmp_path / "knobs.json", "--query-cuts", "2",
                               "--heap-factors", "1.0", "--ks", "3", "--warmup", "1", *extra],
                              capture_output=True, text=True)

    def whole_query_recall():
        return json.loads((tmp_path / "knobs.json").read_text())["settings"][0]["k"]["3"]["recall_of_exact_top_k"]

    assert sweep("--reference", sample / "run.lucene.txt").returncode == 0
    assert whole_query_recall() == 1.0  # the exact index against Lucene's run: the same top 3
    lines = (sample / "run.lucene.txt").read_text().splitlines()
    firsts = {}
    for line in lines:  # a reference whose top 3 are each query's last documents, out of the top 3
        qid, _, docid, *_ = line.split()
        firsts.setdefault(qid, []).append(docid)
    shifted = tmp_path / "shifted.txt"
    shifted.write_text("".join(f"{qid} Q0 {docid} {rank} {100 - rank} ref\n" for qid, docids in firsts.items()
                               for rank, docid in enumerate(reversed(docids), start=1)))
    assert sweep("--reference", shifted).returncode == 0
    assert whole_query_recall() < 1.0
    assert sweep().returncode == 0 and whole_query_recall() == 1.0  # default: its own whole-query search
    short = tmp_path / "short.txt"
    short.write_text("\n".join(line for line in lines if not line.startswith(lines[0].split()[0] + " ")) + "\n")
    refused = sweep("--reference", short)
    assert refused.returncode != 0 and "no ranking for query" in refused.stderr.splitlines()[-1]


def test_an_index_moved_with_its_shards_finds_them_and_keeps_its_encoder(sample, tmp_path, tiny_mlm):
    """The manifest names the shards relative to the index too (`input_relative`), and records their
    encoder: a folder of both, copied elsewhere under other names, searches and explains as before
    from the copy's own shards, and refuses another encoder's queries."""
    import shutil

    import lsr_pyserini

    moved = tmp_path / "moved"
    shutil.copytree(sample / "seismic", moved / "renamed")
    shutil.copytree(sample / "vectors", moved / "vectors")
    shutil.copy(sample / "vectors.manifest.json", moved / "vectors.manifest.json")
    loaded = list(read_queries(str(QUERIES)))
    texts, qids = [q.text for q in loaded], [q.id for q in loaded]
    original = lsr_pyserini.Searcher(str(sample / "seismic"), encoder="splade-tiny")
    copy = lsr_pyserini.Searcher(str(moved / "renamed"), encoder="splade-tiny")
    assert Path(copy.engine.input_folder()).resolve() == (moved / "vectors").resolve()
    assert {q: [(h.docid, h.score) for h in hits] for q, hits in copy.batch_search(texts, qids, k=5).items()} == \
        {q: [(h.docid, h.score) for h in hits] for q, hits in original.batch_search(texts, qids, k=5).items()}
    assert copy.doc("s1") == original.doc("s1")
    assert json.loads((moved / "renamed" / "seismic.json").read_text())["encoder"]["family"] == "splade"
    with pytest.raises(InputError, match="its documents were encoded with preset 'splade-tiny'"):
        lsr_pyserini.Searcher(str(moved / "renamed"), encoder="splade-tiny", encoder_options={"model": str(tiny_mlm)})
