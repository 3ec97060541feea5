"""Measure engines on your own collection's prefixes: build, bytes, memory, latency, recall, nDCG.

For each engine and prefix: build seconds, bytes on disk, resident memory while searching,
single-thread latency (p50, p99) at each depth, recall of the exact top k, and (with qrels)
nDCG@10 and MRR@10, in one table.

    python -m lsr_pyserini.bench --vectors SHARDS --queries Q.tsv [--qrels QRELS] --work DIR --json OUT.json
        [--engines lucene,pisa,seismic,milvus] [--k 10,1000] [--sizes 10000,30000,100000] [--plot OUT.png]
        [--text-queries RAW.tsv]   # for bm25: the queries' text

SHARDS is the folder `encode corpus` wrote, Q.tsv the impact queries `encode queries` wrote with the
same encoder. An engine is a name with options after colons: `lucene`, `pisa` (`pisa:algorithm=wand`),
`seismic` (`seismic:query_cut=10:heap_factor=1.2`; build options `n_postings`, `summary_energy`,
`centroid_fraction` and `max_fraction` build an index of their own), `milvus`, `bm25` (Lucene BM25 over the shards'
text, queried with --text-queries), `bmp` (the BMP library, `pip install bmp`: `bmp:alpha=0.9`); the
option `queries=N` searches only the first N queries with that engine (for slow ones).

Sizes are prefixes of the shards in their order (default: the whole collection); each is built once
under --work (a prefix's shards are hard links of the whole shards and one cut shard), with every
index, and the measurements are kept there too: a run interrupted goes on where it stopped, a kept
measurement taken with other --k, queries or query limit is measured again, and --remeasure measures
everything again on indexes already built. Every build is the toolkit's own command, timed
whole (wall seconds, start-up included). Every search runs in its own process, one query at a time on
one thread, after 100 untimed queries; its resident memory is that process's (and its children's:
milvus-lite's server) after the searches. Recall is against the exact run of the first exact engine
listed (Lucene's where it is). As every benchmark here, it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .core.cli import QUIET_HELP, quiet_messages, run_main
from .core.errors import InputError
from .core.options import positive_int

BUILT = "bench-built.json"  # beside each index a bench built: its build command's wall seconds
ENGINE_NAMES = ("lucene", "pisa", "seismic", "milvus", "bm25", "bmp")
# options given to the build command, not to the search; specs that differ in them build their own index
BUILD_OPTIONS = {"seismic": {"n_postings": "--n-postings", "summary_energy": "--summary-energy",
                             "centroid_fraction": "--centroid-fraction", "max_fraction": "--max-fraction"}}
WARM_UP = 100  # untimed queries first at each depth: the JVM compiles Lucene's search after some (20 were too few)


@dataclass(frozen=True)
class Spec:
    """One engine as the table names it: `name[:key=value...]`."""

    label: str
    name: str
    options: dict = field(default_factory=dict)
    queries: int | None = None  # search only the first N queries

    @property
    def exact(self) -> bool:
        if self.name == "pisa":
            from .stores.pisa import EXACT_ALGORITHMS

            return self.options.get("algorithm", EXACT_ALGORITHMS[0]) in EXACT_ALGORITHMS
        if self.name == "bmp":
            return all(float(self.options.get(key, 1.0)) >= 1.0 for key in ("alpha", "beta"))
        if self.name == "seismic":
            return (self.options.get("heap_factor", 1.0) == 1.0 and "query_cut" not in self.options
                    and "n_postings" not in self.options and self.options.get("summary_energy", 1.0) >= 1.0)
        return self.name != "bm25"

    @property
    def build_options(self) -> dict:
        return {key: value for key, value in self.options.items() if key in BUILD_OPTIONS.get(self.name, {})}

    @property
    def search_options(self) -> dict:
        return {key: value for key, value in self.options.items() if key not in BUILD_OPTIONS.get(self.name, {})}

    @property
    def index_key(self) -> str:
        """Specs that differ only in search options share one index."""
        built = "".join(f"_{key}-{value}" for key, value in sorted(self.build_options.items()))
        return self.name + built


def parse_spec(text: str) -> Spec:
    name, *pairs = text.strip().split(":")
    if name not in ENGINE_NAMES:
        raise InputError(f"--engines: {name!r} is not an engine bench measures ({', '.join(ENGINE_NAMES)})")
    options: dict = {}
    queries = None
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise InputError(f"--engines: {text!r}: expected NAME:key=value:key=value")
        if key == "queries":
            queries = positive_int(value)
            continue
        try:
            options[key] = json.loads(value)
        except ValueError:
            options[key] = value
    return Spec(text.strip(), name, options, queries)


def parse_numbers(text: str, what: str) -> list[int]:
    try:
        numbers = [int(part.replace("_", "")) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--{what}: expected numbers separated by commas, got {text!r}") from None
    if not numbers or min(numbers) < 1:
        raise InputError(f"--{what}: expected positive numbers, got {text!r}")
    return sorted(set(numbers))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", required=True, help="folder of JsonVectorCollection shards (`encode corpus`)")
    parser.add_argument("--queries", required=True, help="impact query TSV (`encode queries`, the same encoder)")
    parser.add_argument("--qrels", help="TREC qrels of the queries: nDCG@10 and MRR@10 (default: none)")
    parser.add_argument("--text-queries", help="the queries' text (qid<TAB>text), for the bm25 engine")
    parser.add_argument("--engines", default="lucene,pisa,seismic",
                        help="engines, comma-separated, each NAME[:key=value...] (default: lucene,pisa,seismic)")
    parser.add_argument("--k", default="10,1000", help="depths, comma-separated (default: 10,1000)")
    parser.add_argument("--sizes", help="collection prefixes in documents, comma-separated (default: all of it)")
    parser.add_argument("--work", required=True, help="folder for the prefixes, indexes, runs and measurements")
    parser.add_argument("--json", required=True, help="JSON file to write (every row, the CPU, the growth exponents)")
    parser.add_argument("--plot", help="PNG to write: p50 latency against size, log-log, one panel per depth")
    parser.add_argument("--max-queries", type=positive_int, help="search only the first N queries (default: all)")
    parser.add_argument("--build-timeout", type=positive_int, default=4 * 3600,
                        help="seconds a build may take; beyond, the engine is stopped at that size and the larger "
                             "ones (default: 14400)")
    parser.add_argument("--remeasure", action="store_true", help="measure again where measurements are kept")
    parser.add_argument("--unrecorded-topics", action="store_true",
                        help="measure with a --queries file that `encode queries` did not record and that reads as "
                             "query text (default: refuse it, docs/encoding.md)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


# -- the collection and its prefixes ---------------------------------------------------------------

def shard_counts(folder: Path, manifest: dict | None) -> list[tuple[Path, int]]:
    """(shard, documents) of every shard, from the manifest where there is one."""
    from .stores.vectors import vector_files

    files = vector_files(folder)
    if manifest is not None:
        by_name = {f"part-{int(n):05d}.jsonl": int(entry["documents"]) for n, entry in manifest["shards"].items()}
        return [(path, by_name[str(path.relative_to(folder))]) for path in files]
    counts = []
    for path in files:
        with open(path, "rb") as handle:
            counts.append((path, sum(1 for line in handle if line.strip())))
    return counts


def prefix(folder: Path, manifest: dict | None, counts: list[tuple[Path, int]], size: int, work: Path) -> Path:
    """The shards of the first `size` documents: the collection itself, or WORK/collections/SIZE
    (hard links of whole shards, the last one cut; a manifest beside it recording the encoder)."""
    total = sum(count for _, count in counts)
    if size >= total:
        return folder
    target = work / "collections" / str(size)
    if target.is_dir():
        return target
    building = target.with_name(target.name + ".building")
    if building.exists():
        import shutil

        shutil.rmtree(building)
    building.mkdir(parents=True)
    left, shards = size, {}
    for number, (path, count) in enumerate(counts):
        if left <= 0:
            break
        name = f"part-{number:05d}.jsonl"
        if count <= left:
            try:
                os.link(path, building / name)
            except OSError:
                (building / name).write_bytes(path.read_bytes())
        else:
            with open(path, "rb") as source, open(building / name, "wb") as cut:
                kept = 0
                for line in source:
                    if line.strip():
                        cut.write(line)
                        kept += 1
                        if kept == left:
                            break
            count = left
        shards[str(number)] = {"bytes": (building / name).stat().st_size, "documents": count}
        left -= count
    if manifest is not None:
        own = {**{k: v for k, v in manifest.items() if k not in ("shards", "environment")}, "shards": shards,
               "status": "complete", "prefix_of": str(folder.resolve()), "documents_written": size}
        building.with_name(target.name + ".manifest.json").write_text(json.dumps(own, indent=1))
    building.rename(target)
    if manifest is not None:
        building.with_name(target.name + ".manifest.json").rename(target.with_name(target.name + ".manifest.json"))
    return target


def text_prefix(shards: Path, work: Path, size: int) -> Path:
    """The shards' text as a JsonCollection (id, contents) for the BM25 index."""
    from .stores.documents import ShardDocuments

    target = work / "collections" / f"{size}.text"
    if target.is_dir():
        return target
    building = target.with_name(target.name + ".building")
    building.mkdir(parents=True, exist_ok=True)
    with open(building / "part-00000.jsonl", "w", encoding="utf-8") as out:
        for path in ShardDocuments(shards).files:
            with open(path, encoding="utf-8") as handle:
                for line in handle:
                    if line.strip():
                        record = json.loads(line)
                        out.write(json.dumps({"id": record["id"], "contents": record.get("contents", "")}) + "\n")
    building.rename(target)
    return target


