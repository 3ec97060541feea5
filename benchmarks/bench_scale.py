"""Benchmark: how Anserini impact indexing and search scale with the corpus, on SPLADE-like collections.

    python benchmarks/bench_scale.py --docs 10000,100000,1000000 --json OUT.json
        --work DIR [--vectors DIR] [--queries FILE.tsv] [--index-threads 2]
        [--plot docs/img/scale.png] [--skip-throughput] [--throughput-docs 1024] [--throughput-shard-size 128]
        [--seed 0]
        [--processes 2] [--rebuild]

Collections. The real SciFact corpus encoded with SPLADE-tiny (`encode corpus --encoder splade-tiny`,
cached in WORK/work/, or --vectors) is recombined into N synthetic documents with the same
statistics: each synthetic document takes the number of non-zeros of a random real document; its
terms are drawn from the real document-frequency distribution (P(t) proportional to df(t)), without
replacement within the document; each term's impact is drawn from the real impacts of that term (a
random real posting of it). So nnz/document, the term distribution and each term's impact
distribution (what bounds a posting list's scores) follow the real vectors; what is not kept is the
co-occurrence of terms within a document. The script prints a check against the real vectors: mean
nnz/document, mean impact, and the total-variation distance between the real and the synthetic
term (df) distributions. They are written as JsonVectorCollection files in WORK/N/vectors.

Figures per size. Build: `python -m lsr_pyserini.lucene index --collection JsonVectorCollection
--impact --pretokenized --threads T` wall time (a fresh process, JVM start included) and the
index's bytes on disk. Latency: Pyserini's LuceneImpactSearcher on the index, in this process,
one thread, the real SciFact test queries (encoded by `encode queries`, the idf filter of
LuceneImpactSearcher applied), one warm-up pass, then each query timed at k=10 and at k=1000
(Anserini's search, its hits handed to Python by pyjnius); p50 and p99. Growth: the least-squares slope
of log(figure) against log(N) over the sizes (1 = linear).

Throughput: `python -m lsr_pyserini.encode corpus --shard-size S` (--throughput-shard-size,
default 128: a shard is encoded in one place, so workers need several each) on the first
--throughput-docs SciFact documents as a subprocess, in one process, with `--workers 2` and with
`--ray`, wall time (Python start, Ray start and model loading included); docs/s and each one's ratio
to one process. Skipped (and said so) when `encode corpus`
has no --workers/--ray flags, or with --skip-throughput.

WORK/N/vectors and WORK/N/index are kept and reused (the build time recorded when built is
reported again; --rebuild builds anew). WORK/1000000/READY is touched once that collection and its
index exist. The machine's CPU and load average are printed with the figures.
"""
from __future__ import annotations

import argparse
import gzip
import json
import math
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", REPO.parent / "shared" / "data"))  # ../shared/data
CORPUS = DATA_ROOT / "scifact" / "corpus.jsonl.gz"
QUERIES = DATA_ROOT / "scifact" / "queries.test.tsv"
PY = sys.executable
DOCS_PER_FILE = 100_000


def cpu_name() -> str:
    from lsr_pyserini.core.environment import cpu_model

    return cpu_model()


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def run(command: list[str], **kwargs) -> float:
    """Run a command; its wall time. Fails loudly with its stderr's tail."""
    start = time.perf_counter()
    result = subprocess.run(command, capture_output=True, text=True, cwd=REPO,
                            env={**os.environ, "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1"}, **kwargs)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        sys.exit(f"failed ({result.returncode}): {' '.join(command)}\n{result.stderr[-2000:]}")
    return wall


# ---- the real vectors ---------------------------------------------------------------------------

def real_vectors(work: Path, vectors: str | None) -> Path:
    if vectors:
        return Path(vectors)
    out = work / "work" / "scifact-splade-tiny"
    manifest = Path(f"{out}.manifest.json")
    if not (manifest.is_file() and json.loads(manifest.read_text()).get("status") == "complete"):
        print(f"encoding SciFact with splade-tiny into {out} ...", flush=True)
        run([PY, "-m", "lsr_pyserini.encode", "corpus", "--encoder", "splade-tiny", "--input", str(CORPUS),
             "--output", str(out), "--quiet"])
    return out


