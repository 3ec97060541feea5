"""Serving latency: Lucene impact search (Pyserini's `LuceneImpactSearcher`) against Seismic, exact
and fast settings, and Milvus (milvus-lite), on the same vectors and the same queries, one thread,
in one run.

    python benchmarks/bench_serving.py --vectors DIR --queries Q.tsv --lucene-index IDX [--qrels QRELS] --json OUT
        [--seismic-index DIR] [--fast "query_cut=10,heap_factor=1.0" [--fast ...]]
        [--fast-index DIR --fast-build "n_postings=..."]
        [--engines lucene seismic-exact milvus] [--milvus-uri DB] [--milvus-drop-ratio R ...] [--max-queries N]

DIR: the JsonVectorCollection shards (`encode corpus`); Q.tsv: the impact query TSV (`encode
queries`); IDX: the Lucene impact index of DIR. The exact Seismic index is built from DIR into
--seismic-index (default: beside OUT) unless one is already there; the fast setting searches it
(or --fast-index, built with --fast-build when absent). For k=10 and k=1000 it prints mean, p50 and
p99 ms per query (query encoding excluded: every engine gets the same integer impacts), with
nDCG@10 and R@1000 of each engine's run, how many queries rank the same docids in the same order as
Lucene, the recall of Lucene's top k (the quality figure of a collection without judgements) and the
speed-up over Lucene. With several --fast settings (a speed/recall curve), it also prints, per depth,
the fastest Seismic engine whose recall of Lucene's top k reaches 0.95 and 0.99: the speed-up at
matching recall. The `milvus` engine is a collection of DIR in a milvus-lite database (--milvus-uri,
default beside OUT; loaded here when absent, exact), searched through pymilvus as a cluster would be
(milvus-lite runs Milvus's engine in this process, behind its gRPC API); each --milvus-drop-ratio R
adds the engine `milvus drop=R` (the smallest R of each query's weights dropped). Each engine's
build or load time (when this run built it or its manifest recorded it) and bytes on disk are
printed too. --max-queries searches only the first N queries with every engine (for a slow one at
1M documents). It prints figures; it asserts nothing about time.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.environment import cpu_model  # noqa: E402
from lsr_pyserini.core.errors import InputError  # noqa: E402
from lsr_pyserini.core.outputs import folder_bytes  # noqa: E402
from lsr_pyserini.core.evaluation import evaluate_run  # noqa: E402
from lsr_pyserini.core.options import NamedNumbers, Number, positive_int  # noqa: E402
from lsr_pyserini.core.writer import run_lines  # noqa: E402
from lsr_pyserini.engines.seismic.index import SeismicBuild, SeismicIndex, build_seismic_index  # noqa: E402
from lsr_pyserini.stores.vectors import read_impact_queries  # noqa: E402

SEARCH_KNOBS = NamedNumbers(("query_cut", "heap_factor"), Number(integer=False, low=0, low_open=True), "knob")
DEFAULT_FAST = {"query_cut": 10, "heap_factor": 1.0}
BUILD_KNOBS = NamedNumbers(("n_postings", "summary_energy", "centroid_fraction", "max_fraction", "doc_cut"),
                           Number(integer=False, low=0, low_open=True), "build setting")


class GivenImpacts:
    """Pyserini's query-encoder interface for queries already encoded: encode(impacts) -> impacts."""

    def encode(self, impacts, **_):
        return impacts


def timed(search, queries, k):
    """({qid: [(docid, score)]}, per-query ms) searching one query at a time."""
    run, times = {}, []
    for qid, impacts in queries:
        started = time.perf_counter()
        run[qid] = search(qid, impacts, k)
        times.append(1000 * (time.perf_counter() - started))
    return run, np.array(times)


def lucene_search(index):
    from lsr_pyserini.core.jvm import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneImpactSearcher

    searcher = LuceneImpactSearcher(index, query_encoder=GivenImpacts())

    def search(qid, impacts, k):
        return [(hit.docid, float(hit.score)) for hit in searcher.search(impacts, k)]

    return search, searcher.num_docs


def seismic_search(searcher, query_cut=None, heap_factor=1.0):
    cut = None if query_cut is None else int(query_cut)
    return lambda qid, impacts, k: searcher.search_one(qid, impacts, k, cut, heap_factor)


def milvus_search(collection):
    return lambda qid, impacts, k: collection.search([(qid, impacts)], k)[qid]


def write_run(run, path):
    with open(path, "w") as handle:
        handle.writelines(run_lines(run, "bench"))


