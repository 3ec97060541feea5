"""What Pyserini users look for, on the sample's BM25 index (in this process: no extra JVM):
`--output-format msmarco` writes Pyserini's MS MARCO run (`qid<TAB>docid<TAB>rank`, the TREC
run's order) from `search` and `fuse`; a `--topics` value that is one of Pyserini's topics names is
read through Pyserini's `get_topics` (faked here, as CI is offline) and searched as the same
queries in a file would be; a name Pyserini cannot fetch, or does not know, is one line."""
from __future__ import annotations

import pytest

from conftest import SAMPLE
from lsr_pyserini.core.errors import InputError

QUERIES = SAMPLE / "queries.test.tsv"


def search(index, topics, output, *more):
    from lsr_pyserini.commands.search import main

    main(["--index", str(index), "--topics", str(topics), "--output", str(output), "--hits", "5", "--quiet", *more])
    return output.read_text().splitlines()


def test_output_format_msmarco_writes_pyserinis_msmarco_runs(service_indexes, tmp_path):
    from lsr_pyserini.commands.fuse import main as fuse

    trec = search(service_indexes["bm25"], QUERIES, tmp_path / "run.trec")
    msmarco = search(service_indexes["bm25"], QUERIES, tmp_path / "run.msmarco", "--output-format", "msmarco")
    expected = ["\t".join((qid, docid, rank)) for qid, _, docid, rank, _, _ in map(str.split, trec)]
    assert msmarco == expected and len(set(line.split("\t")[0] for line in msmarco)) > 1
    ranks: dict = {}
    for qid, _, rank in (line.split("\t") for line in msmarco):
        ranks.setdefault(qid, []).append(int(rank))
    assert all(r == list(range(1, len(r) + 1)) for r in ranks.values())  # from 1, as Pyserini's writer
    fuse(["--run", str(tmp_path / "run.trec"), "--run", str(tmp_path / "run.trec"), "--output",
          str(tmp_path / "fused.msmarco"), "--output-format", "msmarco", "--method", "rrf"])
    assert (tmp_path / "fused.msmarco").read_text().splitlines() == expected


@pytest.fixture
def pyserini_topics(monkeypatch):
    """Pyserini's `get_topics`, answering `beir-v1.0.0-scifact-test` with the sample's queries
    (numeric-looking ids come back as ints, as Pyserini gives them), any other name as offline."""
    import lsr_pyserini.core.named_topics as named
    from lsr_pyserini.core.readers import read_queries

    mapping = {"beir-v1.0.0-scifact-test": object(), "msmarco-passage-dev-subset": object()}
    queries = {q.id: {"title": q.text} for q in read_queries(str(QUERIES))}

    def get_topics(name):
        if name == "beir-v1.0.0-scifact-test":
            return queries
        raise RuntimeError("JVM exception occurred: java.io.IOException: Error downloading topics from "
                           "https://raw.githubusercontent.com/castorini/anserini-tools/master/topics-and-qrels/x")

    monkeypatch.setattr(named, "_pyserini", lambda: (mapping, get_topics))
    return queries


def test_a_pyserini_topics_name_is_searched_as_its_queries(service_indexes, tmp_path, pyserini_topics):
    from_file = search(service_indexes["bm25"], QUERIES, tmp_path / "file.trec")
    named = search(service_indexes["bm25"], "beir-v1.0.0-scifact-test", tmp_path / "named.trec")
    assert named == from_file and len(named) > 5
    with pytest.raises(InputError, match=r"^msmarco-passage-dev-subset: Pyserini's topics cannot be fetched "
                                         r"\(Error downloading topics from .*\); fetch them once online"):
        search(service_indexes["bm25"], "msmarco-passage-dev-subset", tmp_path / "offline.trec")
    with pytest.raises(InputError, match=r"^no-such-topics: no such file, folder, Pyserini topics name or "
                                         r"ir_datasets id$"):
        search(service_indexes["bm25"], "no-such-topics", tmp_path / "unknown.trec")
    assert not (tmp_path / "offline.trec").exists() and not (tmp_path / "unknown.trec").exists()
