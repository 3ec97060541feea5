"""The regression engine behind `regress` and `demo`: run a pipeline described in YAML, each step a
`python -m lsr_pyserini.TOOL` subprocess, evaluate its runs and check them against expectations.
The file format is described in `python -m lsr_pyserini.regress --help`."""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

import yaml

from .errors import InputError
from .evaluation import METRICS, evaluate_run, format_table

TOOLS = ("encode", "prepare", "expand", "lucene", "evaluate", "rerank", "fuse", "search_dense", "train", "bm25aug", "ssr")
REPO_ROOT = Path(__file__).resolve().parents[2]


def default_data_root() -> Path:
    env = os.environ.get("LSR_PYSERINI_DATA_ROOT")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


def load_regression(path: str) -> dict:
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such regression file")
    try:
        spec = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML ({err})") from None
    for key in ("collection", "qrels", "steps", "runs"):
        if not isinstance(spec, dict) or key not in spec:
            raise InputError(f"{path}: missing required key {key!r}")
    spec.setdefault("name", file.stem)
    spec.setdefault("expected", {})
    unknown = set(spec["expected"]) - set(spec["runs"])
    if unknown:
        raise InputError(f"{path}: expectations for runs that are not listed under runs: {', '.join(sorted(unknown))}")
    return spec


def substitute(template: str, variables: dict[str, str]) -> str:
    try:
        return template.format(**variables)
    except KeyError as err:
        raise InputError(f"unknown placeholder {{{err.args[0]}}} in {template!r} "
                         f"(known: {', '.join('{' + k + '}' for k in variables)})") from None


def run_step(index: int, step: str, variables: dict[str, str], log_dir: Path) -> float:
    words = shlex.split(substitute(step, variables))
    if not words or words[0] not in TOOLS:
        raise InputError(f"step {index}: {step!r} must start with one of {', '.join(TOOLS)}")
    command = [sys.executable, "-m", f"lsr_pyserini.{words[0]}", *words[1:]]
    log = log_dir / f"step-{index:02d}-{words[0]}.log"
    print(f"[{index}] {' '.join(shlex.quote(w) for w in words)}", file=sys.stderr, flush=True)
    started = time.time()
    env = {**os.environ, "TQDM_MININTERVAL": "5"}
    with open(log, "w") as handle:
        result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    elapsed = time.time() - started
    if result.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        print("\n".join(tail), file=sys.stderr)
        raise InputError(f"step {index} ({words[0]}) failed with exit status {result.returncode}; log: {log}")
    print(f"    done in {elapsed:.1f}s", file=sys.stderr, flush=True)
    return elapsed


def check_expectations(spec: dict, measured: dict[str, dict[str, float]]) -> list[str]:
    misses = []
    for run, metrics in spec["expected"].items():
        for metric, expectation in metrics.items():
            if metric not in measured.get(run, {}):
                misses.append(f"{run}: metric {metric} was not measured")
                continue
            value, tolerance = float(expectation["value"]), float(expectation.get("tolerance", 0.0))
            got = measured[run][metric]
            if abs(got - value) > tolerance + 1e-9:
                misses.append(f"{run}: {metric} = {got:.4f}, expected {value:.4f} +/- {tolerance}")
    return misses


def regress(path: str, data_root: Path, work: Path, threads: int) -> tuple[dict, list[str]]:
    spec = load_regression(path)
    data = data_root / spec["collection"]
    if not data.is_dir():
        raise InputError(f"collection folder {data} not found (set --data-root)")
    variables = {"data": str(data), "work": str(work), "threads": str(threads)}
    log_dir = work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    print(f"regression {spec['name']}: {len(spec['steps'])} steps in {work}", file=sys.stderr)
    for index, step in enumerate(spec["steps"], start=1):
        run_step(index, step, variables, log_dir)
    qrels = substitute(spec["qrels"], variables)
    measured = {}
    for name, run in spec["runs"].items():
        values = evaluate_run(qrels, substitute(run, variables))
        measured[name] = {key: round(values.get(key, {}).get("all", 0.0), 4) for key, _ in METRICS}
    rows = []
    for name, metrics in measured.items():
        row = {"run": name, **metrics}
        for key, _ in METRICS:
            expectation = spec["expected"].get(name, {}).get(key)
            row[f"expected_{key}"] = f"{expectation['value']:.4f}" if expectation else "-"
        rows.append(row)
    columns = [("run", "run")] + [c for key, label in METRICS
                                  for c in ((key, label), (f"expected_{key}", "expected"))]
    print(format_table(rows, columns))
    return measured, check_expectations(spec, measured)


def report(measured: dict, misses: list[str]) -> int:
    """Print each missed expectation on stderr and the measured metrics as one JSON line (the last
    line of the output); the exit status: 1 when an expectation was missed."""
    for miss in misses:
        print(f"MISS {miss}", file=sys.stderr)
    print(json.dumps(measured, sort_keys=True))
    return 1 if misses else 0
