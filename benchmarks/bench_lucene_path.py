"""The Lucene path against what it stands on, in one run: start-up, the top k, and byte-identity.

    python benchmarks/bench_lucene_path.py --index IDX [--index-raw IDX_RAW] --queries Q.tsv
        [--seismic SEISMIC_INDEX] [--vectors SHARDS_DIR] [--hits 10,100,1000] [--repeats 3] [--json OUT]

Q.tsv holds encoded queries (`encode queries`: terms repeated by their impacts). On the same index
and queries, one thread:

1. Start-up: wall time of `python -m lsr_pyserini.search --engine lucene --encoded --hits 10` on all
   the queries (a new process each time; the minimum of --repeats), beside `--engine seismic` on
   --seismic, and beside the same command with LSR_PYSERINI_LUCENE_TOP_K=anserini.
2. Per query, p50/p99 ms at each k, in this process:
   - toolkit: the `lucene` engine (the fast top k: ids from doc values, one JSON text per query);
   - anserini-batch: the same engine through Anserini's batch search (ids from stored fields: the
     path before the fast top k);
   - pyserini: Pyserini's `LuceneImpactSearcher.search` on the query text, what
     `lucene search --impact` runs per query;
   - seismic: the `seismic` engine (exact where its index was built exact), where --seismic is given;
   - pisa: PISA's MaxScore (`pyterrier-pisa`, where installed) on an index of the same integer
     impacts built from --vectors (the `encode corpus` shards) into a scratch folder, queries as
     {term: impact}, scores taken as they are (the `quantized` scorer, scale 1): one query per call
     (p50/p99, pandas' frame included), and the mean of one call over all the queries.
3. Anserini's own `SearchCollection` (Java only, no Python in the loop): wall time for all the
   queries at each k, JVM start included.
4. Byte-identity: the runs `lsr_pyserini.search --engine lucene --encoded` writes against those of
   `lucene search --impact`, at k=10 and k=1000, on --index and on --index-raw.

It prints the figures, the two ratios issue 43 sets (toolkit k=1000 / toolkit k=10, at most 1.5; the
`lucene search --impact` path / toolkit at k=1000, at least 5) and the CPU; it asserts nothing.
"""
from __future__ import annotations

import argparse
import filecmp
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.environment import environment  # noqa: E402
from lsr_pyserini.core.readers import read_queries  # noqa: E402

PYTHON = sys.executable


def timed_command(command: list[str], repeats: int, env: dict | None = None) -> float:
    best = float("inf")
    for _ in range(repeats):
        started = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True, env={**os.environ, **(env or {})})
        best = min(best, time.perf_counter() - started)
    return best


def search_command(engine: str, index: str, queries: str, output: str, hits: int) -> list[str]:
    return [PYTHON, "-m", "lsr_pyserini.search", "--engine", engine, "--encoded", "--index", index,
            "--topics", queries, "--output", output, "--hits", str(hits), "--threads", "1", "--quiet", "--overwrite"]


@functools.lru_cache(maxsize=None)
def parsed(text: str) -> tuple:
    return tuple(Counter(text.split()).items())


def impacts(text: str) -> dict[str, int]:
    """{term: impact} of an encoded query's text, read once (as `search --encoded` reads its file
    before searching): the engines' figures are the search's; Pyserini's path takes the text."""
    return dict(parsed(text))


