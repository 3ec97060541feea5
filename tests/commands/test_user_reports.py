"""What a new user ran into with `lucene search`: each is now one `error:` line before Pyserini runs,
or a warning where the run stays meaningful, and a search that succeeded prints nothing misleading."""
import json
import shutil

import pytest

from conftest import SAMPLE, error_lines, run_tool

QUERIES = SAMPLE / "queries.test.tsv"


@pytest.fixture(scope="module")
def indexes(tmp_path_factory, tiny_preset):
    """An impact index of `encode corpus` shards (lsr_index.json in it), a copy of it under another
    name without that record, and a BM25 index of the sample text; the encoded queries."""
    work = tmp_path_factory.mktemp("user-reports")
    vectors, docs = work / "vectors", work / "docs"
    run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl", "--output", vectors,
             "--quiet", check=True)
    run_tool("encode", "queries", "--encoder", tiny_preset, "--input", QUERIES, "--output", work / "q.tsv",
             "--quiet", check=True)
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index",
             work / "impact", "--impact", "--pretokenized", "--threads", "1", check=True)
    assert (work / "impact" / "lsr_index.json").is_file()
    shutil.copytree(work / "impact", work / "unrecorded", ignore=shutil.ignore_patterns("lsr_index.json"))
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
        f"error: {indexes / 'impact'} is an impact index (lsr_index.json in it: built from `encode corpus` "
        f"shards): add --impact (without it Lucene scores the impacts as BM25 term counts)"]
    assert "Running" not in refused.stdout and not run.exists()  # refused before Pyserini ran
    assert not list(tmp_path.iterdir())
    searched = search(indexes / "impact", indexes / "q.tsv", run, "--impact")
    assert searched.returncode == 0, searched.stderr
    assert run.read_text().count("\n") >= 5


def test_an_impact_index_without_its_record_is_examined_and_bm25_refused(indexes, tmp_path):
    """A copy of an impact index without lsr_index.json (an index of before copied without the record
    beside it): its norms (1 for every document under Anserini's ImpactSimilarity) tell it is an
    impact index, so BM25 over its impacts is refused, in one line, as on the original."""
    run = tmp_path / "run.txt"
    for flags in ((), ("--bm25",)):
        refused = search(indexes / "unrecorded", QUERIES, run, *flags)
        assert refused.returncode == 2 and error_lines(refused) == [
            f"error: {indexes / 'unrecorded'} is an impact index (no record in it; examined: every document's norm "
            f"is 1 and term frequencies are impacts): add --impact (without it Lucene scores the impacts as BM25 "
            f"term counts)"], refused.stderr
        assert not run.exists()


def test_impact_on_a_recorded_bm25_index_is_refused(indexes, tmp_path):
    """`bm25aug index --scoring bm25` records its scoring in INDEX/lsr_tokenizer.json."""
    index = tmp_path / "wordpiece"
    index.mkdir()
    for part in (indexes / "bm25").iterdir():
        if part.name != "lsr_index.json":  # bm25aug's own record says what it is
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


# -- a topics file checked against the index; Pyserini's printed errors as failures ------

def test_raw_text_topics_on_an_impact_index_are_refused_naming_both_sides(indexes, tmp_path):
    """Finding 1: the raw-text queries searched with --impact scored 0.2451 instead of 0.6436, exit 0.
    `encode queries` records what it wrote (q.tsv.lsr.json); raw text is refused, an expert's flag
    searches it anyway, and the encoded file of the index's own encoder is searched."""
    assert json.loads((indexes / "q.tsv.lsr.json").read_text())["kind"] == "encoded-queries"
    run = tmp_path / "run.txt"
    refused = search(indexes / "impact", QUERIES, run, "--impact")
    assert refused.returncode == 2, refused.stderr
    [line] = error_lines(refused)
    assert line.startswith(f"error: {QUERIES} reads as query text (line 1: ") and str(indexes / "impact") in line
    assert "encode queries" in line and "--unrecorded-topics" in line, line
    assert "Running" not in refused.stdout and not list(tmp_path.iterdir())
    expert = search(indexes / "impact", QUERIES, run, "--impact", "--unrecorded-topics")
    assert expert.returncode == 0 and run.is_file(), expert.stderr
    own = search(indexes / "impact", indexes / "q.tsv", tmp_path / "own.txt", "--impact")
    assert own.returncode == 0 and not error_lines(own), own.stderr