# -- building -----------------------------------------------------------------------------------------

def index_path(work: Path, spec: Spec, size: int) -> Path:
    suffix = ".db" if spec.name == "milvus" else ""
    return work / "indexes" / f"{spec.index_key}-{size}{suffix}"


def build_command(spec: Spec, shards: Path, index: Path, text: Path | None) -> list[str]:
    python = [sys.executable, "-m"]
    if spec.name == "lucene":
        return [*python, "lsr_pyserini.lucene", "index", "--collection", "JsonVectorCollection", "--input", str(shards),
                "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
                "--threads", "2"]
    if spec.name == "bm25":
        return [*python, "lsr_pyserini.lucene", "index", "--collection", "JsonCollection", "--input", str(text),
                "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", "--threads", "2"]
    if spec.name in ("pisa", "seismic"):
        flags = [str(part) for key, value in sorted(spec.build_options.items())
                 for part in (BUILD_OPTIONS[spec.name][key], value)]
        return [*python, f"lsr_pyserini.{spec.name}", "index", "--input", str(shards), "--index", str(index), *flags,
                "--quiet"]
    if spec.name == "milvus":
        return [*python, "lsr_pyserini.milvus", "index", "--input", str(shards), "--uri", str(index), "--collection",
                "bench", "--quiet"]
    return [*python, "lsr_pyserini.bench", "--_worker", "build-bmp", str(shards), str(index)]


