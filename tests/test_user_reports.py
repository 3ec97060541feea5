"""What a new user ran into with `lucene search`: each is now one `error:` line before Pyserini runs,
or a warning where the run stays meaningful, and a search that succeeded prints nothing misleading."""
import json

import pytest

from conftest import SAMPLE, error_lines, run_tool

QUERIES = SAMPLE / "queries.test.tsv"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, tiny_preset):
    """An impact index of `encode corpus` shards (INDEX.lsr.json beside it), the same shards indexed
    under another name without that record, and a BM25 index of the sample text; the encoded queries."""
    work = tmp_path_factory.mktemp("user-reports")
    vectors, docs = work / "vectors", work / "docs"
    run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl", "--output", vectors,
             "--quiet", check=True)
    run_tool("encode", "queries", "--encoder", tiny_preset, "--input", QUERIES, "--output", work / "q.tsv",
             "--quiet", check=True)
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index",
             work / "impact", "--impact", "--pretokenized", "--threads", "1", check=True)
    assert (work / "impact.lsr.json").is_file()
    (work / "unrecorded").symlink_to(work / "impact")  # the same index, but nothing beside it says so
    run_tool("prepare", "corpus", "--input", SAMPLE / "corpus.jsonl", "--output", docs, "--quiet", check=True)
    run_tool("lucene", "index", "--collection", "JsonCollection", "--input", docs, "--index", work / "bm25",
             "--threads", "1", check=True)
    return work


def search(index, topics, run, *flags):
    return run_tool("lucene", "search", "--index", index, "--topics", topics, "--output", run, "--hits", "5", *flags)


def test_an_impact_index_searched_without_impact_is_refused(indexes, tmp_path):
    run = tmp_path / "run.txt"
    refused = search(indexes / "impact", indexes / "q.tsv", run)
    assert refused.returncode == 2, refused.stderr
    assert error_lines(refused) == [
        f"error: {indexes / 'impact'} is an impact index (impact.lsr.json beside it: built from `encode corpus` "
        f"shards): add --impact (without it Lucene scores the impacts as BM25 term counts)"]
    assert "Running" not in refused.stdout and not run.exists()  # refused before Pyserini ran
    assert not list(tmp_path.iterdir())
    searched = search(indexes / "impact", indexes / "q.tsv", run, "--impact")
    assert searched.returncode == 0, searched.stderr
    assert run.read_text().count("\n") >= 5


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_an_unrecorded_index_with_impact_like_frequencies_gets_a_warning(indexes, tmp_path):
    run = tmp_path / "run.txt"
    result = search(indexes / "unrecorded", indexes / "q.tsv", run)
    assert result.returncode == 0, result.stderr
    [warning] = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warning.startswith(f"warning: {indexes / 'unrecorded'}: a term occurs ") and "--impact" in warning
    assert run.is_file()
    plain = search(indexes / "bm25", QUERIES, tmp_path / "bm25.txt")  # text: no warning
    assert plain.returncode == 0 and "warning:" not in plain.stderr, plain.stderr


def test_impact_on_a_recorded_bm25_index_is_refused(indexes, tmp_path):
    """`bm25aug index --scoring bm25` records its scoring in INDEX/lsr_tokenizer.json."""
    index = tmp_path / "wordpiece"
    index.mkdir()
    for part in (indexes / "bm25").iterdir():
        (index / part.name).symlink_to(part)
    (index / "lsr_tokenizer.json").write_text(json.dumps({"model": "m", "scoring": "bm25", "tokenizer": {}}))
    refused = search(index, QUERIES, tmp_path / "run.txt", "--impact")
    assert refused.returncode == 2 and error_lines(refused) == [
        f"error: {index} is a BM25 index (lsr_tokenizer.json: built by `bm25aug index --scoring bm25`): "
        f"leave out --impact"], refused.stderr
    assert search(index, QUERIES, tmp_path / "run.txt").returncode == 0


def test_a_topics_line_without_a_tab_is_refused_naming_the_line(indexes, tmp_path):
    topics = tmp_path / "topics.tsv"
    lines = QUERIES.read_text().splitlines()
    topics.write_text("\n".join(lines[:2] + [lines[2].replace("\t", " ")] + lines[3:]) + "\n")
    run = tmp_path / "run.txt"
    refused = search(indexes / "bm25", topics, run, "--bm25")
    assert refused.returncode == 2, refused.stderr
    assert error_lines(refused) == [f"error: {topics}:3: expected 'qid<TAB>query text'"]
    assert not run.exists()


def test_a_search_names_the_paths_given_and_prints_no_lucene_notes(indexes, tmp_path):
    topics = tmp_path / "beir" / "queries.tsv"  # handed to Pyserini through a neutrally named link
    topics.parent.mkdir()
    topics.write_text(QUERIES.read_text())
    run = tmp_path / "run.txt"
    result = search(indexes / "bm25", topics, run)
    assert result.returncode == 0, result.stderr
    assert f"Running {topics} topics, saving to {run}..." in result.stdout, result.stdout
    assert ".tmp" not in result.stdout and "lsr-topics-" not in result.stdout
    assert "MemorySegmentIndexInput" not in result.stderr and "INFO:" not in result.stderr, result.stderr
