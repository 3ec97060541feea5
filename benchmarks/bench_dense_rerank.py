"""Benchmark: dense re-ranking time per query (1,000 candidates) and the size of the faiss store.

    python benchmarks/bench_dense_rerank.py --store STORE --run RUN --queries Q.tsv [--queries-limit 100] [--hits 1000]

Re-ranks the first --queries-limit queries of RUN (each with its top --hits candidates, every one
of which must be in STORE) with the `dense` re-ranker exactly as `python -m lsr_pyserini.rerank`
does, one query at a time (the latency a search service sees), after one warm-up query, on
--threads torch threads (default 1). Printed:
milliseconds per query for encoding the query, for scoring its candidates (gathering their
vectors from the store and taking inner products; for `--reranker bgem3` every head the hybrid
weighs, by default dense + 0.3 x sparse) and in total, plus the store's size on disk,
documents, dimensions and bytes per document.

The SciFact store and BM25 run of the regression make a ready input:

    python -m lsr_pyserini.regress eval/regressions/scifact-bm25-minilm-fusion.yaml --work /tmp/fusion
    python benchmarks/bench_dense_rerank.py --store /tmp/fusion/minilm.store --run /tmp/fusion/run.bm25.txt \
        --queries ../shared/data/scifact/queries.test.tsv
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.readers import read_queries, read_run  # noqa: E402
from lsr_pyserini.rerankers import build_reranker, candidates_of  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="dense store (encode dense)")
    parser.add_argument("--run", required=True, help="first-stage TREC run with >= --hits candidates per query")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--queries-limit", type=int, default=100, help="queries timed (default: 100)")
    parser.add_argument("--hits", type=int, default=1000, help="candidates per query (default: 1000)")
    parser.add_argument("--reranker", default="dense",
                        help="re-ranker name (default: dense; bgem3: the hybrid of its --hybrid-weights "
                             "default heads, dense + 0.3 sparse, timed as one scoring step)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch CPU threads (default: 1; one query at a time gains little from more, and "
                             "more threads than free cores make each query many times slower)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)

    texts = {q.id: q.text for q in read_queries(args.queries)}
    first_stage = candidates_of(read_run(args.run), args.hits)
    qids = [q for q in first_stage if q in texts][: args.queries_limit + 1]
    reranker = build_reranker(args.reranker, args.store, {})
    store = reranker.store
    missing = reranker.missing({d for q in qids for d, _ in first_stage[q]})
    if missing:
        sys.exit(f"error: {len(missing)} candidates are not in the store, e.g. {missing[0]!r}")

    hybrid = hasattr(reranker, "score_encoded")
    encode_ms, score_ms, candidates = [], [], []
    for position, qid in enumerate(qids):
        docs = [d for d, _ in first_stage[qid]]
        started = time.perf_counter()
        if hybrid:  # bgem3: every weighted head (dense + sparse by default) from one forward pass
            query = reranker.encode_heads([texts[qid]])[0]
            encoded = time.perf_counter()
            reranker.score_encoded(query, docs)
        else:
            vector = reranker.encode_queries([texts[qid]])[0]
            encoded = time.perf_counter()
            store.scores(vector, docs)
        finished = time.perf_counter()
        if position == 0:
            continue  # warm-up (loads the model, reconstructs the vectors)
        encode_ms.append(1000 * (encoded - started))
        score_ms.append(1000 * (finished - encoded))
        candidates.append(len(docs))

    size = store.size_bytes()
    total = [a + b for a, b in zip(encode_ms, score_ms)]
    print(f"store              {store.path}")
    print(f"documents          {store.index.ntotal}")
    print(f"dimensions         {store.index.d}")
    print(f"faiss store size   {size / 2**20:.2f} MiB ({size / store.index.ntotal:.0f} bytes per document; "
          f"index.faiss {(store.path / 'index.faiss').stat().st_size / 2**20:.2f} MiB)")
    print(f"queries timed      {len(total)} (candidates per query: {statistics.mean(candidates):.0f}; "
          f"torch threads: {args.threads})")
    print(f"query encoding     {statistics.mean(encode_ms):.2f} ms/query (median {statistics.median(encode_ms):.2f})")
    print(f"candidate scoring  {statistics.mean(score_ms):.2f} ms/query (median {statistics.median(score_ms):.2f})")
    print(f"dense re-ranking   {statistics.mean(total):.2f} ms/query (median {statistics.median(total):.2f})")


if __name__ == "__main__":
    main()
