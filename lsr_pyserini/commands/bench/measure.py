"""bench's measurements: the collection's prefixes, each engine's index built by its own command and
timed, its searches timed in a process of their own, and the runs scored (recall of the exact run,
nDCG@10 and MRR@10). What an engine is (exact, its build options, its index command) is read from its
declaration (engines/base.py); nothing here is kept by engine name. The command is command.py."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from ...core.errors import InputError
from ...core.options import positive_int
from ...core.topics import TEXT

BUILT = "bench-built.json"  # beside each index a bench built: its build command's wall seconds
WARM_UP = 100  # untimed queries first at each depth: the JVM compiles Lucene's search after some (20 were too few)


@dataclass(frozen=True)
class Spec:
    """One engine as the table names it: `name[:key=value...]`."""

    label: str
    name: str
    options: dict = field(default_factory=dict)
    queries: int | None = None  # search only the first N queries
    end_to_end: bool = False  # an impact engine timed from the query's text (Searcher.search: encoding included)

    @property
    def engine(self):
        """The engine's class: what it is (exact, its build options, its index command) is declared there."""
        from ...engines import engine_class

        return engine_class(self.name)

    @property
    def exact(self) -> bool:
        """Exact top k of the impact scores (BM25's exact top k is of other scores: not a reference)."""
        return self.engine.scores == "impact" and self.engine.is_exact(self.options)

    @property
    def build_options(self) -> dict:
        return {key: value for key, value in self.options.items() if key in self.engine.build_options}

    @property
    def search_options(self) -> dict:
        given = {key: value for key, value in self.options.items() if key not in self.engine.build_options}
        return {**self.engine.bench_options, **given}

    @property
    def index_key(self) -> str:
        """Specs that differ only in search options share one index (and an engine that searches
        another's index, `index_of`, shares that one)."""
        built = "".join(f"_{key}-{value}" for key, value in sorted(self.build_options.items()))
        return (self.engine.index_of or self.name) + built

    @property
    def from_text(self) -> bool:
        """Timed from the query's text to the top k: an engine of text queries (its analyzer or its own
        encoder included) or an impact engine measured end to end."""
        return self.end_to_end or self.engine.query_kind == TEXT

    @property
    def run_label(self) -> str:
        """The folder name of its runs and measurements."""
        return self.label.replace(":", "_").replace("=", "-") + ("-e2e" if self.end_to_end else "")


def measurable_engines() -> list[str]:
    """The engines bench can build an index for (their class declares `index_command`)."""
    from ...engines import engine_classes

    return [name for name, cls in engine_classes().items() if cls.index_command(Path("in"), Path("out"), {})]


def parse_spec(text: str) -> Spec:
    name, *pairs = text.strip().split(":")
    measured = measurable_engines()
    if name not in measured:
        raise InputError(f"--engines: {name!r} is not an engine bench measures ({', '.join(measured)}: the engines "
                         f"that declare how their index is built)")
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


# -- the collection and its prefixes ---------------------------------------------------------------

def shard_counts(folder: Path, manifest: dict | None) -> list[tuple[Path, int]]:
    """(shard, documents) of every shard, from the manifest where there is one."""
    from ...stores.vectors import vector_files

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
    from ...stores.documents import ShardDocuments

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
    return work / "indexes" / f"{spec.index_key}-{size}{spec.engine.index_suffix}"


def build_command(spec: Spec, shards: Path, index: Path, text: Path | None) -> list[str]:
    """The engine's own index command (its declaration), from the shards or, for an engine that
    indexes text, from the documents' text."""
    source = text if spec.engine.builds_from_text else shards
    return spec.engine.index_command(source, index, spec.build_options)


def build(spec: Spec, shards: Path, index: Path, text: Path | None, timeout: int) -> dict:
    """Build the index unless built before; {"seconds"} or {"stopped": why}."""
    record = index.with_name(index.name + "." + BUILT)
    if record.is_file():
        return json.loads(record.read_text())
    if index.exists():  # an earlier build that did not finish (the commands that resume, resume)
        if not spec.engine.build_resumes:
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
    from ...core.outputs import folder_bytes

    return index.stat().st_size if index.is_file() else folder_bytes(index)


# -- measuring (in a process of its own) ----------------------------------------------------------

def measured_with(spec: Spec, queries_path: str, ks: list[int], max_queries: int | None,
                  encoder: str | None = None) -> dict:
    """What a measurement depends on besides its index: kept in its figures, so a stored measurement
    taken with other depths, queries (another file, or the same file edited), a query limit, search
    options or query encoder is measured again, not reused."""
    from ...core.readers import input_identity

    identity = input_identity(queries_path)
    return {"queries": identity["input"], "queries_bytes": identity.get("input_bytes"),
            "queries_mtime_ns": identity.get("input_mtime_ns"), "ks": ks,
            "max_queries": min(filter(None, (spec.queries, max_queries)), default=None),
            "options": spec.search_options, "encoder": encoder}


