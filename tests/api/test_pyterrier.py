"""PyTerrier pipelines over the toolkit (`lsr_pyserini.pyterrier`), on the sample collection: the
encoders' `toks`/`query_toks` are the impacts `encode corpus`/`encode queries` write and
pyterrier-pisa indexes and searches them as they are; `Retriever`, `Reranker` and `Fusion` give the
toolkit's own rankings; `pt.Experiment` gives `evaluate`'s figures on the toolkit's runs; missing
columns are one line, empty frames stay empty. (All of SciFact test: tests/scifact_engines.py.)"""
from __future__ import annotations

import pandas as pd
import pytest

from conftest import SAMPLE, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.readers import read_corpus, read_queries

pt = pytest.importorskip("pyterrier")  # noqa: F841  pinned in the tested set: never skipped in CI
from lsr_pyserini import pyterrier as lsr  # noqa: E402

QRELS = SAMPLE / "qrels.test.trec"


@pytest.fixture(scope="module")
def topics() -> pd.DataFrame:
    return pd.DataFrame([(q.id, q.text) for q in read_queries(str(SAMPLE / "queries.test.tsv"))],
                        columns=["qid", "query"])


@pytest.fixture(scope="module")
def dense_store(tmp_path_factory, tiny_encoder_only):
    store = tmp_path_factory.mktemp("pt") / "dense"
    run_tool("encode", "dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl", "--output", store,
             "--pooling", "mean", "--max-length", "64", "--quiet", check=True)
    return store


def as_run(frame: pd.DataFrame) -> dict:
    run: dict = {}
    for qid, docno, score in zip(frame["qid"], frame["docno"], frame["score"]):
        run.setdefault(str(qid), []).append((str(docno), float(score)))
    return run


def test_encoders_add_the_impacts_the_commands_write(service_indexes, topics):
    from lsr_pyserini import QueryEncoder
    from lsr_pyserini.stores.vectors import read_vectors

    documents = pd.DataFrame([(d.id, d.text) for d in read_corpus(str(SAMPLE / "corpus.jsonl"))],
                             columns=["docno", "text"])
    encoded = lsr.doc_encoder("splade-tiny").transform(documents)
    assert dict(zip(encoded["docno"], encoded["toks"])) == dict(read_vectors(service_indexes["vectors"]))
    queries = lsr.query_encoder("splade-tiny").transform(topics)
    assert list(queries["query_toks"]) == QueryEncoder("splade-tiny").batch_encode(list(topics["query"]))
    assert list(queries.columns) == ["qid", "query", "query_toks"]


def test_pyterrier_pisa_indexes_and_searches_the_toks_as_they_are(service_indexes, topics, tmp_path):
    import pyterrier_pisa

    from lsr_pyserini.engines import build_engine
    from lsr_pyserini.engines.pisa.index import build_pisa_index

    documents = pd.DataFrame([(d.id, d.text) for d in read_corpus(str(SAMPLE / "corpus.jsonl"))],
                             columns=["docno", "text"])
    pipeline = lsr.doc_encoder("splade-tiny") >> pyterrier_pisa.PisaIndex(str(tmp_path / "pt-pisa"), stemmer="none") \
        .toks_indexer(scale=1)
    index = pipeline.index(documents.to_dict("records"))
    theirs = (lsr.query_encoder("splade-tiny") >> index.quantized(num_results=5, toks_scale=1)).transform(topics)
    build_pisa_index(str(service_indexes["vectors"]), str(tmp_path / "ours"))
    ours = lsr.Retriever(str(tmp_path / "ours"), encoder="splade-tiny", k=5).transform(topics)
    key = ["qid", "score", "docno"]
    assert theirs[key].sort_values(key).values.tolist() == ours[key].sort_values(key).values.tolist()
    assert set(ours["docno"]) and build_engine("pisa", str(tmp_path / "ours")).documents == 12


