"""Benchmark: `encode corpus` in one process, with `--workers N` and with `--ray` (N actors).

The same first DOCS SciFact documents (default 1,024) are encoded three times with the same preset
(default splade-tiny) and shard size, each run a fresh `python -m lsr_pyserini.encode corpus`
command into its own folder. Printed per mode: documents/second of the encoding loop (the
manifest's `documents_per_second_this_run`: from the first shard read to the last shard written,
so it includes starting the worker processes or Ray and loading the model in each worker or
actor), the whole command's wall-clock seconds (Python start, model load, corpus check), the ratio
of each to one process, and whether the shards and manifest are byte-identical to one process's
(they must be). The CPU and the load average before and after are printed with the figures:
on a shared machine they say how far to trust them. Nothing is asserted about speed.

    python benchmarks/bench_encode_parallel.py [--docs 1024] [--workers 2] [--shard-size 128]
        [--encoder splade-tiny] [--modes one,workers,ray] [--keep DIR] [--data-root DIR]

The corpus is read from DATA_ROOT/scifact/corpus.jsonl.gz: --data-root, else $LSR_PYSERINI_DATA_ROOT,
else ../shared/data beside the checkout. `--ray` needs `pip install 'lsr-pyserini[ray]'`; without it
the ray mode is reported as skipped.
"""
from __future__ import annotations

import argparse
import gzip
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", REPO.parent / "shared" / "data"))
TIMING = ("seconds_this_run", "documents_per_second_this_run")


def cpu_name() -> str:
    from lsr_pyserini.core.environment import cpu_model

    return cpu_model()


def load() -> str:
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def files_of(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def manifest(folder: Path) -> dict:
    return json.loads(folder.with_name(folder.name + ".manifest.json").read_text())


def run(mode: str, args, corpus: Path, out: Path) -> dict:
    flags = {"one": [], "workers": ["--workers", str(args.workers)],
             "ray": ["--ray", "--ray-actors", str(args.workers)]}[mode]
    command = [sys.executable, "-m", "lsr_pyserini.encode", "corpus", "--encoder", args.encoder, "--input",
               str(corpus), "--output", str(out), "--shard-size", str(args.shard_size), "--quiet", *flags]
    started = time.perf_counter()
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1", "TQDM_DISABLE": "1"})
    wall = time.perf_counter() - started
    if result.returncode != 0:
        last = (result.stderr.strip().splitlines() or ["?"])[-1]
        return {"mode": mode, "error": last}
    return {"mode": mode, "wall": wall, "docs_per_s": manifest(out)["documents_per_second_this_run"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=1024, help="first N SciFact documents (default: 1024)")
    parser.add_argument("--workers", type=int, default=2, help="--workers N and --ray-actors N (default: 2)")
    parser.add_argument("--shard-size", type=int, default=128, help="documents per shard (default: 128)")
    parser.add_argument("--encoder", default="splade-tiny", help="preset (default: splade-tiny)")
    parser.add_argument("--modes", default="one,workers,ray", help="comma-separated (default: one,workers,ray)")
    parser.add_argument("--keep", help="write the outputs here and keep them (default: a temporary folder)")
    parser.add_argument("--data-root", default=str(DATA_ROOT),
                        help="folder of the collections (default: $LSR_PYSERINI_DATA_ROOT, else ../shared/data)")
    args = parser.parse_args()
    source = Path(args.data_root) / "scifact" / "corpus.jsonl.gz"
    if not source.is_file():
        sys.exit(f"error: {source}: not found (give --data-root)")
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bench-parallel-"))
    work.mkdir(parents=True, exist_ok=True)
    corpus = work / "corpus.jsonl"
    with gzip.open(source, "rt", encoding="utf-8") as handle:
        corpus.write_text("".join(itertools.islice(handle, args.docs)), encoding="utf-8")
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if "ray" in modes:
        try:
            import ray  # noqa: F401
        except ImportError:
            print("ray: skipped (pip install 'lsr-pyserini[ray]')")
            modes.remove("ray")
    print(f"CPU: {cpu_name()}, {os.cpu_count()} cores; encoder {args.encoder}; {args.docs} SciFact documents; "
          f"shards of {args.shard_size}; N = {args.workers}")
    print(f"load average before: {load()}")
    results = []
    try:
        for mode in modes:
            out = work / mode
            for stale in (out, out.with_name(out.name + ".manifest.json")):
                shutil.rmtree(stale, ignore_errors=True) if stale.is_dir() else stale.unlink(missing_ok=True)
            results.append(run(mode, args, corpus, out))
            print(f"  {mode}: done (load {load()})", flush=True)
        print(f"load average after: {load()}")
        base = next((r for r in results if r["mode"] == "one" and "error" not in r), None)
        print(f"{'mode':<10}{'docs/s':>10}{'ratio':>8}{'wall s':>9}{'ratio':>8}  identical to one process")
        for r in results:
            if "error" in r:
                print(f"{r['mode']:<10} failed: {r['error']}")
                continue
            same = "-"
            if base is not None and r is not base:
                m, b = manifest(work / r["mode"]), manifest(work / "one")
                for key in TIMING:
                    m.pop(key), b.pop(key)
                same = "yes" if files_of(work / r["mode"]) == files_of(work / "one") and m == b else "NO"
            ratio = f"{r['docs_per_s'] / base['docs_per_s']:.2f}" if base else "-"
            wall_ratio = f"{base['wall'] / r['wall']:.2f}" if base else "-"
            print(f"{r['mode']:<10}{r['docs_per_s']:>10.1f}{ratio:>8}{r['wall']:>9.1f}{wall_ratio:>8}  {same}")
        print("ratio: docs/s over one process's (wall: one process's seconds over this mode's); >= 0.9 is the target")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
