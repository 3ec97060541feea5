"""The reproductions under eval/regressions on the real SciFact collection (slow: minutes).

Skipped with a message when ../shared/data is absent (a user's machine will not have it).
"""
import json
import os

import pytest

from conftest import REPO, run_tool

# Encoding SciFact with MiniLM alone takes ~5 min on 2 cores: run only when asked for
# (LSR_PYSERINI_ALL_REGRESSIONS=1), or directly with `python -m lsr_pyserini.regress FILE`.
ON_REQUEST = pytest.mark.skipif(os.environ.get("LSR_PYSERINI_ALL_REGRESSIONS") != "1",
                                reason="long regression: set LSR_PYSERINI_ALL_REGRESSIONS=1 to run it")
REGRESSIONS = ["scifact-bm25.yaml", "scifact-splade-tiny.yaml",
               pytest.param("scifact-bm25-minilm-fusion.yaml", marks=ON_REQUEST),
               pytest.param("scifact-bm25-augmented.yaml", marks=ON_REQUEST),  # trains: ~4-7 min
               pytest.param("scifact-bm25-augmented-minilm.yaml", marks=ON_REQUEST),  # trains: ~12 min
               pytest.param("scifact-ssr.yaml", marks=ON_REQUEST),
               pytest.param("scifact-ssr-finetuned.yaml", marks=ON_REQUEST),  # trains: ~40 min after embedding
               pytest.param("scifact-splade-tiny-finetuned.yaml", marks=ON_REQUEST),  # trains: ~30 min
               pytest.param("scifact-tildev2.yaml", marks=ON_REQUEST),  # trains: ~1 h
               pytest.param("scifact-sparseembed.yaml", marks=ON_REQUEST)]


@pytest.mark.slow
@pytest.mark.parametrize("name", REGRESSIONS)
def test_regression_reproduces_expected_metrics(name, shared_data, tmp_path):
    result = run_tool("regress", REPO / "eval" / "regressions" / name, "--data-root", shared_data,
                      "--work", tmp_path / "work")
    assert result.returncode == 0, result.stdout + result.stderr
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert measured and all("ndcg_cut_10" in m for m in measured.values())


def test_regress_reports_a_missed_expectation(tmp_path):
    """A pipeline whose metric misses its expectation exits 1 and still prints the JSON line."""
    from conftest import SAMPLE

    spec = (SAMPLE / "sample-splade-tiny.yaml").read_text()
    spec = spec.split("steps:")[0] + """steps:
  - prepare corpus --input {data}/corpus.jsonl --output {work}/docs --quiet
  - lucene index --collection JsonCollection --input {work}/docs --index {work}/index --generator DefaultLuceneDocumentGenerator --threads 1
  - lucene search --index {work}/index --topics {data}/queries.test.tsv --output {work}/run.txt --bm25 --hits 10
runs:
  bm25: "{work}/run.txt"
expected:
  bm25:
    ndcg_cut_10: {value: 0.1, tolerance: 0.01}
"""
    path = tmp_path / "miss.yaml"
    path.write_text(spec)
    result = run_tool("regress", path, "--data-root", SAMPLE.parent, "--work", tmp_path / "work")
    assert result.returncode == 1
    assert "MISS bm25: ndcg_cut_10" in result.stderr
    assert "bm25" in json.loads(result.stdout.strip().splitlines()[-1])


def test_regress_bad_files(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("collection: x\n")
    result = run_tool("regress", path)
    assert result.returncode == 2 and "missing required key 'qrels'" in result.stderr
    result = run_tool("regress", tmp_path / "none.yaml")
    assert result.returncode == 2 and "no such regression file" in result.stderr