def test_retriever_reranker_and_fusion_give_the_toolkits_rankings(service_indexes, topics, dense_store):
    import lsr_pyserini
    from lsr_pyserini.core.fusion import fuse

    splade = lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny", k=10)
    searcher = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny")
    hits = searcher.batch_search(list(topics["query"]), list(topics["qid"]), k=10)
    expected = {qid: [(h.docid, h.score) for h in ranking] for qid, ranking in hits.items() if ranking}
    frame = splade.transform(topics)
    assert list(frame.columns) == ["qid", "query", "docno", "score", "rank"] and as_run(frame) == expected
    assert frame.groupby("qid")["rank"].apply(lambda ranks: list(ranks) == list(range(len(ranks)))).all()
    assert as_run((lsr.query_encoder("splade-tiny") >> splade).transform(topics)) == expected
    rerank = lsr.Reranker("dense", store=str(dense_store), interpolate=0.5)
    with_store = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny", reranker="dense",
                                       store=str(dense_store), interpolate=0.5, candidates=10)
    reranked = with_store.batch_search(list(topics["query"]), list(topics["qid"]), k=10)
    assert as_run((splade >> rerank).transform(topics)) == \
        {qid: [(h.docid, h.score) for h in ranking] for qid, ranking in reranked.items() if ranking}
    bm25 = lsr.Retriever(str(service_indexes["bm25"]), k=10)
    fused = lsr.Fusion(bm25, splade, method="rrf").transform(topics)
    assert as_run(fused) == fuse([as_run(bm25.transform(topics)), expected], method="rrf")


def test_experiment_gives_evaluates_figures(service_indexes, topics, dense_store, tmp_path):
    import lsr_pyserini
    from lsr_pyserini.core.evaluation import evaluate_run
    from lsr_pyserini.core.writer import run_lines

    pipelines = {
        "bm25": (lsr.Retriever(str(service_indexes["bm25"])), {"index": str(service_indexes["bm25"])}),
        "splade": (lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny"),
                   {"index": str(service_indexes["splade"]), "encoder": "splade-tiny"}),
    }
    pipelines["splade >> dense"] = (pipelines["splade"][0] >> lsr.Reranker("dense", store=str(dense_store),
                                                                           interpolate=0.5),
                                    {**pipelines["splade"][1], "reranker": "dense", "store": str(dense_store),
                                     "interpolate": 0.5})
    qrels = pt.io.read_qrels(str(QRELS))
    table = pt.Experiment([p for p, _ in pipelines.values()], topics, qrels,
                          eval_metrics=[pt.measures.nDCG @ 10, pt.measures.R @ 100], names=list(pipelines))
    for name, (_, options) in pipelines.items():
        searcher = lsr_pyserini.Searcher(**options)
        hits = searcher.batch_search(list(topics["query"]), list(topics["qid"]), k=1000)
        path = tmp_path / f"{name.replace(' ', '')}.txt"
        path.write_text("".join(run_lines({q: [(h.docid, h.score) for h in r] for q, r in hits.items()}, "x")))
        figures = evaluate_run(str(QRELS), str(path))
        row = table[table["name"] == name].iloc[0]
        assert round(row["nDCG@10"], 4) == round(figures["ndcg_cut_10"]["all"], 4), name
        assert round(row["R@100"], 4) == round(figures["recall_100"]["all"], 4), name


def test_missing_columns_are_one_line_and_empty_frames_stay_empty(service_indexes, topics, dense_store):
    splade = lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny", k=3)
    rerank = lsr.Reranker("dense", store=str(dense_store))
    cases = [
        (splade, topics[["qid"]], "Retriever: the frame has no column 'query'"),
        (splade, topics[["query"]], "Retriever: the frame has no column 'qid'"),
        (rerank, topics, "Reranker: the frame has no column 'docno'"),
        (lsr.query_encoder("splade-tiny"), topics[["qid"]], "QueryEncoder: the frame has no column 'query'"),
        (lsr.doc_encoder("splade-tiny"), pd.DataFrame({"docno": ["d"]}), "DocEncoder: the frame has no column 'text'"),
    ]
    for transformer, frame, message in cases:
        with pytest.raises(InputError, match=message):
            transformer.transform(frame)
    empty = topics.iloc[:0]
    for transformer in (splade, splade >> rerank, lsr.Fusion(splade, splade)):
        result = transformer.transform(empty)
        assert len(result) == 0 and {"qid", "docno", "score", "rank"} <= set(result.columns)
    assert "query_toks" in lsr.query_encoder("splade-tiny").transform(empty).columns
    with pytest.raises(InputError, match="Fusion: unknown method 'sum'"):
        lsr.Fusion(splade, splade, method="sum")