WORK_RECORD = "inputs.json"


def claim_work(work: Path, folder: Path) -> None:
    """Refuse a --work folder whose prefixes and indexes were made from other shards (another folder,
    or shards rewritten since): they would be measured as if they were this input's. The first run
    records its shards (name, bytes, modification time) in WORK/inputs.json."""
    from ...stores.vectors import vector_files

    shards = {"vectors": str(folder.resolve()),
              "shards": {str(path.relative_to(folder)): [path.stat().st_size, path.stat().st_mtime_ns]
                         for path in vector_files(folder)}}
    record = work / WORK_RECORD
    if record.is_file():
        try:
            recorded = json.loads(record.read_text())
        except ValueError:
            recorded = None
        if recorded != shards:
            before = recorded.get("vectors") if isinstance(recorded, dict) else None
            what = (f"{before} as its shards were before they were rewritten" if before == shards["vectors"]
                    else f"other shards ({before})")
            raise InputError(f"--work {work}: holds the prefixes, indexes and measurements of {what}: "
                             f"give another --work, or remove it to measure again")
        return
    work.mkdir(parents=True, exist_ok=True)
    record.write_text(json.dumps(shards, indent=1) + "\n")


def measure(spec: Spec, index: Path, queries_path: str, ks: list[int], runs: Path, result: Path,
            max_queries: int | None, encoder: str | None = None) -> dict:
    """Search in a fresh process; its figures (and one TREC run per depth under `runs`). `encoder`:
    an end-to-end spec's query encoder (the queries are then text)."""
    command = [sys.executable, "-m", "lsr_pyserini.bench", "--_worker", "measure", json.dumps({
        "name": spec.name, "options": spec.search_options, "index": str(index), "queries": queries_path, "ks": ks,
        "runs": str(runs), "result": str(result), "max_queries": min(filter(None, (spec.queries, max_queries)),
                                                                       default=None), "encoder": encoder})]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0 or not result.is_file():
        lines = [line for line in done.stderr.splitlines() if line.strip()] or ["no output"]
        why = "killed (out of memory?)" if done.returncode in (-9, 137) else lines[-1][:300]
        return {"stopped": f"its search failed: {why}"}
    figures = {**json.loads(result.read_text()),
               "measured_with": measured_with(spec, queries_path, ks, max_queries, encoder)}
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


class EndToEnd:
    """An impact engine searched from text as a user's code does: `Searcher(index, encoder,
    engine=...).search(text, k)`, the query encoded inside each timed call. Its query side is
    warmed first as the service warms it (one query of each token length: the fast paths' one-time
    work per shape), untimed."""

    def __init__(self, name: str, index: str, options: dict, encoder: str):
        from ...api import Searcher

        self.searcher = Searcher(index, encoder=encoder, engine=name, engine_options=options)
        warm = getattr(self.searcher.query_side, "warm", None)
        if warm is not None:
            warm()

    def search(self, qids: list[str], texts: list[str], k: int) -> dict:
        return {qid: [(hit.docid, hit.score) for hit in self.searcher.search(text, k)]
                for qid, text in zip(qids, texts)}


def worker_measure(job: dict) -> None:
    """One engine's searches, timed query by query on one thread (the query encoder's too);
    writes the runs and `job["result"]`."""
    import numpy as np

    from ...core.writer import run_lines

    from ...engines import build_engine, engine_class

    name, options = job["name"], dict(job["options"])
    if engine_class(name).query_kind == TEXT or job.get("encoder"):
        from ...core.readers import read_queries

        queries = [(query.id, query.text) for query in read_queries(job["queries"])]
    else:
        from ...stores.vectors import read_impact_queries

        queries = read_impact_queries(job["queries"])
    queries = queries[: job["max_queries"]] if job["max_queries"] else queries
    before = resident_bytes()
    engine = EndToEnd(name, job["index"], options, job["encoder"]) if job.get("encoder") else \
        build_engine(name, job["index"], options)
    if "torch" in sys.modules:  # a query encoder opened (end to end, or an engine that encodes text itself)
        from ...core.cli import set_threads

        set_threads(1)  # one query at a time on one thread, its encoding too
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
    if args[0] == "measure":
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


def score(rows: list[dict], ks: list[int], reference: Spec | None, work: Path, qrels: str | None) -> None:
    """Recall of the reference's exact top k, and nDCG@10 / MRR@10 of the deepest run, into each row."""
    from ...core.evaluation import evaluate_run

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

