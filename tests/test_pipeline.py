"""Encode -> Lucene index -> search -> evaluate through the command-line tools, as the README shows."""
import json

from conftest import SAMPLE, run_tool


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


def test_offline_demo_runs_the_main_job(tmp_path):
    result = run_tool("demo", "--work", tmp_path / "demo")
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout.strip().splitlines()[-1])
    assert set(measured) == {"bm25", "splade-tiny", "environment"}  # environment: what it ran with
    assert measured["splade-tiny"]["ndcg_cut_10"] > 0.5
    assert (tmp_path / "demo" / "run.splade-tiny.txt").is_file()
    assert "top 3 hits for q6" in result.stdout and "  splade-tiny\n    1. " in result.stdout


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
