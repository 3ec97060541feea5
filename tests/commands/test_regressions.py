"""The reproductions under eval/regressions on the real SciFact collection (slow: minutes).

Without ../shared/data they skip with a message that tests/allowed-skips.txt does not list, so the
session fails (CI has the data); a user without it allows that skip by hand (docs/ci.md).
"""
import json
import os

import pytest

import scifact_engines
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
               pytest.param("scifact-tilde.yaml", marks=ON_REQUEST),  # trains: ~25 min
               pytest.param("scifact-sparseembed.yaml", marks=ON_REQUEST),
               pytest.param("scifact-splade-tiny-int8.yaml", marks=ON_REQUEST),  # ~3 min
               pytest.param("scifact-bm25-minilm-fusion-int8.yaml", marks=ON_REQUEST),  # ~8 min
               pytest.param("scifact-promptreps-gemma3-270m.yaml", marks=ON_REQUEST),  # ~45 min
               pytest.param("scifact-bgem3-minilm.yaml", marks=ON_REQUEST)]  # trains: ~25 min
# The CI tier: one short reproduction per family (subsets of SciFact, short schedules), each with
# margins over its untrained model and a baseline on the same subset; every file in eval/regressions/ci.
CI_TIER = sorted(f"ci/{path.name}" for path in (REPO / "eval" / "regressions" / "ci").glob("*.yaml"))


@pytest.mark.slow
@pytest.mark.parametrize("name", REGRESSIONS + CI_TIER)
def test_regression_reproduces_expected_metrics(name, shared_data, tmp_path, tiny_encoder_only, record_property):
    result = run_tool("regress", REPO / "eval" / "regressions" / name, "--data-root", shared_data,
                      "--work", tmp_path / "work")
    try:  # regress's last line: the measured metrics, a miss or not
        measured = json.loads(result.stdout.strip().splitlines()[-1])
    except (IndexError, ValueError):
        measured = {}
    runs = {run: metrics for run, metrics in measured.items() if run not in ("efficiency", "environment")}
    if runs:  # listed at the session's end (conftest), with the CPU kind
        record_property("measured", json.dumps(runs, sort_keys=True))
    assert result.returncode == 0, result.stdout + result.stderr
    assert runs and all("ndcg_cut_10" in m for m in runs.values())
    assert measured["environment"]["torch"] and measured["environment"]["threads"] >= 1
    if name == "scifact-splade-tiny.yaml":
        assert_on_the_fly_run_equals_pre_encoded(tmp_path / "work", shared_data / "scifact" / "queries.test.tsv")
        scifact_engines.check_impact_engines(tmp_path / "work", shared_data, tmp_path, tiny_encoder_only)
        scifact_engines.check_new_user_findings(tmp_path / "work", shared_data, tmp_path)
    if name == "scifact-bm25.yaml":
        scifact_engines.check_bm25_search_command(tmp_path / "work", shared_data, tmp_path)


ON_THE_FLY = """
import sys
import lsr_pyserini
from lsr_pyserini.core.readers import read_queries
from lsr_pyserini.core.writer import run_lines
lsr_pyserini.start_jvm()
from pyserini.search.lucene import LuceneImpactSearcher
index, queries, output = sys.argv[1:]
searcher = LuceneImpactSearcher(index, query_encoder=lsr_pyserini.QueryEncoder("splade-tiny"))
loaded = list(read_queries(queries))
hits = searcher.batch_search([q.text for q in loaded], [q.id for q in loaded], k=1000, threads=2)
with open(output, "w") as out:
    out.writelines(run_lines({q.id: [(h.docid, h.score) for h in hits[q.id]] for q in loaded}, "Anserini"))
"""


def assert_on_the_fly_run_equals_pre_encoded(work, queries):
    """Pyserini's LuceneImpactSearcher with lsr_pyserini.QueryEncoder: the pre-encoded top-1000 run."""
    import subprocess
    import sys

    output = work / "run.on-the-fly.txt"
    subprocess.run([sys.executable, "-c", ON_THE_FLY, str(work / "index"), str(queries), str(output)],
                   check=True, capture_output=True, text=True)
    pre_encoded = [line.split()[:5] for line in (work / "run.splade-tiny.txt").read_text().splitlines()]
    on_the_fly = [line.split()[:5] for line in output.read_text().splitlines()]
    assert len(on_the_fly) == len(pre_encoded) and on_the_fly == pre_encoded


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
