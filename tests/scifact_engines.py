"""Checks of the engines layer on the real SciFact test set, run on the work folder of the
scifact-bm25 and scifact-splade-tiny reproductions (tests/commands/test_regressions.py), which built the
full collection's indexes once already:

- `python -m lsr_pyserini.search` writes the very runs of `lucene search --impact`, `lucene search
  --bm25`, `seismic search` and (with several shard indexes) one index's run; exact Seismic (an index
  of all 5,183 documents), PISA (MaxScore, 8 threads, and block-max MaxScore) and a Milvus
  collection (milvus-lite) of the shards give Lucene's top-1000 run at every rank, all 300 queries;
- one `Searcher` used from 8 threads, all 300 test queries, 5 repetitions, returns exactly the
  rankings it returns one query at a time, for the Lucene impact, sharded, Seismic and PISA
  engines, with and without the dense re-ranker;
- explanations add up to the score of every top-10 hit of every query (Lucene, Seismic, PISA);
- `pt.Experiment` over `lsr_pyserini.pyterrier` pipelines (BM25; SPLADE-tiny; SPLADE-tiny >> the
  dense re-ranker) gives the nDCG@10 and R@100 `evaluate` gives on the toolkit's runs, to 4 decimals.
"""
from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from conftest import run_tool

THREADS, REPETITIONS = 8, 5


def same_file(a: Path, b: Path) -> None:
    assert a.read_text() == b.read_text(), f"{a} differs from {b}"


def same_ranking(a: Path, b: Path) -> None:
    """The same qid, docid, rank and score on every line (the tag column names the engine)."""
    columns = [[line.split()[:5] for line in path.read_text().splitlines()] for path in (a, b)]
    assert len(columns[0]) == len(columns[1]) > 0, f"{a} and {b} differ in length"
    differing = sum(1 for x, y in zip(*columns) if x != y)
    assert not differing, f"{a} differs from {b} on {differing} lines"


def same_ranking_as_lucene(seismic: Path, lucene: Path, queries: Path) -> None:
    """Exact Seismic's run is Lucene's: the same docid at every rank of every query; a score may
    differ only where Lucene's float32 sum misses the integer impact score (111.999992 for 112),
    by under 1e-5 (docs/seismic.md)."""
    rows = [[line.split() for line in path.read_text().splitlines()] for path in (seismic, lucene)]
    qids = {line.split("\t")[0] for line in queries.read_text().splitlines()}
    assert len(qids) == 300 and {row[0] for row in rows[1]} == qids
    assert len(rows[0]) == len(rows[1]) > 250_000, f"{seismic} and {lucene} differ in length"
    differing = [(x, y) for x, y in zip(*rows) if x[:4] != y[:4] or abs(float(x[4]) - float(y[4])) >= 1e-5]
    assert not differing, f"{seismic} differs from {lucene} on {len(differing)} lines, first {differing[0]}"