def quality(qrels, run, path):
    write_run(run, path)
    values = evaluate_run(qrels, str(path))
    return values["ndcg_cut_10"]["all"], values["recall_1000"]["all"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", required=True, help="JsonVectorCollection shards (encode corpus --output)")
    parser.add_argument("--queries", required=True, help="impact query TSV (encode queries --output)")
    parser.add_argument("--lucene-index", required=True, help="Lucene impact index of --vectors")
    parser.add_argument("--qrels", help="TREC qrels (leave out for a collection without judgements, such as the "
                                        "synthetic ones of bench_scale.py: the recall of Lucene's exact top k is then "
                                        "the quality figure)")
    parser.add_argument("--json", required=True, help="figures written here")
    parser.add_argument("--seismic-index", help="exact Seismic index (built here when absent; default: beside --json)")
    parser.add_argument("--fast", type=SEARCH_KNOBS, action="append",
                        help="a fast setting's search knobs; repeat for a speed/recall curve (default: query_cut=10,heap_factor=1.0)")
    parser.add_argument("--fast-index", help="index for the fast setting (default: the exact index)")
    parser.add_argument("--fast-build", type=BUILD_KNOBS, default={},
                        help="build settings of --fast-index when it is absent, e.g. n_postings=2000,summary_energy=0.4")
    parser.add_argument("--ks", type=positive_int, nargs="+", default=[10, 1000], help="depths (default: 10 1000)")
    parser.add_argument("--warmup", type=positive_int, default=20, help="queries searched first, untimed (default: 20)")
    parser.add_argument("--engines", nargs="+", default=["lucene", "seismic-exact", "seismic-fast"],
                        choices=["lucene", "seismic-exact", "seismic-fast", "milvus"],
                        help="engines to run (default: lucene seismic-exact seismic-fast)")
    parser.add_argument("--milvus-uri", help="milvus-lite database of --vectors (loaded here when it has no collection "
                                             "'bench'; default: beside --json)")
    parser.add_argument("--milvus-drop-ratio", type=float, action="append", default=[],
                        help="also the milvus engine with this drop_ratio_search; repeat for a curve")
    parser.add_argument("--max-queries", type=positive_int, help="only the first N queries (default: all)")
    args = parser.parse_args()
    args.fast = args.fast or [DEFAULT_FAST]

    out = Path(args.json)
    queries = read_impact_queries(args.queries)[: args.max_queries]
    sizes = {}  # engine -> {"build_seconds", "bytes"}
    exact_dir = Path(args.seismic_index or out.with_name(out.stem + ".seismic"))
    exact = None  # built and opened only when an engine searches it
    if "seismic-exact" in args.engines or ("seismic-fast" in args.engines and not args.fast_index):
        if not exact_dir.is_dir():
            manifest = build_seismic_index(args.vectors, str(exact_dir), SeismicBuild(threads=1))
            print(f"built the exact Seismic index in {manifest['build_seconds']:.1f}s", file=sys.stderr)
        exact = SeismicIndex(str(exact_dir))
        sizes["seismic"] = {"build_seconds": exact.manifest.get("build_seconds"), "bytes": folder_bytes(exact_dir)}
    engines, lucene_documents = {}, None
    if "lucene" in args.engines:
        engines["lucene"], lucene_documents = lucene_search(args.lucene_index)
        sizes["lucene"] = {"build_seconds": None, "bytes": folder_bytes(Path(args.lucene_index))}
    if "milvus" in args.engines:
        engines.update(milvus_engines(args, out, sizes))
    if "seismic-exact" in args.engines:
        engines["seismic-exact"] = seismic_search(exact)
    if "seismic-fast" in args.engines:
        fast_searcher = exact
        if args.fast_index:
            if not Path(args.fast_index).is_dir():
                build = {key: (int(v) if key in ("n_postings", "doc_cut") else v) for key, v in args.fast_build.items()}
                manifest = build_seismic_index(args.vectors, args.fast_index, SeismicBuild(threads=1, **build))
                print(f"built the fast Seismic index in {manifest['build_seconds']:.1f}s", file=sys.stderr)
            fast_searcher = SeismicIndex(args.fast_index)
        for knobs in args.fast:
            name = "seismic-fast" if len(args.fast) == 1 else \
                "fast " + ",".join(f"{key}={value:g}" for key, value in knobs.items())
            engines[name] = seismic_search(fast_searcher, **knobs)

    documents = exact.documents if exact else fast_searcher.documents if "seismic-fast" in engines else \
        lucene_documents or sizes.get("milvus", {}).get("documents")
    figures = {"queries": len(queries), "documents": documents, "fast": args.fast, "sizes": sizes,
               "fast_index": args.fast_index, "fast_build": args.fast_build, "cpu": cpu_model(), "load_before": os.getloadavg(), "engines": {}}
    runs = {}
    with tempfile.TemporaryDirectory() as scratch:
        for name, search in engines.items():
            timed(search, queries[: args.warmup], max(args.ks))  # JIT, caches, page faults
            for k in args.ks:
                run, times = timed(search, queries, k)
                runs[(name, k)] = run
                entry = {"mean_ms": float(times.mean()), "p50_ms": float(np.percentile(times, 50)),
                         "p99_ms": float(np.percentile(times, 99))}
                entry["ndcg_cut_10"], entry["recall_1000"] = quality(args.qrels, run, Path(scratch) / f"{name}.{k}") \
                    if args.qrels else (None, None)
                figures["engines"].setdefault(name, {})[str(k)] = entry
    figures["load_after"] = os.getloadavg()
    if "lucene" in engines:
        for name in engines:
            for k in args.ks:
                ours, lucene = runs[(name, k)], runs[("lucene", k)]
                # the same docids in the same order; Lucene's float32 sums may differ from the exact
                # integer score in the 6th decimal (111.999992 for 112), reported as max_score_difference
                same = sum([d for d, _ in ours[qid]] == [d for d, _ in lucene[qid]] for qid, _ in queries)
                entry = figures["engines"][name][str(k)]
                entry["queries_identical_to_lucene"] = same
                # recall of Lucene's (exact) top k: the measure for a synthetic collection without judgements
                entry["recall_of_lucene_top_k"] = float(np.mean([
                    len({d for d, _ in ours[qid]} & {d for d, _ in lucene[qid]}) / len(lucene[qid])
                    for qid, _ in queries if lucene[qid]] or [1.0]))
                entry["max_score_difference"] = max((abs(a[1] - b[1]) for qid, _ in queries
                                                     for a, b in zip(ours[qid], lucene[qid]) if a[0] == b[0]),
                                                    default=0.0)
                entry["speedup_over_lucene"] = figures["engines"]["lucene"][str(k)]["mean_ms"] / entry["mean_ms"]
        if any(name.startswith(("seismic", "fast ")) for name in engines):
            figures["at_recall"] = at_recall(figures["engines"], args.ks)
    out.write_text(json.dumps(figures, indent=2) + "\n")
    print(f"{figures['documents']:,} documents, {len(queries)} queries, one thread; CPU {figures['cpu']}; "
          f"load {figures['load_before'][0]:.1f} -> {figures['load_after'][0]:.1f}")
    width = max(14, *(len(name) for name in figures["engines"]))
    print(f"{'engine':<{width}} {'k':>5} {'mean ms':>9} {'p50 ms':>8} {'p99 ms':>8} {'nDCG@10':>8} {'R@1000':>7} "
          f"{'x Lucene':>8} {'= Lucene':>8} {'R(Lucene)':>9}")
    for name, per_k in figures["engines"].items():
        for k, e in per_k.items():
            print(f"{name:<{width}} {k:>5} {e['mean_ms']:9.2f} {e['p50_ms']:8.2f} {e['p99_ms']:8.2f} "
                  f"{number(e['ndcg_cut_10'], 8)} {number(e['recall_1000'], 7)} {e.get('speedup_over_lucene', 0):8.2f} "
                  f"{e.get('queries_identical_to_lucene', '-'):>8} {e.get('recall_of_lucene_top_k', 0):9.4f}")

    for name, size in sizes.items():
        seconds = size.get("build_seconds")
        print(f"{name}: {size['bytes'] / 2**20:,.1f} MiB on disk"
              + (f", built or loaded in {seconds:,.1f}s" if seconds is not None else ""))
    for k, per_recall in figures.get("at_recall", {}).items():
        for recall, best in per_recall.items():
            print(f"k={k}: fastest Seismic at recall of Lucene's top k >= {recall}: " + (
                f"{best['engine']} ({best['recall']:.4f}), {best['speedup']:.2f}x Lucene" if best else "none"))


def at_recall(engines: dict, ks, recalls=(0.95, 0.99)) -> dict:
    """{k: {recall: the fastest Seismic engine reaching it (name, its recall, speed-up) or None}}."""
    result = {}
    for k in ks:
        rows = [(name, per_k[str(k)]) for name, per_k in engines.items() if name.startswith(("seismic", "fast "))]
        result[str(k)] = {}
        for recall in recalls:
            reaching = [(e["speedup_over_lucene"], name, e["recall_of_lucene_top_k"]) for name, e in rows
                        if e["recall_of_lucene_top_k"] >= recall]
            best = max(reaching, default=None)
            result[str(k)][str(recall)] = {"engine": best[1], "recall": best[2], "speedup": best[0]} if best else None
    return result


def milvus_engines(args, out: Path, sizes: dict) -> dict:
    """The milvus engine (and one per --milvus-drop-ratio) over a milvus-lite collection of --vectors,
    loaded first when the database has none."""
    from lsr_pyserini.engines.milvus.collection import MilvusCollection, load_collection

    uri = args.milvus_uri or str(out.with_name(out.stem + ".milvus.db"))
    try:
        collection = MilvusCollection(uri, "bench")
    except InputError:  # no collection yet (or an interrupted load): load it, resuming if need be
        seconds = load_collection(args.vectors, uri, "bench").get("load_seconds")
        print(f"loaded the Milvus collection in {seconds:.1f}s", file=sys.stderr)
        collection = MilvusCollection(uri, "bench")
    sizes["milvus"] = {"build_seconds": collection.manifest.get("load_seconds"), "bytes": collection.size_bytes(),
                       "documents": collection.documents}
    engines = {"milvus": milvus_search(collection)}
    for ratio in args.milvus_drop_ratio:
        engines[f"milvus drop={ratio:g}"] = milvus_search(MilvusCollection(uri, "bench", drop_ratio_search=ratio))
    return engines


def number(value, width: int) -> str:
    return f"{value:{width}.4f}" if value is not None else f"{'-':>{width}}"


if __name__ == "__main__":
    main()