def test_another_encoders_queries_and_encoded_queries_on_bm25_are_refused(indexes, tmp_path):
    """Finding 1: queries of another encoder than the documents', and encoded queries searched as
    text by BM25, are refused in one line naming both sides, by `lucene search`, `search` and
    `seismic search` alike."""
    from conftest import build_tiny_bert

    other = build_tiny_bert(tmp_path / "other-model", seed=1)
    preset = tmp_path / "other.yaml"
    preset.write_text(f"family: splade\nmodel: {other}\npooling: max\nquery_max_length: 16\nimpact_scale: 100\n")
    other_queries = tmp_path / "other-q.tsv"
    run_tool("encode", "queries", "--encoder", preset, "--input", QUERIES, "--output", other_queries, "--quiet",
             check=True)
    run = tmp_path / "runs" / "run.txt"
    for refused in (search(indexes / "impact", other_queries, run, "--impact"),
                    run_tool("search", "--index", indexes / "impact", "--encoded", "--topics", other_queries,
                             "--output", run)):
        assert refused.returncode == 2, refused.stderr
        [line] = error_lines(refused)
        assert line.startswith(f"error: {other_queries} holds queries encoded with splade model {other}, but "
                               f"{indexes / 'impact'}'s documents were encoded with splade model "), line
        assert line.endswith("(model differs): encode the queries with the documents' encoder"), line
    bm25 = search(indexes / "bm25", indexes / "q.tsv", run, "--bm25")
    assert bm25.returncode == 2 and error_lines(bm25)[0].startswith(
        f"error: {indexes / 'q.tsv'} holds queries already encoded by `encode queries` (splade model "), bm25.stderr
    text = run_tool("search", "--index", indexes / "impact", "--encoded", "--topics", QUERIES, "--output", run)
    assert text.returncode == 2 and error_lines(text)[0].startswith(f"error: {QUERIES} reads as query text"), text.stderr
    pytest.importorskip("seismic")
    run_tool("seismic", "index", "--input", indexes / "vectors", "--index", tmp_path / "seismic", "--quiet", check=True)
    seismic = run_tool("seismic", "search", "--index", tmp_path / "seismic", "--topics", QUERIES, "--output", run)
    assert seismic.returncode == 2 and error_lines(seismic)[0].startswith(f"error: {QUERIES} reads as query text")
    assert not run.parent.exists()