@pytest.mark.parametrize("engine", ["lucene", "pisa"])
def test_indexer_builds_an_index_that_searches_as_the_commands_index(service_indexes, topics, tmp_path, engine):
    """A DataFrame of documents in, an index of `engine` out (encoded as `encode corpus` encodes,
    built by the engine's own index command): the toolkit's Retriever on it ranks exactly as on the
    index the commands built from the same corpus (`encode corpus` + `lucene index --impact`)."""
    documents = pd.DataFrame([(d.id, d.text) for d in read_corpus(str(SAMPLE / "corpus.jsonl"))],
                             columns=["docno", "text"])
    path = lsr.Indexer(str(tmp_path / engine), encoder="splade-tiny", engine=engine).index(documents)
    key = ["qid", "score", "docno"]
    ours = lsr.Retriever(path, encoder="splade-tiny", k=12).transform(topics)
    commands = lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny", k=12).transform(topics)
    assert ours[key].sort_values(key).values.tolist() == commands[key].sort_values(key).values.tolist()
    assert lsr.Retriever(path, encoder="splade-tiny").searcher.engine.name == engine and len(ours) > 12
    with pytest.raises(InputError, match="already exists .give overwrite=True"):
        lsr.Indexer(path, encoder="splade-tiny", engine=engine).index(documents)


def test_integer_query_ids_give_the_rankings_of_their_strings(service_indexes, topics, dense_store):
    """Users pass qid as an integer column (pd.read_csv of numeric ids) as often as strings: every
    transformer gives the rankings the string ids give, each query's own (a mix-up of 1 and "1"
    would lose or cross them), and the query text stays with its query."""
    topics = topics.assign(qid=[qid.lstrip("q") for qid in topics["qid"]])  # "1", "2", ...
    numbered = topics.assign(qid=topics["qid"].astype(int))
    assert numbered["qid"].dtype.kind == "i"
    splade = lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny", k=5)
    expected = as_run(splade.transform(topics))
    assert len(expected) == len(topics) and as_run(splade.transform(numbered)) == expected
    encoded = lsr.query_encoder("splade-tiny").transform(numbered)
    assert list(encoded["qid"]) == list(numbered["qid"]) and as_run(splade.transform(encoded)) == expected
    first_stage = splade.transform(numbered).assign(qid=lambda frame: frame["qid"].astype(int))
    rerank = lsr.Reranker("dense", store=str(dense_store))
    reranked = rerank.transform(first_stage)
    assert as_run(reranked) == as_run(rerank.transform(splade.transform(topics))) and len(as_run(reranked)) == len(topics)
    texts = dict(zip(topics["qid"], topics["query"]))
    assert all(texts[str(qid)] == query for qid, query in zip(reranked["qid"], reranked["query"]))
    bm25 = lsr.Retriever(str(service_indexes["bm25"]), k=5)
    assert as_run(lsr.Fusion(bm25, splade, method="rrf").transform(numbered)) == \
        as_run(lsr.Fusion(bm25, splade, method="rrf").transform(topics))


class Fixed(pt.Transformer):
    """A pipeline that gives one fixed ranking, whatever the topics."""

    def __init__(self, rows):
        self.frame = pd.DataFrame(rows, columns=["qid", "docno", "score"])

    def transform(self, topics):
        return self.frame.copy()


def test_fusion_weights_and_depth_are_used():
    from lsr_pyserini.core.fusion import fuse

    one = Fixed([("1", "a", 3.0), ("1", "b", 2.0), ("1", "c", 1.0)])
    two = Fixed([("1", "c", 9.0), ("1", "b", 5.0), ("1", "a", 1.0)])
    topics = pd.DataFrame([("1", "text")], columns=["qid", "query"])
    fused = as_run(lsr.Fusion(one, two, weights=[3.0, 1.0], method="minmax", depth=2).transform(topics))
    runs = [as_run(one.transform(topics)), as_run(two.transform(topics))]
    assert fused == fuse(runs, [3.0, 1.0], "minmax", depth=2) != fuse(runs, None, "minmax", depth=2)
    assert [docid for docid, _ in fused["1"]] == ["a", "b"]  # 3 x run one outweighs run two; 2 kept of 3


