"""Benchmark: the candidate-scoring kernels of the re-rankers against the ones they replaced.

    python benchmarks/bench_rerank_kernels.py --run RUN --queries Q.tsv [--codes CODES] \\
        [--sparseembed SE_STORE] [--bgem3 M3_STORE] [--dense DENSE_STORE] [--hits 1000] [--queries-limit 20]

For each store given, the first --queries-limit queries of RUN (top --hits candidates each) are
encoded beforehand; then, query after query on one thread, the previous kernel and the current
one score the same candidates, interleaved (so both see the same load), and their outputs are
checked to be equal bit for bit. Printed: median and mean milliseconds per query of each and the
ratio. Kernels: SSR-tok and SSR-CLS (`--codes`: the numpy kernel on the gathered candidate
codes vs the compiled kernel reading the store in place, `models/ssr/reranker.py`; then the compiled
kernel's two ways of collecting hits, scan vs mask, and whether this CPU takes the mask), SparseEmbed (every
candidate term's mask unpacked vs only the shared terms'), the BGE-M3
hybrid's default dense + 0.3 sparse (a Python sum per document vs one gather and bincount), and
dense (unchanged: the same kernel twice, for its absolute time). Inputs: any stores over one
corpus and a run whose candidates they hold (docs/benchmarks.md#re-ranking-kernels).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))  # the previous SparseEmbed kernel lives beside its test

import numpy as np  # noqa: E402

from lsr_pyserini.core.readers import read_queries, read_run  # noqa: E402
from lsr_pyserini.rerankers import build_reranker, candidates_of  # noqa: E402


def compare(name, encode, previous, current, texts, first_stage, qids) -> None:
    queries = encode([texts[q] for q in qids])
    before, after = [], []
    for position, (qid, query) in enumerate(zip(qids, queries)):
        docs = [d for d, _ in first_stage[qid]]
        started = time.perf_counter()
        old = previous(query, docs)
        middle = time.perf_counter()
        new = current(query, docs)
        finished = time.perf_counter()
        if not np.array_equal(np.asarray(old), np.asarray(new)):
            sys.exit(f"error: {name}: the kernels disagree on query {qid}")
        if position:  # the first query warms up
            before.append(1000 * (middle - started))
            after.append(1000 * (finished - middle))
    print(f"{name:<22} previous {statistics.median(before):8.2f} ms/query "
          f"(mean {statistics.mean(before):.2f})   current {statistics.median(after):7.2f} ms/query (mean {statistics.mean(after):.2f})   "
          f"{statistics.median(before) / statistics.median(after):5.1f}x   {len(after)} queries, equal outputs", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", required=True, help="first-stage TREC run")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--codes", help="SSR code store (ssr index)")
    parser.add_argument("--sparseembed", help="SparseEmbed store (encode corpus --encoder sparseembed --dense-store)")
    parser.add_argument("--bgem3", help="BGE-M3 dense store (encode corpus --encoder bge-m3 --dense-store)")
    parser.add_argument("--dense", help="dense store (encode dense)")
    parser.add_argument("--hits", type=int, default=1000, help="candidates per query (default: 1000)")
    parser.add_argument("--queries-limit", type=int, default=20, help="queries timed (default: 20)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(1)
    texts = {q.id: q.text for q in read_queries(args.queries)}
    first_stage = candidates_of(read_run(args.run), args.hits)
    qids = [q for q in first_stage if q in texts][: args.queries_limit + 1]
    timing = (texts, first_stage, qids)
    if args.codes:
        from lsr_pyserini.kernels import jit

        if not jit.enabled():
            print("note: compiled kernels are off (numba missing or LSR_PYSERINI_NUMBA=0): both SSR rows run numpy")
        for name, cls_weight in (("SSR-tok", 0.0), ("SSR-CLS", None)):
            ssr = build_reranker("ssr", args.codes, {"cls_weight": cls_weight})
            compare(name, ssr.encode_queries, lambda query, docs, ssr=ssr: ssr.score_encoded(query, docs, compiled=False),
                    ssr.score_encoded, *timing)
        if jit.enabled():  # the compiled kernel's two ways to collect hits (this CPU takes the mask: yes/no)
            from lsr_pyserini.models.ssr.reranker import compiled_ssr_tok_scores, mask_collection

            def collect(by_mask):
                return lambda query, docs: compiled_ssr_tok_scores(
                    query[0], query[1], ssr.store.arrays["token_index"], ssr.store.arrays["token_value"],
                    *ssr.store.row_ranges(docs), ssr.coder.model.token_sae.latents, by_mask)

            compare(f"SSR-tok scan->mask ({'yes' if mask_collection() else 'no'})", ssr.encode_queries,
                    collect(False), collect(True), *timing)
    if args.sparseembed:
        from test_rerank_fast import previous_sparseembed_scores

        sparseembed = build_reranker("sparseembed", args.sparseembed, {})
        store = sparseembed.store
        store.value_starts  # noqa: B018  (computed once per store, on first use)
        compare("SparseEmbed",
                lambda batch: [e[1:] for e in sparseembed.encoder.terms_and_embeddings(batch, "queries")],
                lambda q, docs: previous_sparseembed_scores(store, q[0], q[1], docs),
                lambda q, docs: store.scores(q[0], q[1], docs), *timing)
    if args.bgem3:
        hybrid = build_reranker("bgem3", args.bgem3, {})
        weights = hybrid.weights

        def python_sum(query, docs):
            dense, _, sparse = query
            ids, values = hybrid.store.ragged("sparse_ids", docs), hybrid.store.ragged("sparse_weights", docs)
            lexical = np.asarray([sum(sparse.get(int(i), 0.0) * float(w) for i, w in zip(a, b))
                                  for a, b in zip(ids, values)])
            total = np.zeros(len(docs), dtype=np.float64)
            total += weights["dense"] * hybrid.store.scores(dense, docs)
            total += weights["sparse"] * lexical
            return total

        if weights["colbert"]:
            sys.exit("error: the BGE-M3 comparison times the default dense + sparse hybrid")
        compare("BGE-M3 dense+sparse", hybrid.encode_heads, python_sum, hybrid.score_encoded, *timing)
    if args.dense:
        dense = build_reranker("dense", args.dense, {})
        compare("dense (unchanged)", dense.encode_queries, dense.store.scores, dense.store.scores, *timing)


if __name__ == "__main__":
    main()