def per_query(search, queries, k: int) -> dict:
    for qid, text in queries:  # warm-up, every query once: the JVM's JIT, the engines' caches
        search(qid, text, k)
    times = []
    for qid, text in queries:
        started = time.perf_counter()
        search(qid, text, k)
        times.append(time.perf_counter() - started)
    values = np.array(times) * 1000.0
    return {"p50_ms": round(float(np.percentile(values, 50)), 3), "p99_ms": round(float(np.percentile(values, 99)), 3)}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True, help="Lucene impact index (built as the README's step 3)")
    parser.add_argument("--index-raw", help="the same vectors indexed with --storeRaw (byte-identity there too)")
    parser.add_argument("--queries", required=True, help="encoded queries TSV (`encode queries`)")
    parser.add_argument("--seismic", help="a Seismic index of the same vectors (`python -m lsr_pyserini.seismic`)")
    parser.add_argument("--vectors", help="the shards the index was built from (PISA's index is built from them)")
    parser.add_argument("--hits", default="10,100,1000", help="k values (default: 10,100,1000)")
    parser.add_argument("--repeats", type=int, default=3, help="start-up runs, the minimum kept (default: 3)")
    parser.add_argument("--json", help="write the figures here too")
    args = parser.parse_args(argv)
    ks = [int(k) for k in args.hits.split(",")]
    queries = [(q.id, q.text) for q in read_queries(args.queries)]
    from lsr_pyserini.core.environment import cpuinfo_field

    cpu = (f"{environment().get('cpu')} (family {cpuinfo_field('cpu family')}, model {cpuinfo_field('model')}"
           f"{', AVX-512' if 'avx512f' in cpuinfo_field('flags').split() else ''}), {os.cpu_count()} cores")
    figures: dict = {"cpu": cpu, "queries": len(queries), "index": args.index}
    print(f"CPU: {figures['cpu']}; {len(queries)} queries; index {args.index}", flush=True)

    with tempfile.TemporaryDirectory() as scratch:
        out = str(Path(scratch) / "run.txt")
        startup = {"lucene": timed_command(search_command("lucene", args.index, args.queries, out, 10), args.repeats),
                   "lucene (LSR_PYSERINI_LUCENE_TOP_K=anserini)": timed_command(
                       search_command("lucene", args.index, args.queries, out, 10), args.repeats,
                       {"LSR_PYSERINI_LUCENE_TOP_K": "anserini"})}
        if args.seismic:
            startup["seismic"] = timed_command(search_command("seismic", args.seismic, args.queries, out, 10),
                                               args.repeats)
        figures["startup_s"] = {name: round(value, 2) for name, value in startup.items()}
        print("start-up, `search --encoded --hits 10` on all queries (s, min of %d):" % args.repeats)
        for name, value in startup.items():
            print(f"  {name:45s} {value:6.2f}")

        identity = {}
        for label, index in (("index", args.index), ("index-raw", args.index_raw)):
            if not index:
                continue
            for k in (10, 1000):
                ours, theirs = str(Path(scratch) / f"ours.{label}.{k}"), str(Path(scratch) / f"theirs.{label}.{k}")
                subprocess.run(search_command("lucene", index, args.queries, ours, k), check=True, capture_output=True)
                subprocess.run([PYTHON, "-m", "lsr_pyserini.lucene", "search", "--index", index, "--topics",
                                args.queries, "--output", theirs, "--impact", "--hits", str(k)], check=True,
                               capture_output=True)
                identity[f"{label} k={k}"] = filecmp.cmp(ours, theirs, shallow=False)
        figures["byte_identical_to_lucene_search_impact"] = identity
        print("runs byte-identical to `lucene search --impact`:", identity)

        java = {}
        for k in ks:
            started = time.perf_counter()
            subprocess.run([PYTHON, "-c", JAVA_SEARCH, args.index, args.queries, str(Path(scratch) / "java.txt"),
                            str(k)], check=True, capture_output=True)
            java[k] = round(time.perf_counter() - started, 2)
        figures["anserini_searchcollection_s"] = java

    import lsr_pyserini

    lsr_pyserini.start_jvm()
    from lsr_pyserini.engines.lucene.engine import LuceneImpactEngine

    fast = LuceneImpactEngine(args.index, fast=True)
    batch = LuceneImpactEngine(args.index, fast=False)
    from pyserini.search.lucene import LuceneImpactSearcher  # the `lucene search --impact` path

    from lsr_pyserini.core.jvm import on_jvm_thread

    pyserini = on_jvm_thread(LuceneImpactSearcher, args.index, None)
    paths = {"toolkit": lambda qid, text, k: fast.search([qid], [impacts(text)], k),
             "anserini-batch": lambda qid, text, k: batch.search([qid], [impacts(text)], k),
             "pyserini": lambda qid, text, k: on_jvm_thread(pyserini.search, text, k)}
    if args.seismic:
        from lsr_pyserini.engines import build_engine

        seismic = build_engine("seismic", args.seismic, {})
        paths["seismic"] = lambda qid, text, k: seismic.search([qid], [impacts(text)], k)
    pisa = pisa_search(args.vectors, queries, ks) if args.vectors else None
    if pisa is not None:
        paths["pisa"], figures["pisa_batch_mean_ms"] = pisa
    table = {name: {k: per_query(search, queries, k) for k in ks} for name, search in paths.items()}
    figures["per_query"] = table
    print("per query, one thread (p50 / p99 ms):")
    print("  " + f"{'path':16s}" + "".join(f"{'k=' + str(k):>20s}" for k in ks))
    for name, row in table.items():
        print("  " + f"{name:16s}" + "".join(f"{row[k]['p50_ms']:>10.3f} /{row[k]['p99_ms']:>8.3f}" for k in ks))
    print("  anserini SearchCollection, all queries, JVM start included (s): "
          + ", ".join(f"k={k}: {v}" for k, v in figures["anserini_searchcollection_s"].items()))
    if pisa is None:
        print("  PISA: not measured (pyterrier-pisa not installed, or no --vectors)")
    else:
        print("  PISA, one call for all the queries, mean per query (ms): "
              + ", ".join(f"k={k}: {v:.3f}" for k, v in figures["pisa_batch_mean_ms"].items()))
    top, low = max(ks), min(ks)
    ratios = {f"toolkit k={top} / k={low} (target <= 1.5)": table["toolkit"][top]["p50_ms"] / table["toolkit"][low]["p50_ms"],
              f"pyserini / toolkit at k={top} (target >= 5)": table["pyserini"][top]["p50_ms"] / table["toolkit"][top]["p50_ms"],
              f"anserini-batch / toolkit at k={top}": table["anserini-batch"][top]["p50_ms"] / table["toolkit"][top]["p50_ms"]}
    figures["ratios"] = {name: round(value, 2) for name, value in ratios.items()}
    for name, value in ratios.items():
        print(f"  {name}: {value:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2) + "\n")


def pisa_search(vectors: str, queries, ks):
    """(search function, {k: mean ms per query of one call over all queries}) of PISA's MaxScore on
    the impacts of `vectors`; None where pyterrier-pisa is not installed."""
    try:
        import pandas as pd
        from pyterrier_pisa import PisaIndex
    except ImportError:
        return None
    folder = tempfile.mkdtemp(prefix="pisa-")

    def documents():
        for shard in sorted(Path(vectors).glob("*.jsonl")):
            with open(shard, encoding="utf-8") as handle:
                for line in handle:
                    record = json.loads(line)
                    yield {"docno": record["id"], "toks": record["vector"]}

    index = PisaIndex(folder, stemmer="none", overwrite=True)
    index.toks_indexer(scale=1.0).index(documents())
    retrievers = {k: index.quantized(num_results=k, toks_scale=1.0, threads=1) for k in ks}
    frame = pd.DataFrame({"qid": [qid for qid, _ in queries],
                          "query_toks": [{t: float(w) for t, w in impacts(text).items()} for _, text in queries]})
    batch = {}
    for k, retriever in retrievers.items():
        retriever(frame)  # warm-up
        started = time.perf_counter()
        retriever(frame)
        batch[k] = round((time.perf_counter() - started) * 1000.0 / len(queries), 3)

    def search(qid, text, k):
        return retrievers[k](pd.DataFrame({"qid": [qid], "query_toks": [{t: float(w) for t, w in impacts(text).items()}]}))

    return search, batch


# Anserini's SearchCollection in a JVM of its own (the toolkit's Java 21), on the encoded TSV
JAVA_SEARCH = """
import sys
import lsr_pyserini
lsr_pyserini.start_jvm()
from jnius import autoclass
index, topics, output, k = sys.argv[1:]
autoclass("io.anserini.search.SearchCollection").main(["-index", index, "-topics", topics, "-topicReader",
    "TsvString", "-output", output, "-impact", "-pretokenized", "-hits", k, "-threads", "1"])
"""


if __name__ == "__main__":
    main()
