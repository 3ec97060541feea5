"""`prepare subset` and `prepare queries --sample`: the small collections the CI tier runs on."""
import json

from conftest import SAMPLE, run_tool
from lsr_pyserini.core.readers import read_corpus, read_qrels, read_queries


def test_subset_keeps_judged_documents_and_is_seeded(tmp_path):
    corpus = {doc.id: doc.text for doc in read_corpus(str(SAMPLE / "corpus.jsonl"))}
    judged = {d for docs in read_qrels(str(SAMPLE / "qrels.test.trec")).values() for d in docs}
    size = len(judged) + 2
    outputs = []
    for seed, name in ((0, "a.jsonl"), (0, "b.jsonl"), (1, "c.jsonl")):
        result = run_tool("prepare", "subset", "--input", SAMPLE / "corpus.jsonl", "--queries",
                          SAMPLE / "queries.test.tsv", "--qrels", SAMPLE / "qrels.test.trec",
                          "--documents", size, "--seed", seed, "--output", tmp_path / name)
        assert result.returncode == 0, result.stderr
        outputs.append((tmp_path / name).read_bytes())
        kept = [json.loads(line) for line in outputs[-1].decode().splitlines()]
        assert len(kept) == size and judged <= {d["_id"] for d in kept}
        assert [d["_id"] for d in kept] == [d for d in corpus if d in {k["_id"] for k in kept}]  # corpus order
        assert {doc.id: doc.text for doc in read_corpus(str(tmp_path / name))} == {d["_id"]: corpus[d["_id"]] for d in kept}
    assert outputs[0] == outputs[1]


def test_subset_refuses_fewer_documents_than_judged(tmp_path):
    result = run_tool("prepare", "subset", "--input", SAMPLE / "corpus.jsonl", "--queries", SAMPLE / "queries.test.tsv",
                      "--qrels", SAMPLE / "qrels.test.trec", "--documents", 1, "--output", tmp_path / "s.jsonl")
    assert result.returncode == 2 and "fewer than" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "s.jsonl").exists()


def test_query_sample_is_seeded_subset_in_file_order(tmp_path):
    every = [q.id for q in read_queries(str(SAMPLE / "queries.test.tsv"))]
    result = run_tool("prepare", "queries", "--input", SAMPLE / "queries.test.tsv", "--output", tmp_path / "q.tsv",
                      "--sample", 2, "--seed", 3)
    assert result.returncode == 0, result.stderr
    chosen = [q.id for q in read_queries(str(tmp_path / "q.tsv"))]
    assert len(chosen) == min(2, len(every)) and chosen == [q for q in every if q in chosen]
