"""Seismic's search knobs: speed against quality on one query set, and the fastest setting that keeps
the exact search's quality.

    python benchmarks/bench_seismic_knobs.py --index SEISMIC_DIR --queries Q.tsv --qrels QRELS --json OUT
        [--query-cuts 3,5,8,10,15,20,30] [--heap-factors 0.9,1.0,1.1,1.2] [--ks 10 1000] [--within 0.001]

Searches Q.tsv (impact queries, `encode queries`) one query at a time on one thread with the exact
setting (the whole query, heap_factor 1.0) and with every combination of --query-cuts x
--heap-factors, each after 20 untimed warm-up queries. Printed for every setting and depth: mean, p50
and p99 ms per query, nDCG@10, R@1000, the fraction of the exact top k it returns, and the speed-up
over exact. With --reference (a TREC run of an exact engine, e.g. Lucene's, over the same documents),
"exact" is that run instead of this index's whole-query search: the only fair reference for an
index built with pruning (`seismic index --n-postings ...`), whose whole-query search is itself
approximate. The chosen setting is the fastest at the largest depth whose nDCG@10 and R@1000 are
within --within of the exact search's: choose it on training queries (SciFact `queries.train.tsv`),
then report it on the test queries with bench_serving.py --fast. It prints figures; it asserts
nothing about time.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_serving import quality, seismic_search, timed  # noqa: E402
from lsr_pyserini.core.environment import cpu_model  # noqa: E402

from lsr_pyserini.core.options import positive_int  # noqa: E402
from lsr_pyserini.core.readers import read_run  # noqa: E402
from lsr_pyserini.engines.seismic.index import SeismicIndex  # noqa: E402
from lsr_pyserini.stores.vectors import read_impact_queries  # noqa: E402


def numbers(kind):
    def parse(text: str):
        try:
            values = [kind(v) for v in text.split(",") if v.strip()]
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected comma-separated numbers, got {text!r}") from None
        if not values or any(v <= 0 for v in values):
            raise argparse.ArgumentTypeError(f"expected positive numbers, got {text!r}")
        return values
    return parse


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="Seismic index (seismic index --index)")
    parser.add_argument("--queries", required=True, help="impact query TSV (encode queries --output)")
    parser.add_argument("--qrels", required=True, help="TREC qrels of --queries")
    parser.add_argument("--json", required=True, help="figures written here")
    parser.add_argument("--query-cuts", type=numbers(int), default=[3, 5, 8, 10, 15, 20, 30])
    parser.add_argument("--heap-factors", type=numbers(float), default=[0.9, 1.0, 1.1, 1.2])
    parser.add_argument("--ks", type=positive_int, nargs="+", default=[10, 1000])
    parser.add_argument("--warmup", type=positive_int, default=20)
    parser.add_argument("--within", type=float, default=0.001,
                        help="largest drop of nDCG@10 and R@1000 from exact allowed for the chosen setting")
    parser.add_argument("--recall-targets", type=numbers(float), default=[],
                        help="also choose, for each target (e.g. 0.90,0.97), the fastest setting whose recall of the "
                             "exact top k at the smallest k reaches it (python -m lsr_pyserini.bench's engines)")
    parser.add_argument("--reference", help="TREC run of an exact engine over the same documents (at least the "
                                            "largest --ks deep): recall is measured against it (default: this "
                                            "index's whole-query search)")
    args = parser.parse_args()

    queries = read_impact_queries(args.queries)
    searcher = SeismicIndex(args.index)
    settings = [{"query_cut": None, "heap_factor": 1.0}] + [
        {"query_cut": c, "heap_factor": h} for c, h in itertools.product(args.query_cuts, args.heap_factors)]
    figures = {"index": args.index, "queries": len(queries), "documents": searcher.documents, "cpu": cpu_model(),
               "load_before": os.getloadavg(), "reference": args.reference, "settings": []}
    exact_runs = {}
    if args.reference:
        reference = read_run(args.reference)
        missing = [q for q, _ in queries if q not in reference]
        if missing:
            raise SystemExit(f"{args.reference}: no ranking for query {missing[0]!r} of {args.queries}")
        exact_runs = {k: {q: docs[:k] for q, docs in reference.items()} for k in args.ks}
    deepest = max(args.ks)
    with tempfile.TemporaryDirectory() as scratch:
        for setting in settings:
            search = seismic_search(searcher, **setting)
            timed(search, queries[: args.warmup], deepest)
            entry = {**setting, "k": {}}
            for k in args.ks:
                run, times = timed(search, queries, k)
                if setting["query_cut"] is None and not args.reference:
                    exact_runs[k] = run
                ndcg, recall = quality(args.qrels, run, Path(scratch) / "run")
                overlap = np.mean([len({d for d, _ in run[q]} & {d for d, _ in exact_runs[k][q]}) / len(exact_runs[k][q])
                                   for q, _ in queries if exact_runs[k][q]] or [1.0])
                entry["k"][str(k)] = {"mean_ms": float(times.mean()), "p50_ms": float(np.percentile(times, 50)),
                                      "p99_ms": float(np.percentile(times, 99)), "ndcg_cut_10": ndcg,
                                      "recall_1000": recall, "recall_of_exact_top_k": float(overlap)}
            figures["settings"].append(entry)
    figures["load_after"] = os.getloadavg()
    exact = figures["settings"][0]["k"]
    for entry in figures["settings"]:
        for k, e in entry["k"].items():
            e["speedup_over_exact"] = exact[k]["mean_ms"] / e["mean_ms"]
    keeps = [e for e in figures["settings"][1:]
             if all(e["k"][str(deepest)][m] >= exact[str(deepest)][m] - args.within for m in ("ndcg_cut_10", "recall_1000"))]
    chosen = min(keeps, key=lambda e: e["k"][str(deepest)]["mean_ms"], default=None)
    figures["chosen"] = None if chosen is None else {"query_cut": chosen["query_cut"], "heap_factor": chosen["heap_factor"]}
    smallest = str(min(args.ks))
    figures["for_recall"] = {}
    for target in args.recall_targets:
        reaching = [e for e in figures["settings"][1:] if e["k"][smallest]["recall_of_exact_top_k"] >= target]
        fastest = min(reaching, key=lambda e: e["k"][smallest]["mean_ms"], default=None)
        figures["for_recall"][str(target)] = None if fastest is None else {
            "query_cut": fastest["query_cut"], "heap_factor": fastest["heap_factor"],
            "recall": fastest["k"][smallest]["recall_of_exact_top_k"], "mean_ms": fastest["k"][smallest]["mean_ms"]}
    Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")

    print(f"{figures['documents']:,} documents, {len(queries)} queries, one thread; CPU {figures['cpu']}; "
          f"load {figures['load_before'][0]:.1f} -> {figures['load_after'][0]:.1f}")
    print(f"{'query_cut':>9} {'heap':>5} {'k':>5} {'mean ms':>8} {'p50 ms':>7} {'p99 ms':>7} {'nDCG@10':>8} "
          f"{'R@1000':>7} {'R(exact)':>8} {'x exact':>7}")
    for entry in figures["settings"]:
        for k, e in entry["k"].items():
            cut = "all" if entry["query_cut"] is None else entry["query_cut"]
            print(f"{cut:>9} {entry['heap_factor']:5.2f} {k:>5} {e['mean_ms']:8.2f} {e['p50_ms']:7.2f} "
                  f"{e['p99_ms']:7.2f} {e['ndcg_cut_10']:8.4f} {e['recall_1000']:7.4f} "
                  f"{e['recall_of_exact_top_k']:8.4f} {e['speedup_over_exact']:7.2f}")
    for target, best in figures["for_recall"].items():
        print(f"recall >= {target} of the exact top {smallest}: " + ("no setting reaches it" if best is None else
              f"seismic:query_cut={best['query_cut']}:heap_factor={best['heap_factor']} (recall {best['recall']:.4f})"))
    if chosen is None:
        print(f"no setting keeps nDCG@10 and R@1000 within {args.within} of exact")
    else:
        print(f"chosen (fastest at k={deepest} within {args.within} of exact): "
              f"query_cut={chosen['query_cut']},heap_factor={chosen['heap_factor']}")


if __name__ == "__main__":
    main()
