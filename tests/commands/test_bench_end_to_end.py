"""`bench --text-queries --encoder`: whole queries timed from their text, beside Lucene BM25 from text
and Pyserini's own impact searcher (engine `pyserini`) on the same index and checkpoint.

On the sample encoded with SPLADE-tiny: each impact engine gets a second row measured end to end,
whose run is the pre-encoded run line for line (the query encoded inside the timed call is the one
`encode queries` wrote); the rows from text say so in the JSON, the table and the plot; `pyserini`
searches the lucene index (one build for both) with Pyserini's encoder, whose rounding differs;
bad combinations are one line each."""
from __future__ import annotations

import json

import pytest

from conftest import SAMPLE, encoded_sample, error_lines, run_tool

QUERIES = SAMPLE / "queries.test.tsv"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    return encoded_sample(tmp_path_factory.mktemp("e2e"))


def test_rows_from_text_beside_the_encoded_ones(sample, tmp_path):
    work, out, png = tmp_path / "work", tmp_path / "bench.json", tmp_path / "bench.png"
    args = ["--vectors", sample / "vectors", "--queries", sample / "queries.tsv", "--qrels", SAMPLE / "qrels.test.trec",
            "--text-queries", QUERIES, "--encoder", "splade-tiny", "--engines", "lucene,seismic,bm25,pyserini",
            "--k", "3,10", "--work", work, "--json", out, "--plot", png, "--quiet"]
    result = run_tool("bench", *args, check=True)
    report = json.loads(out.read_text())
    rows = {(row["engine"], row["end_to_end"]): row for row in report["rows"]}
    assert set(rows) == {("lucene", False), ("lucene", True), ("seismic", False), ("seismic", True), ("bm25", True),
                         ("pyserini", True)} and report["reference"] == "lucene"
    assert [(row["engine"], row["end_to_end"]) for row in report["rows"]][:2] == [("lucene", False), ("lucene", True)]
    for (engine, end_to_end), row in rows.items():
        assert row["k"]["10"]["p50_ms"] > 0 and row["queries"] == 7, row
        if engine in ("lucene", "seismic"):
            assert row["k"]["3"]["recall"] == row["k"]["10"]["recall"] == 1.0, row
        if end_to_end and engine != "bm25":
            assert row["measured_with"]["encoder" if engine != "pyserini" else "options"], row
    for k in (3, 10):  # encoded inside the timed call: the same queries, the same run
        encoded = (work / "runs" / "lucene-12" / f"run.{k}.txt").read_text().splitlines()
        from_text = (work / "runs" / "lucene-e2e-12" / f"run.{k}.txt").read_text().splitlines()
        assert [line.split()[:3] for line in from_text] == [line.split()[:3] for line in encoded] and encoded
    pyserini = rows[("pyserini", True)]
    assert pyserini["options"]["encoder"] == "splade-tiny" and pyserini["k"]["10"]["recall"] >= 0.9
    assert abs(pyserini["ndcg_cut_10"] - rows[("lucene", False)]["ndcg_cut_10"]) < 0.1
    assert not (work / "indexes" / "pyserini-12").exists() and (work / "indexes" / "lucene-12").is_dir()
    assert rows[("lucene", True)]["resident_bytes"] > rows[("lucene", False)]["resident_bytes"]  # the model
    lines = result.stdout.splitlines()
    assert any(line.startswith("lucene [e2e] | 12 |") for line in lines)
    assert any(line.startswith("pyserini [e2e] | 12 |") for line in lines)
    assert any(line.startswith("lucene | 12 |") for line in lines)
    assert any(line.startswith("[e2e]: timed from the query's text") for line in lines)
    assert set(report["growth_exponents"]) == {"lucene", "lucene [e2e]", "seismic", "seismic [e2e]", "bm25 [e2e]",
                                               "pyserini [e2e]"}
    assert png.stat().st_size > 0
    # kept measurements are reused; another query encoder is refused before any work
    kept = {path: path.stat().st_mtime_ns for path in work.rglob("figures.json")}
    run_tool("bench", *args, check=True)
    assert {path: path.stat().st_mtime_ns for path in work.rglob("figures.json")} == kept
    cases = [
        ([a for a in args if a not in ("--encoder", "splade-tiny")], "engine pyserini encodes the queries' text "
                                                                    "with a checkpoint: give --encoder"),
        ([a for a in args if a not in ("--text-queries", QUERIES)] + ["--engines", "lucene"],
         "--encoder times queries from their text: give --text-queries"),
        (args + ["--encoder", "tildev2"], "its documents were encoded with"),
    ]
    for given, message in cases:
        refused = run_tool("bench", *given)
        assert refused.returncode == 2 and message in refused.stderr and len(error_lines(refused)) == 1, \
            refused.stderr


def test_pyserini_engine_from_the_api_and_its_options(sample):
    """Searcher(index, engine="pyserini", engine_options=...): Pyserini's own searcher from text;
    `min_idf` drops the query terms at or under that idf, `encoder` is required and must be SPLADE."""
    from lsr_pyserini import Searcher
    from lsr_pyserini.core.errors import InputError

    text = QUERIES.read_text().splitlines()[0].split("\t", 1)[1]
    ours = Searcher(sample / "lucene", encoder="splade-tiny").search(text, k=5)
    theirs = Searcher(sample / "lucene", engine="pyserini", engine_options={"encoder": "splade-tiny"}).search(text, k=5)
    assert [hit.docid for hit in theirs][:3] == [hit.docid for hit in ours][:3] and len(theirs) == 5
    assert Searcher(sample / "lucene", engine="pyserini",
                    engine_options={"encoder": "splade-tiny", "min_idf": 100.0}).search(text, k=5) == []
    with pytest.raises(InputError, match="engine 'pyserini' loads Pyserini's SPLADE query encoder: give its"):
        Searcher(sample / "lucene", engine="pyserini")
    with pytest.raises(InputError, match="engine 'pyserini' encodes the queries' text itself"):
        Searcher(sample / "lucene", engine="pyserini", encoder="splade-tiny", engine_options={"encoder": "splade-tiny"})