def real_queries(work: Path, queries: str | None) -> Path:
    if queries:
        return Path(queries)
    out = work / "work" / "scifact-test-queries.splade-tiny.tsv"
    if not out.is_file():
        run([PY, "-m", "lsr_pyserini.encode", "queries", "--encoder", "splade-tiny", "--input", str(QUERIES),
             "--output", str(out)])
    return out


def read_vectors(folder: Path) -> list[dict[str, int]]:
    docs = []
    for path in sorted(folder.glob("*.jsonl*")):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt", encoding="utf-8") as handle:
            docs += [json.loads(line)["vector"] for line in handle if line.strip()]
    return docs


class Statistics:
    """What the synthetic documents are drawn from: nnz per real document, df per term, and each
    term's real impacts (postings grouped by term)."""

    def __init__(self, docs: list[dict[str, int]]):
        self.terms = sorted({t for d in docs for t in d})
        ids = {t: i for i, t in enumerate(self.terms)}
        self.nnz = np.array([len(d) for d in docs], dtype=np.int64)
        term_ids = np.array([ids[t] for d in docs for t in d], dtype=np.int64)
        weights = np.array([w for d in docs for w in d.values()], dtype=np.int64)
        order = np.argsort(term_ids, kind="stable")
        self.weights = weights[order]
        self.df = np.bincount(term_ids, minlength=len(self.terms))
        self.offsets = np.concatenate([[0], np.cumsum(self.df)[:-1]])
        self.p = self.df / self.df.sum()
        self.cdf = np.cumsum(self.p)
        self.documents = len(docs)
        self.encoded = [json.dumps(t) for t in self.terms]  # JSON-escaped term strings

    def draw_terms(self, rng, count: int) -> np.ndarray:
        return np.minimum(np.searchsorted(self.cdf, rng.random(count), side="right"), len(self.terms) - 1)


def synthetic_batch(stats: Statistics, rng, size: int) -> list[tuple[np.ndarray, np.ndarray]]:
    """`size` documents: (term ids, impacts) each, drawn as the module's description says."""
    nnz = stats.nnz[rng.integers(0, stats.documents, size)]
    docs: list[list[int]] = [[] for _ in range(size)]
    need = nnz.copy()
    pending = np.arange(size)
    seen = [set() for _ in range(size)]
    while len(pending):
        draws = (need[pending] * 1.5 + 8).astype(np.int64)
        terms = stats.draw_terms(rng, int(draws.sum()))
        start = 0
        still = []
        for doc, n in zip(pending, draws):
            chosen, taken, want = seen[doc], docs[doc], need[doc]
            for t in terms[start:start + n].tolist():
                if t not in chosen:
                    chosen.add(t)
                    taken.append(t)
                    if len(taken) == nnz[doc]:
                        break
            start += n
            if len(taken) < nnz[doc]:
                still.append(doc)
        pending = np.array(still, dtype=np.int64)
    out = []
    for doc in docs:
        ids = np.array(doc, dtype=np.int64)
        picks = stats.offsets[ids] + (rng.random(len(ids)) * stats.df[ids]).astype(np.int64)
        out.append((ids, stats.weights[picks]))
    return out


_STATS: Statistics | None = None  # shared with forked writer processes


def write_file(job: tuple[Path, int, int, int]) -> tuple[np.ndarray, int, int]:
    """One collection file of `count` documents numbered from `first`; (df, nnz, impact sum)."""
    path, first, count, seed = job
    stats = _STATS
    rng = np.random.default_rng(seed)
    df = np.zeros(len(stats.terms), dtype=np.int64)
    total_nnz = total_weight = 0
    written = first
    with open(path, "w", encoding="utf-8") as handle:
        remaining = count
        while remaining > 0:
            batch = synthetic_batch(stats, rng, min(remaining, 5000))
            lines = []
            for ids, weights in batch:
                body = ", ".join(f"{stats.encoded[t]}: {w}" for t, w in zip(ids.tolist(), weights.tolist()))
                lines.append(f'{{"id": "d{written}", "contents": "", "vector": {{{body}}}}}\n')
                written += 1
                df[ids] += 1  # a document's terms are distinct
                total_nnz += len(ids)
                total_weight += int(weights.sum())
            handle.writelines(lines)
            remaining -= len(batch)
    return df, total_nnz, total_weight