def split_shards(vectors: Path, into: list[Path]) -> None:
    """The shards' documents dealt round-robin into len(into) shard folders."""
    handles = []
    for folder in into:
        folder.mkdir(parents=True)
        handles.append(open(folder / "part-00000.jsonl", "w", encoding="utf-8"))
    number = 0
    for path in sorted(vectors.glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8").splitlines(keepends=True):
            handles[number % len(handles)].write(line)
            number += 1
    for handle in handles:
        handle.close()


def check_bm25_search_command(work: Path, data: Path, scratch: Path) -> None:
    run_tool("search", "--engine", "bm25", "--index", work / "index", "--topics", data / "scifact" / "queries.test.tsv",
             "--output", scratch / "run.bm25.search.txt", "--hits", "1000", "--threads", "2", "--quiet", check=True)
    same_file(scratch / "run.bm25.search.txt", work / "run.bm25.txt")
    from lsr_pyserini import pyterrier as lsr

    check_pyterrier_experiment({"bm25": (lsr.Retriever(str(work / "index")), work / "run.bm25.txt")}, data)


def check_pyterrier_experiment(pipelines: dict, data: Path) -> None:
    """pt.Experiment's nDCG@10 and R@100 of each pipeline equal `evaluate`'s on the toolkit's run."""
    import pandas as pd
    import pyterrier as pt

    from lsr_pyserini.core.evaluation import evaluate_run
    from lsr_pyserini.core.readers import read_queries

    qrels_path = data / "scifact" / "qrels.test.trec"
    topics = pd.DataFrame([(q.id, q.text) for q in read_queries(str(data / "scifact" / "queries.test.tsv"))],
                          columns=["qid", "query"])
    table = pt.Experiment([pipeline for pipeline, _ in pipelines.values()], topics, pt.io.read_qrels(str(qrels_path)),
                          eval_metrics=[pt.measures.nDCG @ 10, pt.measures.R @ 100], names=list(pipelines))
    for name, (_, run) in pipelines.items():
        figures = evaluate_run(str(qrels_path), str(run))
        row = table[table["name"] == name].iloc[0]
        assert round(row["nDCG@10"], 4) == round(figures["ndcg_cut_10"]["all"], 4), (name, row, figures)
        assert round(row["R@100"], 4) == round(figures["recall_100"]["all"], 4), (name, row, figures)


def check_impact_engines(work: Path, data: Path, scratch: Path, dense_model: Path) -> None:
    import lsr_pyserini
    from lsr_pyserini.core.readers import read_queries

    queries_tsv = data / "scifact" / "queries.test.tsv"
    lucene_run = work / "run.splade-tiny.txt"
    # the search command: pre-encoded and on the fly, equal to `lucene search --impact`
    run_tool("search", "--engine", "lucene", "--index", work / "index", "--topics", work / "queries.tsv", "--encoded",
             "--output", scratch / "run.lucene.encoded.txt", "--hits", "1000", "--threads", "2", "--quiet", check=True)
    same_file(scratch / "run.lucene.encoded.txt", lucene_run)
    run_tool("search", "--index", work / "index", "--topics", queries_tsv, "--encoder", "splade-tiny",
             "--output", scratch / "run.lucene.texts.txt", "--hits", "1000", "--quiet", check=True)
    same_file(scratch / "run.lucene.texts.txt", lucene_run)
    # Seismic: its own command and the search command
    run_tool("seismic", "index", "--input", work / "vectors", "--index", scratch / "seismic", "--quiet", check=True)
    run_tool("seismic", "search", "--index", scratch / "seismic", "--topics", work / "queries.tsv", "--output",
             scratch / "run.seismic.command.txt", "--hits", "1000", check=True)
    run_tool("search", "--index", scratch / "seismic", "--topics", work / "queries.tsv", "--encoded", "--output",
             scratch / "run.seismic.search.txt", "--hits", "1000", "--threads", "2", "--quiet", check=True)
    same_file(scratch / "run.seismic.search.txt", scratch / "run.seismic.command.txt")
    same_ranking_as_lucene(scratch / "run.seismic.command.txt", lucene_run, queries_tsv)
    # PISA: exact MaxScore with 8 threads and block-max MaxScore, the command and the search command
    run_tool("pisa", "index", "--input", work / "vectors", "--index", scratch / "pisa", "--quiet", check=True)
    for algorithm, threads in (("maxscore", "8"), ("block_max_maxscore", "1")):
        run_tool("pisa", "search", "--index", scratch / "pisa", "--topics", work / "queries.tsv", "--output",
                 scratch / f"run.pisa.{algorithm}.txt", "--hits", "1000", "--algorithm", algorithm, "--threads",
                 threads, check=True)
        same_ranking_as_lucene(scratch / f"run.pisa.{algorithm}.txt", lucene_run, queries_tsv)
    run_tool("search", "--index", scratch / "pisa", "--topics", work / "queries.tsv", "--encoded", "--output",
             scratch / "run.pisa.search.txt", "--hits", "1000", "--threads", "2", "--quiet", check=True)
    same_ranking(scratch / "run.pisa.search.txt", scratch / "run.pisa.maxscore.txt")
    # Milvus (milvus-lite): a collection of the same shards, Lucene's top-1000 run at every rank
    run_tool("milvus", "index", "--input", work / "vectors", "--uri", scratch / "scifact.milvus.db", "--collection",
             "scifact", "--quiet", check=True)
    run_tool("milvus", "search", "--uri", scratch / "scifact.milvus.db", "--collection", "scifact", "--topics",
             work / "queries.tsv", "--output", scratch / "run.milvus.txt", "--hits", "1000", check=True)
    same_ranking(scratch / "run.milvus.txt", lucene_run)
    # two shard indexes: `lucene search --index A,B` and `search --engine sharded` give the one index's run
    shards = [scratch / "shard-a", scratch / "shard-b"]
    split_shards(work / "vectors", shards)
    for folder in shards:
        run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", folder, "--index",
                 folder.with_name(folder.name + ".index"), "--generator", "DefaultLuceneDocumentGenerator", "--impact",
                 "--pretokenized", "--threads", "2", check=True)
    indexes = ",".join(str(folder.with_name(folder.name + ".index")) for folder in shards)
    run_tool("lucene", "search", "--index", indexes, "--topics", work / "queries.tsv", "--output",
             scratch / "run.sharded.lucene.txt", "--impact", "--hits", "1000", "--threads", "2", check=True)
    same_file(scratch / "run.sharded.lucene.txt", lucene_run)
    run_tool("search", "--engine", "sharded", "--index", indexes, "--topics", work / "queries.tsv", "--encoded",
             "--output", scratch / "run.sharded.search.txt", "--hits", "1000", "--quiet", check=True)
    same_file(scratch / "run.sharded.search.txt", lucene_run)

    # a dense store for the re-ranker (a tiny random model: the mechanics, not the effectiveness)
    run_tool("encode", "dense", "--model", dense_model, "--input", data / "scifact" / "corpus.jsonl.gz", "--output",
             scratch / "dense", "--pooling", "mean", "--max-length", "64", "--quiet", check=True)
    loaded = list(read_queries(str(queries_tsv)))
    texts = [query.text for query in loaded]
    # PyTerrier: SPLADE-tiny, and SPLADE-tiny >> the dense re-ranker, against the toolkit's runs
    from lsr_pyserini import pyterrier as lsr
    from lsr_pyserini.core.writer import run_lines

    reranking = lsr_pyserini.Searcher(str(work / "index"), encoder="splade-tiny", reranker="dense",
                                      store=str(scratch / "dense"), interpolate=0.5)
    reranked = reranking.batch_search(texts, [q.id for q in loaded], k=1000, threads=2)
    (scratch / "run.dense.txt").write_text("".join(run_lines(
        {qid: [(h.docid, h.score) for h in hits] for qid, hits in reranked.items()}, "dense")))
    splade = lsr.Retriever(str(work / "index"), encoder="splade-tiny", threads=2)
    check_pyterrier_experiment({
        "splade-tiny": (splade, lucene_run),
        "splade-tiny >> dense": (splade >> lsr.Reranker("dense", store=str(scratch / "dense"), interpolate=0.5),
                                 scratch / "run.dense.txt")}, data)
    indexes_list = indexes.split(",")
    for index in (work / "index", indexes_list, scratch / "seismic", scratch / "pisa"):
        for reranker in (None, "dense"):
            options = {"reranker": "dense", "store": str(scratch / "dense"), "interpolate": 0.5,
                       "candidates": 100} if reranker else {}
            searcher = lsr_pyserini.Searcher(index if isinstance(index, list) else str(index), encoder="splade-tiny",
                                             **options)
            alone = [searcher.search(text, k=10) for text in texts]
            assert sum(len(hits) for hits in alone) > 2000
            with ThreadPoolExecutor(THREADS) as pool:
                for repetition in range(REPETITIONS):
                    together = list(pool.map(lambda text: searcher.search(text, k=10), texts))
                    assert together == alone, (searcher.engine.name, reranker, repetition)
            if reranker is None and searcher.engine.name in ("lucene", "seismic", "pisa"):
                check_explanations(searcher, loaded)
            searcher.close()