def build(spec: Spec, shards: Path, index: Path, text: Path | None, timeout: int) -> dict:
    """Build the index unless built before; {"seconds"} or {"stopped": why}."""
    record = index.with_name(index.name + "." + BUILT)
    if record.is_file():
        return json.loads(record.read_text())
    if index.exists():  # an earlier build that did not finish (the commands that resume, resume)
        if spec.name in ("lucene", "bm25", "bmp"):
            import shutil

            shutil.rmtree(index)
    index.parent.mkdir(parents=True, exist_ok=True)
    log = index.with_name(index.name + ".log")
    started = time.perf_counter()
    try:
        with open(log, "w") as handle:
            done = subprocess.run(build_command(spec, shards, index, text), stdout=handle, stderr=subprocess.STDOUT,
                                  timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"stopped": f"its build ran past {timeout} s"}
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        last = [line for line in log.read_text(errors="replace").splitlines() if line.strip()][-1:] or ["no output"]
        why = "killed (out of memory?)" if done.returncode in (-9, 137) else last[0][:200]
        return {"stopped": f"its build failed ({why}; {log})"}
    result = {"seconds": round(seconds, 2)}
    record.write_text(json.dumps(result))
    return result


def index_bytes(index: Path) -> int:
    from .core.outputs import folder_bytes

    return index.stat().st_size if index.is_file() else folder_bytes(index)


# -- measuring (in a process of its own) ----------------------------------------------------------

def measured_with(spec: Spec, queries_path: str, ks: list[int], max_queries: int | None) -> dict:
    """What a measurement depends on besides its index: kept in its figures, so a stored measurement
    taken with other depths, queries or a query limit is measured again, not reused."""
    return {"queries": str(Path(queries_path).resolve()), "ks": ks,
            "max_queries": min(filter(None, (spec.queries, max_queries)), default=None)}