def test_pyserinis_printed_errors_exit_non_zero_in_one_line_creating_nothing(indexes, tmp_path, monkeypatch):
    """Finding 2 and 3: a mistyped index exited 0 with Pyserini's `Unrecognized index name`; a topics
    path missing (run from another folder) ended in a traceback and left the output folder; an
    indexer input that is no folder, a folder that is no index, missing qrels or run: each is now
    one `error:` line, exit status 2, and nothing new on disk."""
    qrels = SAMPLE / "qrels.test.trec"
    mistakes = [
        (("search", "--index", "indexes/mistyped", "--topics", QUERIES, "--output", "out/run.txt", "--bm25"),
         "error: indexes/mistyped: no such index folder (nor the name of a Pyserini prebuilt index)"),
        (("search", "--index", indexes / "bm25", "--topics", "runs/queries.tsv", "--output", "out/run.txt", "--bm25"),
         f"error: runs/queries.tsv: no such topics file (nor the name of Pyserini topics); relative to {tmp_path}"),
        (("search", "--index", indexes / "vectors", "--topics", QUERIES, "--output", "out/run.txt", "--impact"),
         f"error: {indexes / 'vectors'}: not a Lucene index (no segments_N file in it)"),
        (("index", "--collection", "JsonCollection", "--input", "docs", "--index", "out/index", "--threads", "1"),
         "error: docs: no such folder of documents"),
        (("index", "--collection", "JsonCollection", "--input", QUERIES, "--index", "out/index", "--threads", "1"),
         f"error: {QUERIES}: not a folder (Pyserini's indexer reads the folder of documents or shards, e.g. "
         f"`encode corpus --output` or `prepare corpus --output`)"),
        (("eval", "-m", "ndcg_cut.10", "qrels.txt", "run.txt"),
         "error: qrels.txt: no such qrels file (nor the name of Pyserini qrels)"),
        (("eval", "-m", "ndcg_cut.10", qrels, "run.txt"), "error: run.txt: no such run file"),
    ]
    for args, expected in mistakes:
        result = run_tool("lucene", *args, cwd=tmp_path)
        assert (result.returncode, result.stderr.strip().splitlines()) == (2, [expected]), (args, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        assert not list(tmp_path.iterdir()), (args, list(tmp_path.iterdir()))


def test_an_exception_or_no_output_of_pyserini_is_a_failure_in_one_line(indexes, tmp_path, monkeypatch, capsys):
    """The safety net behind the checks: whatever Pyserini reports by raising, or by printing and
    writing nothing, is one line and a failure, and its scratch output is removed."""
    import runpy

    from lsr_pyserini.engines.lucene import command as lucene
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.core.outputs import release_outputs

    monkeypatch.setattr(runpy, "run_module", lambda *a, **k: (_ for _ in ()).throw(ValueError("Topic x Not Found")))
    with pytest.raises(InputError, match=r"^pyserini.search.lucene: Topic x Not Found$"):
        lucene.run_tool("search", ["--index", str(indexes / "bm25"), "--topics", str(QUERIES), "--output",
                                   str(tmp_path / "run.txt"), "--bm25"])
    monkeypatch.setattr(runpy, "run_module", lambda *a, **k: print("Unrecognized index name x"))
    with pytest.raises(InputError, match=r"^pyserini.index.lucene wrote no index \(its messages above say why\)$"):
        lucene.run_tool("index", ["--collection", "JsonCollection", "--input", str(SAMPLE), "--index",
                                  str(tmp_path / "index")])
    release_outputs()
    assert sorted(p.name for p in tmp_path.iterdir()) == [], list(tmp_path.iterdir())


def test_the_raw_query_files_of_the_shared_data_read_as_text(indexes, shared_data):
    """Finding 1's threshold: every raw query file a user may hand to an impact search reads as text
    (CACM's long queries repeat most, 1.13 terms per distinct term), an encoded file as impacts."""
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.core.topics import IMPACTS, check_topics

    for path in sorted(shared_data.glob("*/queries.*.tsv")):
        with pytest.raises(InputError, match="reads as query text"):
            check_topics(path, None, IMPACTS, index="INDEX")
    (indexes / "q.tsv.lsr.json").rename(indexes / "q.tsv.lsr.json.aside")
    try:
        check_topics(indexes / "q.tsv", None, IMPACTS, index="INDEX")  # unrecorded, but reads as impacts
    finally:
        (indexes / "q.tsv.lsr.json.aside").rename(indexes / "q.tsv.lsr.json")


def test_the_library_prints_nothing(indexes, tiny_preset):
    """Finding 6: `Searcher(...)` showed transformers' "Loading weights" bar, where docs/api.md says the
    library prints nothing; a command still shows it (quiet_libraries)."""
    import subprocess
    import sys

    from conftest import REPO

    program = (f"import lsr_pyserini\nsearcher = lsr_pyserini.Searcher({str(indexes / 'impact')!r}, "
               f"encoder={str(tiny_preset)!r})\nhits = searcher.search('vitamin d and bones', k=3)\n"
               "assert len(hits) == 3\nsearcher.close()\n")
    result = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0, result.stderr
    assert (result.stdout, result.stderr) == ("", ""), result.stderr
    from lsr_pyserini.core.cli import LoadingBars, quiet_libraries

    quiet_libraries(False)
    assert LoadingBars.shown
    quiet_libraries(True)
    assert not LoadingBars.shown
