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


def test_search_batch_size_is_the_step_of_the_queries(service_indexes, tmp_path, monkeypatch):
    from lsr_pyserini.api import Searcher
    from lsr_pyserini.commands.search import main

    steps = []
    batch_search = Searcher.batch_search
    monkeypatch.setattr(Searcher, "batch_search",
                        lambda self, texts, qids, **kw: steps.append(len(qids)) or batch_search(self, texts, qids, **kw))
    main(["--index", str(service_indexes["bm25"]), "--topics", str(QUERIES), "--output", str(tmp_path / "run.txt"),
          "--hits", "3", "--batch-size", "3"])
    assert steps == [3, 3, 1]  # 7 queries, 3 at a time (not all 7 in one step of the default 64)


def test_search_unrecorded_topics_searches_a_text_file_as_impacts(service_indexes, tmp_path):
    from lsr_pyserini.commands.search import main
    from lsr_pyserini.core.errors import InputError

    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tvitamin bone calcium\n")  # reads as text: no record of `encode queries` beside it
    argv = ["--index", str(service_indexes["splade"]), "--encoded", "--topics", str(topics), "--hits", "3",
            "--output", str(tmp_path / "run.txt")]
    with pytest.raises(InputError, match="--unrecorded-topics"):
        main(argv)
    release_outputs()
    main(argv + ["--unrecorded-topics"])
    assert read_run(str(tmp_path / "run.txt"))["q1"][0][0] == "s1"  # the passage about vitamin D and bones


def test_bench_build_timeout_and_unrecorded_topics_are_used(service_indexes, tmp_path, monkeypatch):
    import json

    import lsr_pyserini.commands.bench.command as command
    from lsr_pyserini.core.errors import InputError

    timeouts = []
    monkeypatch.setattr(command, "build", lambda spec, shards, index, text, timeout:
                        timeouts.append(timeout) or {"stopped": f"build over {timeout} s"})
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tprotein folding\n")
    argv = ["--vectors", str(service_indexes["vectors"]), "--queries", str(topics), "--engines", "lucene",
            "--work", str(tmp_path / "work"), "--json", str(tmp_path / "bench.json"), "--quiet",
            "--build-timeout", "7"]
    with pytest.raises(InputError, match="--unrecorded-topics"):
        command.main(argv)
    command.main(argv + ["--unrecorded-topics"])
    assert timeouts == [7]
    assert json.loads((tmp_path / "bench.json").read_text())["rows"][0]["stopped"].startswith("build over 7 s")


def test_demo_query_shows_that_querys_hits(tmp_path, monkeypatch, capsys):
    from lsr_pyserini.commands import demo

    def regress(spec, root, work, **kwargs):  # the runs the reproduction writes, without running it
        for name in ("bm25", "splade-tiny"):
            write_run(work / f"run.{name}.txt", {"q1": [("s1", 2.0)], "q6": [("s2", 1.0)]})
        return {}, []

    monkeypatch.setattr(demo, "regress", regress)
    with pytest.raises(SystemExit):
        demo.main(["--work", str(tmp_path), "--query", "q1"])
    shown = capsys.readouterr().out
    assert "top 3 hits for q1: 'does vitamin d prevent bone fractures'" in shown and "s1" in shown and "s2" not in shown


def test_encode_queries_query_mode_and_weights(tmp_path, monkeypatch):
    """--query-mode tokenizer: inference-free queries, the tokenizer's tokens weighted by the table
    --query-weights names (a file of the working folder here)."""
    from lsr_pyserini.commands.encode import main

    monkeypatch.chdir(tmp_path)
    (tmp_path / "weights.json").write_text('{"vitamin": 2.0, "bone": 0.5}')
    common = ["queries", "--encoder", "splade-tiny", "--input", str(QUERIES), "--quiet"]
    main([*common, "--output", "model.tsv"])
    main([*common, "--output", "tokens.tsv", "--query-mode", "tokenizer"])
    main([*common, "--output", "weighted.tsv", "--query-mode", "tokenizer", "--query-weights", "weights.json"])

    def first(name):
        terms = (tmp_path / name).read_text().splitlines()[0].split("\t", 1)[1].split()
        return {term: terms.count(term) for term in terms}

    model, tokens, weighted = first("model.tsv"), first("tokens.tsv"), first("weighted.tsv")
    assert tokens != model and set(tokens) == {"does", "vitamin", "d", "prevent", "bone", "fractures"}
    assert len(set(tokens.values())) == 1  # every token the same weight, without a table
    assert weighted["vitamin"] == 4 * weighted["bone"] and weighted != tokens


@pytest.fixture(scope="module")
def dense_stores(tmp_path_factory, tiny_encoder_only):
    """The sample in two dense stores of the tiny encoder: as it is, and with prefixes."""
    from lsr_pyserini.commands.encode import main

    work = tmp_path_factory.mktemp("dense-prefixes")
    common = ["dense", "--model", str(tiny_encoder_only), "--input", str(SAMPLE / "corpus.jsonl"), "--quiet",
              "--pooling-mode", "mean"]
    main([*common, "--output", str(work / "plain")])
    main([*common, "--output", str(work / "prefixed"), "--doc-prefix", "passage: ", "--query-prefix", "query: "])
    return work / "plain", work / "prefixed"


def test_encode_dense_prefixes_reach_the_documents_and_the_queries(dense_stores):
    import numpy as np

    from lsr_pyserini.models.dense.queries import DenseQueries
    from lsr_pyserini.stores.dense import DenseStore

    plain, prefixed = DenseStore(str(dense_stores[0])), DenseStore(str(dense_stores[1]))
    assert (prefixed.encoder_settings["doc_prefix"], prefixed.encoder_settings["query_prefix"]) == \
        ("passage: ", "query: ")
    assert prefixed.vectors.shape == plain.vectors.shape and not np.array_equal(prefixed.vectors, plain.vectors)
    texts = ["protein folding", "vitamin d"]
    queried = [np.asarray(DenseQueries(store).queries(["a", "b"], texts)) for store in dense_stores]
    assert queried[0].shape == queried[1].shape and not np.array_equal(queried[0], queried[1])


def test_search_dense_batch_size_and_rerank_output_format(dense_stores, tmp_path, monkeypatch):
    from lsr_pyserini.commands.rerank import main as rerank_main
    from lsr_pyserini.engines.dense.command import main as search_dense_main
    from lsr_pyserini.models.dense import encoder

    batches = []
    encode = encoder.TransformerDenseEncoder.encode_queries
    monkeypatch.setattr(encoder.TransformerDenseEncoder, "encode_queries",
                        lambda self, texts: batches.append(len(texts)) or encode(self, texts))
    search_dense_main(["--store", str(dense_stores[0]), "--queries", str(QUERIES), "--output",
                       str(tmp_path / "dense.txt"), "--hits", "4", "--batch-size", "2"])
    assert batches == [2, 2, 2, 1]
    rerank_main(["--reranker", "dense", "--run", str(tmp_path / "dense.txt"), "--queries", str(QUERIES),
                 "--store", str(dense_stores[1]), "--output", str(tmp_path / "msmarco.tsv"), "--output-format",
                 "msmarco"])
    lines = (tmp_path / "msmarco.tsv").read_text().splitlines()
    assert len(lines) == 7 * 4 and all(len(line.split("\t")) == 3 for line in lines)
    assert [line.split("\t")[2] for line in lines[:4]] == ["1", "2", "3", "4"]