def measure(spec: Spec, index: Path, queries_path: str, ks: list[int], runs: Path, result: Path,
            max_queries: int | None) -> dict:
    """Search in a fresh process; its figures (and one TREC run per depth under `runs`)."""
    command = [sys.executable, "-m", "lsr_pyserini.bench", "--_worker", "measure", json.dumps({
        "name": spec.name, "options": spec.search_options, "index": str(index), "queries": queries_path, "ks": ks,
        "runs": str(runs), "result": str(result), "max_queries": min(filter(None, (spec.queries, max_queries)),
                                                                       default=None)})]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not result.is_file():
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        why = "killed (out of memory?)" if done.returncode in (-9, 137) else lines[-1][:300]
        return {"stopped": f"its search failed: {why}"}
    figures = {**json.loads(result.read_text()), "measured_with": measured_with(spec, queries_path, ks, max_queries)}
    result.write_text(json.dumps(figures))
    return figures


def resident_bytes() -> int:
    """This process's resident memory and its children's (milvus-lite's server)."""
    import psutil

    process = psutil.Process()
    total = process.memory_info().rss
    for child in process.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total


class BmpEngine:
    """The peer BMP library (Mallia, Suel, Tonellotto, SIGIR 2024) over the same integer impacts."""

    def __init__(self, index: str, alpha: float = 1.0, beta: float = 1.0):
        try:
            import bmp
        except ImportError:
            raise InputError("the bmp engine of bench needs the BMP library: pip install bmp") from None
        self.searcher = bmp.Searcher(str(Path(index) / "index.bmp"))
        self.alpha, self.beta = float(alpha), float(beta)

    def search(self, qids, queries, k, threads=1):
        run = {}
        for qid, query in zip(qids, queries):
            docnos, scores = self.searcher.search({t: int(w) for t, w in query.items()}, k=k, alpha=self.alpha,
                                                  beta=self.beta)
            run[qid] = list(zip(docnos, map(float, scores)))
        return run


def build_bmp(shards: str, index: str, block_size: int = 32) -> None:
    """BMP's index of the shards. BMP keeps a document's impact in 8 bits: impacts above 255 are
    scaled into 0..255 by the largest one (a first pass finds it), as its PyTerrier indexer scales
    float weights; it quantizes the query weights itself."""
    import bmp

    from .stores.vectors import read_vectors

    largest = max((max(vector.values(), default=0) for _, vector in read_vectors(Path(shards))), default=0)
    scale = 255 / largest if largest > 255 else 1.0
    folder = Path(index)
    building = folder.with_name(folder.name + ".building")
    building.mkdir(parents=True, exist_ok=True)
    indexer = bmp.Indexer(str(building / "index.bmp"), bsize=block_size, compress_range=False)
    for docid, vector in read_vectors(Path(shards)):
        indexer.add_document(docid, {term: int(round(weight * scale)) for term, weight in vector.items()
                                     if round(weight * scale) > 0})
    indexer.finish()
    (building / "bmp.json").write_text(json.dumps({"largest_impact": largest, "scale": scale, "bsize": block_size}))
    building.rename(folder)


