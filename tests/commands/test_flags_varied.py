"""Parameters that no test gave a non-default value before the audit of defaults
(tests/audit_defaults.py): each given one here, asserting its effect, so that a flag, keyword or
option parsed and then ignored fails. Commands run in this process (`main([...])`), on the sample's
session indexes (conftest's `service_indexes`), with one JVM."""
from __future__ import annotations

import pytest

from conftest import SAMPLE
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.core.readers import read_run

QUERIES = SAMPLE / "queries.test.tsv"


@pytest.fixture(autouse=True)
def no_locks_left_in_this_process():
    yield
    release_outputs()


def tags(path) -> set[str]:
    return {line.split()[5] for line in path.read_text().splitlines() if line.strip()}


def write_run(path, run: dict[str, list[tuple[str, float]]]) -> str:
    path.write_text("".join(f"{qid} Q0 {docid} {rank} {score} first\n" for qid, ranking in run.items()
                            for rank, (docid, score) in enumerate(ranking, 1)))
    return str(path)


def test_fuse_rrf_k_and_tag_reach_the_run(tmp_path):
    from lsr_pyserini.commands.fuse import main

    one = write_run(tmp_path / "one.txt", {"q": [("a", 3.0), ("b", 2.0), ("c", 1.0)]})
    two = write_run(tmp_path / "two.txt", {"q": [("c", 9.0), ("a", 8.0), ("b", 7.0)]})
    main(["--run", one, "--run", two, "--method", "rrf", "--rrf-k", "1", "--tag", "mine",
          "--output", str(tmp_path / "fused.txt")])
    fused = dict(read_run(str(tmp_path / "fused.txt"))["q"])
    # the mean over the runs of 1 / (k + rank), with k = 1 (not 60)
    assert fused["a"] == pytest.approx((1 / 2 + 1 / 3) / 2, abs=1e-6)
    assert fused["c"] == pytest.approx((1 / 4 + 1 / 2) / 2, abs=1e-6)
    assert tags(tmp_path / "fused.txt") == {"mine"}


def test_sort_ranking_keeps_depth():
    from lsr_pyserini.core.fusion import sort_ranking

    assert sort_ranking({"a": 1.0, "b": 3.0, "c": 2.0}, depth=2) == [("b", 3.0), ("c", 2.0)]


def test_search_tag_reaches_the_run(service_indexes, tmp_path):
    from lsr_pyserini.commands.search import main

    main(["--index", str(service_indexes["bm25"]), "--topics", str(QUERIES), "--output", str(tmp_path / "run.txt"),
          "--hits", "3", "--tag", "mine"])
    assert tags(tmp_path / "run.txt") == {"mine"}


def test_lucene_min_idf_drops_the_common_query_terms(service_indexes):
    import lsr_pyserini

    searcher = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny")
    texts = [text for _, text in (line.split("\t", 1) for line in QUERIES.read_text().splitlines())]
    qids = [str(number) for number in range(len(texts))]
    every = searcher.batch_search(texts, qids, k=12)
    pruned = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny",
                                   engine="lucene", engine_options={"min_idf": 1.5}).batch_search(texts, qids, k=12)
    assert pruned != every
    assert sum(len(hits) for hits in pruned.values()) < sum(len(hits) for hits in every.values())


def test_bm25_pretokenized_searches_the_words_as_they_are(service_indexes):
    """pretokenized: whitespace analysis, so a capitalised word matches no (lower-cased, stemmed)
    indexed term; Lucene's analyzer finds it."""
    import lsr_pyserini

    text = QUERIES.read_text().splitlines()[0].split("\t", 1)[1].upper()
    analysed = lsr_pyserini.Searcher(str(service_indexes["bm25"])).search(text, k=5)
    as_given = lsr_pyserini.Searcher(str(service_indexes["bm25"]),
                                     engine_options={"pretokenized": True}).search(text, k=5)
    assert analysed and not as_given


def test_search_encoded_k_threads_and_explain_are_used(service_indexes):
    import lsr_pyserini

    searcher = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny")
    texts = [text for _, text in (line.split("\t", 1) for line in QUERIES.read_text().splitlines())][:3]
    qids = ["a", "b", "c"]
    queries = searcher.encode_queries(texts, qids)
    asked = []
    search = searcher.engine.search
    searcher.engine.search = lambda *args: asked.append(args[2:]) or search(*args)
    hits = searcher.search_encoded(texts, qids, queries, k=2, threads=2, explain=True)
    assert asked == [(2, 2)]  # the depth and the threads reach the engine
    assert all(len(ranking) == 2 and all(hit.terms for hit in ranking) for ranking in hits.values())
    assert all(hit.terms is None for hit in searcher.search_encoded(texts, qids, queries, k=2)["a"])


def test_search_device_and_dtype_reach_the_query_encoder(service_indexes, tmp_path):
    from lsr_pyserini.commands.search import main
    from lsr_pyserini.core.errors import InputError

    common = ["--index", str(service_indexes["splade"]), "--encoder", "splade-tiny", "--topics", str(QUERIES),
              "--hits", "5"]
    main([*common, "--output", str(tmp_path / "plain.txt")])
    main([*common, "--output", str(tmp_path / "bf16.txt"), "--dtype", "bfloat16"])
    assert read_run(str(tmp_path / "bf16.txt")) != read_run(str(tmp_path / "plain.txt"))
    with pytest.raises(InputError, match="cuda:99"):
        main([*common, "--output", str(tmp_path / "absent.txt"), "--device", "cuda:99"])


def test_search_bm25_k1_b_and_overwrite(service_indexes, tmp_path):
    """--k1 and --b change BM25's scores; --overwrite replaces a run that is refused without it."""
    from lsr_pyserini.commands.search import main
    from lsr_pyserini.core.errors import InputError

    common = ["--index", str(service_indexes["bm25"]), "--topics", str(QUERIES), "--hits", "5"]
    main([*common, "--output", str(tmp_path / "default.txt")])
    main([*common, "--output", str(tmp_path / "b.txt"), "--b", "1.0"])
    main([*common, "--output", str(tmp_path / "k1.txt"), "--k1", "3.0"])
    default = read_run(str(tmp_path / "default.txt"))
    for other in ("b.txt", "k1.txt"):
        assert read_run(str(tmp_path / other)).keys() == default.keys() and read_run(str(tmp_path / other)) != default
    release_outputs()
    with pytest.raises(InputError, match="--overwrite"):
        main([*common, "--output", str(tmp_path / "b.txt")])
    release_outputs()
    main([*common, "--output", str(tmp_path / "b.txt"), "--overwrite"])
    assert read_run(str(tmp_path / "b.txt")) == default