def check_explanations(searcher, loaded) -> None:
    """Every top-10 hit's contributions add up to its score: exactly the integer impact score
    (Lucene's run score is that integer after Anserini's tie adjustment, below 1e-3 away)."""
    from lsr_pyserini.engines.sharded.engine import raw_score

    results = searcher.batch_search([q.text for q in loaded], [q.id for q in loaded], k=10, threads=2, explain=True)
    checked = 0
    for qid, hits in results.items():
        for hit in hits:
            total = sum(match.contribution for match in hit.terms)
            assert hit.explained == "score" and all(m.contribution > 0 for m in hit.terms)
            if searcher.engine.name in ("seismic", "pisa"):
                assert total == hit.score, (qid, hit)
            else:
                assert total == raw_score(hit.score, qid) and abs(total - hit.score) < 1e-3, (qid, hit)
            checked += 1
    assert checked > 2500
    docid = results[loaded[0].id][0].docid
    assert searcher.doc(docid).strip()
    json.dumps(docid)


def check_new_user_findings(work: Path, data: Path, scratch: Path) -> None:
    """On the reproduction's real index: the raw test queries searched as impacts (nDCG@10 0.2451
    instead of 0.6436, exit 0, before) are refused in one line and write no run; docs/serving.md's
    example answer is what the index gives its query (it showed another index's docids and scores),
    and the README's curl example asks that query."""
    import re

    import lsr_pyserini
    from conftest import REPO, error_lines

    raw = data / "scifact" / "queries.test.tsv"
    run = scratch / "raw-topics.txt"
    refused = run_tool("lucene", "search", "--index", work / "index", "--topics", raw, "--output", run, "--impact",
                       "--hits", "1000")
    assert refused.returncode == 2 and not run.exists(), refused.stderr
    [line] = error_lines(refused)
    assert line.startswith(f"error: {raw} reads as query text") and str(work / "index") in line, line
    serving = (REPO / "docs" / "serving.md").read_text()
    example = serving[serving.index("```json\n"):].split("```", 2)[1]
    query = re.search(r'"query_txt": "([^"]+)"', example).group(1)
    shown = [(docid, float(score)) for docid, score in re.findall(r'"docid": "(\w+)", "score": ([\d.]+)', example)]
    lsr_pyserini.start_jvm()
    searcher = lsr_pyserini.Searcher(str(work / "index"), encoder="splade-tiny")
    try:
        assert [(hit.docid, hit.score) for hit in searcher.search(query, k=len(shown))] == shown
    finally:
        searcher.close()
    assert f'"query": "{query}"' in (REPO / "README.md").read_text()