def worker_measure(job: dict) -> None:
    """One engine's searches, timed query by query; writes the runs and `job["result"]`."""
    import numpy as np

    from .core.writer import run_lines

    name, options = job["name"], dict(job["options"])
    if name == "bm25":
        from .core.readers import read_queries

        queries = [(query.id, query.text) for query in read_queries(job["queries"])]
    else:
        from .stores.vectors import read_impact_queries

        queries = read_impact_queries(job["queries"])
    queries = queries[: job["max_queries"]] if job["max_queries"] else queries
    before = resident_bytes()
    if name == "bmp":
        engine = BmpEngine(job["index"], **options)
    else:
        if name in ("lucene", "bm25"):
            from .core.java import start_jvm

            start_jvm()
        from .engines import build_engine

        if name == "milvus":
            options.setdefault("collection", "bench")
        engine = build_engine(name, job["index"], options)
    opened = resident_bytes()
    figures: dict = {"queries": len(queries), "resident_before_open": before, "resident_opened": opened, "k": {}}
    runs = Path(job["runs"])
    runs.mkdir(parents=True, exist_ok=True)
    for k in job["ks"]:
        for qid, query in queries[:WARM_UP]:
            engine.search([qid], [query], k)
        times, run = [], {}
        for qid, query in queries:
            started = time.perf_counter()
            hits = engine.search([qid], [query], k)
            times.append(time.perf_counter() - started)
            run[qid] = hits.get(qid, [])
        milliseconds = 1000 * np.asarray(times)
        figures["k"][str(k)] = {"p50_ms": float(np.percentile(milliseconds, 50)),
                                "p99_ms": float(np.percentile(milliseconds, 99)),
                                "mean_ms": float(milliseconds.mean())}
        with open(runs / f"run.{k}.txt", "w") as handle:
            handle.writelines(run_lines(run, "bench"))
    figures["resident_bytes"] = resident_bytes()
    Path(job["result"]).write_text(json.dumps(figures))


def worker(args: list[str]) -> None:
    if args[0] == "build-bmp":
        build_bmp(args[1], args[2])
    elif args[0] == "measure":
        worker_measure(json.loads(args[1]))
    else:
        raise InputError(f"unknown worker job {args[0]!r}")


# -- scoring the runs --------------------------------------------------------------------------------

def read_run(path: Path) -> dict[str, list[str]]:
    run: dict[str, list[str]] = {}
    with open(path) as handle:
        for line in handle:
            qid, _, docid, *_ = line.split()
            run.setdefault(qid, []).append(docid)
    return run


def recall_of_exact(run: dict[str, list[str]], exact: dict[str, list[str]], k: int) -> float:
    """The mean fraction of the exact top k that the run's top k holds (queries the run searched)."""
    fractions = [len(set(run.get(qid, [])[:k]) & set(docids[:k])) / len(docids[:k])
                 for qid, docids in exact.items() if docids and qid in run]
    return sum(fractions) / len(fractions) if fractions else float("nan")


def growth_exponent(points: list[tuple[int, float]]) -> float | None:
    """The slope of log p50 against log size (latency ~ size^exponent), least squares."""
    points = [(size, value) for size, value in points if value and value > 0]
    if len(points) < 2:
        return None
    xs = [math.log(size) for size, _ in points]
    ys = [math.log(value) for _, value in points]
    mean_x, mean_y = sum(xs) / len(xs), sum(ys) / len(ys)
    spread = sum((x - mean_x) ** 2 for x in xs)
    return sum((x - mean_x) * (y - mean_y) for x, y in zip(xs, ys)) / spread if spread else None