def write_collection(stats: Statistics, n: int, folder: Path, seed: int, processes: int) -> dict:
    """N synthetic documents in `folder` (written aside, renamed when complete); the check figures."""
    global _STATS
    record = folder.with_name("check.json")  # beside: Anserini would read any .json file inside
    if record.is_file() and folder.is_dir():
        return json.loads(record.read_text())
    partial = folder.with_name(folder.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    files = max(2, math.ceil(n / DOCS_PER_FILE))  # one file per indexing thread at least
    per_file = math.ceil(n / files)
    jobs = [(partial / f"part-{f:05d}.jsonl", f * per_file, min(per_file, n - f * per_file), seed * 1_000_003 + n + f)
            for f in range(files) if f * per_file < n]
    start = time.perf_counter()
    _STATS = stats
    if processes > 1:
        import multiprocessing

        with multiprocessing.get_context("fork").Pool(processes) as pool:
            parts = pool.map(write_file, jobs)
    else:
        parts = [write_file(job) for job in jobs]
    df = sum(part[0] for part in parts)
    total_nnz = sum(part[1] for part in parts)
    total_weight = sum(part[2] for part in parts)
    q = df / df.sum()
    check = {"documents": n, "seconds": round(time.perf_counter() - start, 1),
             "mean_nnz": total_nnz / n, "real_mean_nnz": float(stats.nnz.mean()),
             "mean_impact": total_weight / total_nnz, "real_mean_impact": float(stats.weights.mean()),
             "term_tv_distance": float(0.5 * np.abs(q - stats.p).sum()),
             "terms_used": int((df > 0).sum()), "real_terms": len(stats.terms),
             "vector_bytes": folder_bytes(partial)}
    if folder.exists():
        shutil.rmtree(folder)
    partial.rename(folder)
    record.write_text(json.dumps(check, indent=1))
    return check


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def build_index(vectors: Path, index: Path, threads: int, rebuild: bool) -> dict:
    record = index.with_name("build.json")
    if index.is_dir() and record.is_file() and not rebuild:
        return json.loads(record.read_text())
    if index.exists():
        shutil.rmtree(index)
    load_before = load()
    wall = run([PY, "-m", "lsr_pyserini.lucene", "index", "--collection", "JsonVectorCollection", "--input",
                str(vectors), "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator",
                "--impact", "--pretokenized", "--threads", str(threads)])
    built = {"build_seconds": round(wall, 2), "index_bytes": folder_bytes(index), "threads": threads,
             "load_before": load_before, "load_after": load()}
    record.write_text(json.dumps(built, indent=1))
    return built


# ---- latency ------------------------------------------------------------------------------------

def read_query_dicts(path: Path) -> list[dict[str, int]]:
    queries = []
    for line in path.read_text(encoding="utf-8").splitlines():
        _, _, text = line.partition("\t")
        weights: dict[str, int] = {}
        for token in text.split():
            weights[token] = weights.get(token, 0) + 1
        if weights:
            queries.append(weights)
    return queries


def latency(index: Path, queries: list[dict[str, int]]) -> dict:
    from lsr_pyserini.core.jvm import start_jvm

    start_jvm()
    from jnius import autoclass
    from pyserini.search.lucene import LuceneImpactSearcher

    JHashMap, JInt = autoclass("java.util.HashMap"), autoclass("java.lang.Integer")
    searcher = LuceneImpactSearcher(str(index), None)
    jqueries = []
    for weights in queries:  # as LuceneImpactSearcher.search builds them (its idf filter included)
        jquery = JHashMap()
        for token, weight in weights.items():
            if token in searcher.idf and searcher.idf[token] > searcher.min_idf:
                jquery.put(token, JInt(weight))
        jqueries.append(jquery)

    def timed(k: int) -> list[float]:
        times = []
        for jquery in jqueries:
            start = time.perf_counter()
            searcher.object.search(jquery, k)
            times.append((time.perf_counter() - start) * 1000)
        return times

    timed(1000)  # warm-up
    figures = {"load": load()}
    for k in (10, 1000):
        times = timed(k)
        figures[f"p50_ms_k{k}"] = round(float(np.percentile(times, 50)), 3)
        figures[f"p99_ms_k{k}"] = round(float(np.percentile(times, 99)), 3)
    searcher.object.close()
    return figures


# ---- throughput ---------------------------------------------------------------------------------

def throughput(work: Path, docs: int, shard_size: int) -> dict:
    help_text = subprocess.run([PY, "-m", "lsr_pyserini.encode", "corpus", "--help"], capture_output=True,
                               text=True, cwd=REPO).stdout
    if "--workers" not in help_text or "--ray" not in help_text:
        return {"skipped": "encode corpus has no --workers/--ray flags in this checkout"}
    folder = work / "throughput"
    folder.mkdir(parents=True, exist_ok=True)
    sample = folder / f"scifact-{docs}.jsonl"
    with gzip.open(CORPUS, "rt", encoding="utf-8") as src, open(sample, "w", encoding="utf-8") as out:
        for i, line in enumerate(src):
            if i == docs:
                break
            out.write(line)
    figures = {"documents": docs, "shard_size": shard_size}
    for name, extra in (("one_process", []), ("workers_2", ["--workers", "2"]), ("ray", ["--ray"])):
        load_before = load()
        wall = run([PY, "-m", "lsr_pyserini.encode", "corpus", "--encoder", "splade-tiny", "--input", str(sample),
                    "--output", str(folder / name), "--overwrite", "--quiet", "--shard-size", str(shard_size), *extra])
        figures[name] = {"seconds": round(wall, 2), "docs_per_s": round(docs / wall, 2), "load_before": load_before}
    for name in ("workers_2", "ray"):
        figures[name]["ratio_to_one_process"] = round(figures[name]["docs_per_s"] / figures["one_process"]["docs_per_s"], 3)
    return figures


# ---- report -------------------------------------------------------------------------------------

FIGURES = ["build_seconds", "index_bytes", "p50_ms_k10", "p99_ms_k10", "p50_ms_k1000", "p99_ms_k1000"]


def exponents(sizes: list[dict]) -> dict:
    if len(sizes) < 2:
        return {}
    x = np.log([s["documents"] for s in sizes])
    return {f: round(float(np.polyfit(x, np.log([max(s[f], 1e-9) for s in sizes]), 1)[0]), 3) for f in FIGURES}


def table(result: dict) -> str:
    rows = ["| documents | build (s) | index (MiB) | p50 k=10 (ms) | p99 k=10 (ms) | p50 k=1000 (ms) | "
            "p99 k=1000 (ms) | load during search |", "|---:|---:|---:|---:|---:|---:|---:|---|"]
    for s in result["sizes"]:
        rows.append(f"| {s['documents']:,} | {s['build_seconds']:.1f} | {s['index_bytes'] / 2**20:.1f} | "
                    f"{s['p50_ms_k10']:.2f} | {s['p99_ms_k10']:.2f} | {s['p50_ms_k1000']:.2f} | "
                    f"{s['p99_ms_k1000']:.2f} | {s['load']} |")
    e = result["exponents"]
    if e:
        rows.append(f"| growth exponent | {e['build_seconds']:.2f} | {e['index_bytes']:.2f} | {e['p50_ms_k10']:.2f} | "
                    f"{e['p99_ms_k10']:.2f} | {e['p50_ms_k1000']:.2f} | {e['p99_ms_k1000']:.2f} | |")
    return "\n".join(rows)


def plot(result: dict, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sizes = result["sizes"]
    n = [s["documents"] for s in sizes]
    fig, (left, right) = plt.subplots(1, 2, figsize=(8, 3.2), dpi=90)
    for key, label in (("p50_ms_k10", "p50 k=10"), ("p99_ms_k10", "p99 k=10"),
                       ("p50_ms_k1000", "p50 k=1000"), ("p99_ms_k1000", "p99 k=1000")):
        left.loglog(n, [s[key] for s in sizes], marker="o", label=label)
    left.set_xlabel("documents")
    left.set_ylabel("latency per query (ms)")
    left.legend(fontsize=7)
    left.grid(True, which="both", alpha=0.3)
    right.loglog(n, [s["index_bytes"] / 2**20 for s in sizes], marker="o", label="index (MiB)")
    right.loglog(n, [s["build_seconds"] for s in sizes], marker="s", label="build (s)")
    right.set_xlabel("documents")
    right.legend(fontsize=7)
    right.grid(True, which="both", alpha=0.3)
    fig.suptitle("Anserini impact index, SPLADE-tiny-like collections", fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)


def main() -> None:
    sys.path.insert(0, str(REPO))
    from lsr_pyserini.core.options import positive_int, random_seed

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", default="10000,100000,1000000", help="corpus sizes (default: 10000,100000,1000000)")
    parser.add_argument("--json", required=True, help="write the figures here")
    parser.add_argument("--work", required=True, help="folder for the collections, indexes and caches")
    parser.add_argument("--vectors", default=None, help="SciFact SPLADE-tiny vectors (default: encode into WORK/work)")
    parser.add_argument("--queries", default=None, help="encoded SciFact test queries (default: encode into WORK/work)")
    parser.add_argument("--index-threads", type=positive_int, default=2, help="indexing threads (default: 2)")
    parser.add_argument("--plot", default=None, help="log-log PNG of latency and index size (default: none)")
    parser.add_argument("--skip-throughput", action="store_true", help="skip the encoding throughput part")
    parser.add_argument("--throughput-docs", type=positive_int, default=1024, help="documents encoded for throughput (default: 1024)")
    parser.add_argument("--throughput-shard-size", type=positive_int, default=128,
                        help="--shard-size of the throughput runs: a shard is encoded in one place, so the corpus "
                             "needs several per worker (default: 128)")
    parser.add_argument("--seed", type=random_seed, default=0, help="random seed of the recombination (default: 0)")
    parser.add_argument("--processes", type=positive_int, default=2,
                        help="processes writing the synthetic collections (default: 2)")
    parser.add_argument("--rebuild", action="store_true", help="rebuild indexes that exist (default: reuse)")
    args = parser.parse_args()
    sizes = [int(s) for s in args.docs.split(",")]
    work = Path(args.work)
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; load average {load()}", flush=True)
    stats = Statistics(read_vectors(real_vectors(work, args.vectors)))
    queries = read_query_dicts(real_queries(work, args.queries))
    print(f"real vectors: {stats.documents} documents, {len(stats.terms)} terms, "
          f"{stats.nnz.mean():.1f} nnz/document; {len(queries)} queries", flush=True)
    result = {"cpu": cpu_name(), "cores": os.cpu_count(), "command": " ".join(sys.argv), "sizes": []}
    for n in sizes:
        folder = work / str(n)
        check = write_collection(stats, n, folder / "vectors", args.seed, args.processes)
        print(f"{n:,} docs: mean nnz {check['mean_nnz']:.1f} (real {check['real_mean_nnz']:.1f}), mean impact "
              f"{check['mean_impact']:.1f} (real {check['real_mean_impact']:.1f}), term distribution TV distance "
              f"{check['term_tv_distance']:.4f}; load {load()}", flush=True)
        built = build_index(folder / "vectors", folder / "index", args.index_threads, args.rebuild)
        print(f"{n:,} docs: built in {built['build_seconds']:.1f} s, {built['index_bytes'] / 2**20:.1f} MiB "
              f"(load {built['load_before']} -> {built['load_after']})", flush=True)
        if n == 1_000_000:
            (folder / "READY").touch()
        result["sizes"].append({"documents": n, "check": check, **built})
    for entry in result["sizes"]:
        entry.update(latency(work / str(entry["documents"]) / "index", queries))
        print(f"{entry['documents']:,} docs: p50/p99 {entry['p50_ms_k10']}/{entry['p99_ms_k10']} ms at k=10, "
              f"{entry['p50_ms_k1000']}/{entry['p99_ms_k1000']} ms at k=1000 (load {entry['load']})", flush=True)
    result["exponents"] = exponents(result["sizes"])
    result["throughput"] = {"skipped": "--skip-throughput"} if args.skip_throughput else \
        throughput(work, args.throughput_docs, args.throughput_shard_size)
    Path(args.json).write_text(json.dumps(result, indent=1))
    print(table(result))
    print("throughput:", json.dumps(result["throughput"]))
    if args.plot:
        plot(result, Path(args.plot))
        print(f"plot: {args.plot} ({Path(args.plot).stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