def test_reranker_and_searcher_fusion_and_the_encoders_settings_are_used(service_indexes, topics, dense_store,
                                                                          tiny_preset, monkeypatch):
    import lsr_pyserini

    splade = lsr.Retriever(str(service_indexes["splade"]), encoder="splade-tiny", k=10)
    first = splade.transform(topics)
    by_minmax = as_run(lsr.Reranker("dense", store=str(dense_store), interpolate=0.5).transform(first))
    by_zscore = as_run(lsr.Reranker("dense", store=str(dense_store), interpolate=0.5, fusion="zscore").transform(first))
    searcher = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny", reranker="dense",
                                     store=str(dense_store), interpolate=0.5, candidates=10, fusion="zscore")
    hits = searcher.batch_search(list(topics["query"]), list(topics["qid"]), k=10)
    assert by_zscore != by_minmax
    assert by_zscore == {qid: [(h.docid, h.score) for h in ranking] for qid, ranking in hits.items() if ranking}
    documents = pd.DataFrame([("d1", "protein folding", "a title about cells")], columns=["docno", "text", "title"])
    by_text = lsr.doc_encoder("splade-tiny").transform(documents)["toks"][0]
    by_title = lsr.doc_encoder("splade-tiny", text_field="title").transform(documents)["toks"][0]
    assert by_title == lsr.DocEncoder("splade-tiny", text_field="title").transform(documents)["toks"][0] != by_text
    monkeypatch.chdir(tiny_preset.parent)  # the preset named as a user names a file of the working folder
    assert lsr.doc_encoder("tiny-splade.yaml").transform(documents)["toks"][0] != by_text
    assert list(lsr.query_encoder("tiny-splade.yaml").transform(topics)["query_toks"]) != \
        list(lsr.query_encoder("splade-tiny").transform(topics)["query_toks"])


def test_indexer_engine_encoder_text_field_and_overwrite_are_used(tmp_path, monkeypatch):
    """engine="bm25" with encoder=None: the texts of `text_field` indexed by the bm25 engine's own
    command (recorded here, not run); overwrite=True replaces an index refused without it."""
    import json
    import subprocess
    from pathlib import Path

    commands = []

    def record(command, **kwargs):
        commands.append(command)
        Path(command[command.index("--index") + 1]).mkdir()
        return subprocess.CompletedProcess(command, 0, "")

    monkeypatch.setattr(subprocess, "run", record)
    documents = pd.DataFrame([("d1", "protein folding", "a title about cells")], columns=["docno", "text", "title"])
    target = str(tmp_path / "titles")
    assert lsr.Indexer(target, encoder=None, engine="bm25", text_field="title").index(documents) == target
    (command,) = commands
    assert command[command.index("--collection") + 1] == "JsonCollection" and "--impact" not in command
    texts = Path(command[command.index("--input") + 1]) / "docs.jsonl"
    assert json.loads(texts.read_text()) == {"id": "d1", "contents": "a title about cells"}
    with pytest.raises(InputError, match="already exists .give overwrite=True"):
        lsr.Indexer(target, encoder=None, engine="bm25", text_field="title").index(documents)
    lsr.Indexer(target, encoder=None, engine="bm25", overwrite=True).index(documents)
    assert len(commands) == 2 and json.loads(texts.read_text())["contents"] == "protein folding"
    mine = tmp_path / "notes"  # a folder of the user's, given by mistake: overwrite=True never removes it
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    with pytest.raises(InputError, match="exists and is no index: refusing to replace it even with overwrite=True"):
        lsr.Indexer(str(mine), encoder=None, engine="bm25", overwrite=True).index(documents)
    assert (mine / "thesis.tex").read_text() == "years of work" and len(commands) == 2


def test_retriever_engine_is_the_engine_opened(service_indexes):
    """engine="pisa" opens the index as a PISA index (and so refuses the Lucene one); without an
    engine the index's own (lucene) opens it."""
    index = str(service_indexes["splade"])
    assert lsr.Retriever(index, encoder="splade-tiny").searcher.engine.name == "lucene"
    with pytest.raises(InputError, match="not a PISA index"):
        lsr.Retriever(index, encoder="splade-tiny", engine="pisa")