def plot(rows: list[dict], ks: list[int], path: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = list(dict.fromkeys(row["engine"] for row in rows))
    rows_of_legend = (len(labels) + 1) // 2
    figure, axes = plt.subplots(1, len(ks), figsize=(6 * len(ks), 4.5 + 0.22 * rows_of_legend), squeeze=False)
    colours = plt.get_cmap("tab20").colors  # one colour per engine beyond the default cycle's ten
    styles = ("-", "--", ":", "-.")
    for axis, k in zip(axes[0], ks):
        for number, label in enumerate(labels):
            points = [(row["size"], row["k"][str(k)]["p50_ms"]) for row in rows
                      if row["engine"] == label and str(k) in row.get("k", {})]
            if points:
                axis.plot(*zip(*points), marker="o", label=label, color=colours[number % len(colours)],
                          linestyle=styles[(number // len(colours)) % len(styles)])
        axis.set_xscale("log")
        axis.set_yscale("log")
        axis.set_xlabel("documents")
        axis.set_ylabel("p50 ms per query (1 thread)")
        axis.set_title(f"k={k}")
        axis.grid(True, which="both", alpha=0.3)
    handles, names = axes[0][0].get_legend_handles_labels()
    # below the panels, so no engine's line is hidden behind it
    figure.legend(handles, names, loc="lower center", ncol=2, fontsize=8, frameon=False)
    figure.suptitle(title, fontsize=9)
    figure.tight_layout(rect=(0, 0.05 * rows_of_legend * 4.5 / (4.5 + 0.22 * rows_of_legend) / 0.9, 1, 1))
    figure.savefig(path, dpi=110)
    plt.close(figure)


def table(rows: list[dict], ks: list[int]) -> str:
    header = ["engine", "size", "build s", "MiB", "RSS MiB"] + [f"{c}@{k}" for k in ks for c in ("p50", "p99", "R")] \
        + ["nDCG@10", "MRR@10"]
    lines = [" | ".join(header)]
    for row in rows:
        if "stopped" in row:
            lines.append(f"{row['engine']} | {row['size']:,} | stopped: {row['stopped']}")
            continue
        cells = [row["engine"], f"{row['size']:,}", f"{row['build_seconds']:.1f}", f"{row['bytes'] / 2**20:.1f}",
                 f"{row['resident_bytes'] / 2**20:.0f}"]
        for k in ks:
            figures = row["k"][str(k)]
            cells += [f"{figures['p50_ms']:.2f}", f"{figures['p99_ms']:.2f}", f"{figures.get('recall', float('nan')):.4f}"]
        cells += [f"{row[m]:.4f}" if isinstance(row.get(m), float) else "-" for m in ("ndcg_cut_10", "mrr_10")]
        lines.append(" | ".join(cells))
    return "\n".join(lines)


# -- the command ----------------------------------------------------------------------------------------

def check_options(specs: list[Spec]) -> None:
    """A misspelt option is refused before any build, not found by the search after it."""
    from .engines import check_engine

    for spec in specs:
        if spec.name == "bmp":
            unknown = sorted(set(spec.options) - {"alpha", "beta"})
            if unknown:
                raise InputError(f"--engines: {spec.label}: bmp has no option {unknown[0]!r} (options: alpha, beta)")
            continue
        try:
            check_engine(spec.name, spec.search_options)
        except InputError as error:
            built = ", ".join(BUILD_OPTIONS.get(spec.name, {}))
            raise InputError(f"--engines: {spec.label}: {error}" + (f"; build options: {built}" if built else "")) \
                from None


def check_inputs(args, specs: list[Spec], sizes: list[int] | None) -> tuple[dict | None, list, list[int]]:
    """Everything refused before any work: shards (one encoder's, complete), queries (the shards'
    encoder's, as the search commands check them), sizes, bm25's text."""
    from .core.topics import IMPACTS, TEXT, check_topics
    from .stores.vectors import check_shards, read_impact_queries

    folder = Path(args.vectors)
    manifest = check_shards(folder)
    counts = shard_counts(folder, manifest)
    total = sum(count for _, count in counts)
    encoder = ((manifest or {}).get("settings") or {}).get("encoder")
    check_topics(args.queries, encoder, IMPACTS, args.unrecorded_topics, index=str(folder))
    read_impact_queries(args.queries)  # a line-numbered error for a file that is not impact queries
    if args.text_queries:
        check_topics(args.text_queries, None, TEXT, index=f"bm25 over {folder}")
    if sizes is None:
        sizes = [total]
    too_large = [size for size in sizes if size > total]
    if too_large:
        raise InputError(f"--sizes: {too_large[0]:,} is larger than the collection ({total:,} documents in {folder})")
    check_options(specs)
    if any(spec.name == "bm25" for spec in specs) and not args.text_queries:
        raise InputError("engine bm25 searches the queries' text: give --text-queries (qid<TAB>text)")
    for path in filter(None, (args.qrels, args.text_queries)):
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file")
    return manifest, counts, sizes


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        worker(argv[1:])
        return
    args = build_parser().parse_args(argv)
    quiet_messages(args.quiet)
    specs = [parse_spec(text) for text in args.engines.split(",") if text.strip()]
    if not specs:
        raise InputError("--engines: name at least one engine")
    ks = parse_numbers(args.k, "k")
    sizes = parse_numbers(args.sizes, "sizes") if args.sizes else None
    manifest, counts, sizes = check_inputs(args, specs, sizes)
    from tqdm import tqdm

    from .core.environment import cpu_kind, cpu_model, environment

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    folder = Path(args.vectors)
    reference = next((spec for spec in specs if spec.name == "lucene"), next((s for s in specs if s.exact), None))
    rows: list[dict] = []
    stopped: dict[str, str] = {}  # index key -> why it stopped at a smaller size
    tasks = [(size, spec) for size in sizes for spec in specs]
    with tqdm(tasks, disable=args.quiet, dynamic_ncols=True, unit="measurement") as progress:
        for size, spec in progress:
            progress.set_description(f"{spec.label} at {size:,}")
            row = {"engine": spec.label, "name": spec.name, "options": spec.options, "size": size, "exact": spec.exact}
            if spec.index_key in stopped:
                rows.append({**row, "stopped": stopped[spec.index_key]})
                continue
            shards = prefix(folder, manifest, counts, size, work)
            text = text_prefix(shards, work, size) if spec.name == "bm25" else None
            index = index_path(work, spec, size)
            built = build(spec, shards, index, text, args.build_timeout)
            if "stopped" in built:
                stopped[spec.index_key] = f"{built['stopped']} at {size:,} documents"
                rows.append({**row, "stopped": stopped[spec.index_key]})
                continue
            label = spec.label.replace(":", "_").replace("=", "-")
            runs = work / "runs" / f"{label}-{size}"
            result = runs / "figures.json"
            queries = args.text_queries if spec.name == "bm25" else args.queries
            stored = json.loads(result.read_text()) if result.is_file() and not args.remeasure else {}
            if stored.get("measured_with") == measured_with(spec, queries, ks, args.max_queries):
                figures = stored
            else:
                figures = measure(spec, index, queries, ks, runs, result, args.max_queries)
            if "stopped" in figures:
                rows.append({**row, "stopped": f"{figures['stopped']} at {size:,} documents"})
                continue
            rows.append({**row, "build_seconds": built["seconds"], "bytes": index_bytes(index), **figures,
                         "runs": str(runs)})
    score(rows, ks, reference, work, args.qrels)
    exponents = {row["engine"]: {} for row in rows}
    for label in exponents:
        for k in ks:
            exponents[label][str(k)] = growth_exponent([(row["size"], row["k"][str(k)]["p50_ms"]) for row in rows
                                                        if row["engine"] == label and "k" in row])
    output = {"cpu": cpu_model(), "cpu_kind": cpu_kind(), "environment": environment(threads=1),
              "vectors": str(folder.resolve()), "queries": args.queries, "qrels": args.qrels, "ks": ks, "sizes": sizes,
              "reference": reference.label if reference else None, "rows": rows, "growth_exponents": exponents}
    Path(args.json).write_text(json.dumps(output, indent=1) + "\n")
    print(f"CPU: {output['cpu']} ({output['cpu_kind']}); recall against {output['reference']}")
    print(table(rows, ks))
    for label, by_k in exponents.items():
        shown = ", ".join(f"k={k}: {value:.2f}" for k, value in by_k.items() if value is not None)
        if shown:
            print(f"growth exponent of p50 with size, {label}: {shown}")
    if args.plot:
        plot([row for row in rows if "k" in row], ks, args.plot, f"{output['cpu']}; {Path(args.vectors).name}")
        print(f"plot: {args.plot}")
    print(f"JSON: {args.json}")


def score(rows: list[dict], ks: list[int], reference: Spec | None, work: Path, qrels: str | None) -> None:
    """Recall of the reference's exact top k, and nDCG@10 / MRR@10 of the deepest run, into each row."""
    from .core.evaluation import evaluate_run

    exact_runs = {row["size"]: row["runs"] for row in rows if reference and row["engine"] == reference.label
                  and "runs" in row}
    for row in rows:
        if "runs" not in row:
            continue
        runs = Path(row["runs"])
        for k in ks:
            if row["size"] in exact_runs:
                exact = read_run(Path(exact_runs[row["size"]]) / f"run.{k}.txt")
                row["k"][str(k)]["recall"] = recall_of_exact(read_run(runs / f"run.{k}.txt"), exact, k)
        if qrels:
            deepest = runs / f"run.{max(ks)}.txt"
            if not deepest.stat().st_size:  # no query found anything (trec_eval refuses an empty run)
                row["ndcg_cut_10"] = row["mrr_10"] = 0.0
                continue
            values = evaluate_run(qrels, str(deepest))
            searched = set(read_run(deepest))
            for metric in ("ndcg_cut_10", "mrr_10"):
                per_query = [value for qid, value in values[metric].items() if qid != "all" and qid in searched]
                row[metric] = sum(per_query) / len(per_query) if per_query else float("nan")


if __name__ == "__main__":
    run_main(main)
