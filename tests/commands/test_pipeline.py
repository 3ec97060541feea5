"""Encode -> Lucene index -> search -> evaluate through the command-line tools, as the README shows."""
import json

import pytest
from conftest import REPO, SAMPLE, run_tool


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_tiny_model_end_to_end_with_a_topics_path_pyserini_would_misread(tiny_preset, tmp_path):
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl",
             "--output", vectors, check=True)
    topics = tmp_path / "cacm" / "queries.tsv"  # pyserini alone would parse this as CACM topics
    run_tool("encode", "queries", "--encoder", tiny_preset, "--input", SAMPLE / "queries.test.tsv",
             "--output", topics, check=True)
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index", index,
             "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1",
             check=True)
    run = tmp_path / "run.txt"
    run_tool("lucene", "search", "--index", index, "--topics", topics, "--output", run, "--impact",
             "--hits", "5", check=True)
    lines = [line.split() for line in run.read_text().splitlines()]
    qids = {line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()}
    assert {line[0] for line in lines} == qids and len(qids) >= 5
    assert all(len(line) == 6 and line[1] == "Q0" for line in lines)
    result = run_tool("lucene", "eval", "-c", "-m", "ndcg_cut.10", SAMPLE / "qrels.test.trec", run, check=True)
    assert "ndcg_cut_10" in result.stdout


def readme_demo_output() -> list[str]:
    """The demo's output as the README shows it (the code block after "It prints both runs'")."""
    text = (REPO / "README.md").read_text()
    block = text[text.index("It prints both runs'"):].split("```\n", 2)[1]
    return [line.rstrip() for line in block.splitlines()]


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_offline_demo_runs_the_main_job(tmp_path):
    """The demo prints what the README shows, line for line (metrics table and top hits), and its
    JSON line holds the README table's nDCG@10, MRR@10, R@100 and R@1000 of both runs exactly."""
    result = run_tool("demo", "--work", tmp_path / "demo")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(measured) == {"bm25", "splade-tiny", "environment"}  # environment: what it ran with
    shown = readme_demo_output()
    printed = [line.rstrip() for line in result.stdout.splitlines()]
    start = printed.index(shown[0])
    assert printed[start:start + len(shown)] == shown
    rows = {line.split()[0]: line.split()[1:] for line in shown[2:4]}
    metrics = ("ndcg_cut_10", "mrr_10", "recall_100", "recall_1000")  # the columns, each beside its expected
    assert set(rows) == {"bm25", "splade-tiny"}
    for run, cells in rows.items():
        assert {metric: measured[run][metric] for metric in metrics} == \
            {metric: float(cells[2 * number]) for number, metric in enumerate(metrics)}, run
    assert (tmp_path / "demo" / "run.splade-tiny.txt").is_file()


def test_lucene_wrapper_rejects_unknown_tool():
    result = run_tool("lucene", "frobnicate")
    assert result.returncode == 2 and "unknown tool 'frobnicate'" in result.stderr


def test_search_leaves_out_queries_without_terms(tiny_preset, tmp_path):
    """Pyserini's TSV reader refuses an empty query (an encoded query none of whose weights survived
    quantisation): the wrapper leaves it out with a warning, and it retrieves nothing."""
    vectors, index = tmp_path / "vectors", tmp_path / "index"
    run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl",
             "--output", vectors, check=True)
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index", index,
             "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1",
             check=True)
    topics = tmp_path / "beir" / "queries.tsv"  # and a path Pyserini would misread
    topics.parent.mkdir()
    run_tool("encode", "queries", "--encoder", tiny_preset, "--input", SAMPLE / "queries.test.tsv",
             "--output", topics, check=True)
    lines = topics.read_text().splitlines(keepends=True)
    emptied = lines[1].split("\t")[0]
    topics.write_text("".join(lines[:1] + [f"{emptied}\t\n"] + lines[2:]))
    run = tmp_path / "run.txt"
    result = run_tool("lucene", "search", "--index", index, "--topics", topics, "--output", run, "--impact",
                      "--hits", "5")
    assert result.returncode == 0, result.stderr
    assert "1 queries have no text (no term); they retrieve nothing" in result.stderr
    qids = {line.split("\t")[0] for line in lines}
    assert {line.split()[0] for line in run.read_text().splitlines()} == qids - {emptied}
    assert len(topics.read_text().splitlines()) == len(lines)  # the file itself is untouched
