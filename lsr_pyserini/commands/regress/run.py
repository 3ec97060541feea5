"""The regression engine behind `regress` and `demo`: run a pipeline described in YAML, each step a
`python -m lsr_pyserini.TOOL` subprocess, evaluate its runs and check them against expectations.
The file format is described in `python -m lsr_pyserini.regress --help`."""
from __future__ import annotations

import json
import math
import os
import shlex
import string
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable

import yaml

from ...core.environment import cpu_kind, environment
from ...core.errors import InputError
from ...core.evaluation import EFFICIENCY_FIGURES, METRICS, evaluate_run, format_table

TOOLS = ("encode", "prepare", "expand", "lucene", "evaluate", "rerank", "fuse", "search_dense", "train", "bm25aug", "ssr",
         "adapt")
REPO_ROOT = Path(__file__).resolve().parents[3]  # the checkout (lsr_pyserini/commands/regress/run.py)


def default_data_root() -> Path:
    env = os.environ.get("LSR_PYSERINI_DATA_ROOT")
    return Path(env) if env else REPO_ROOT.parent / "shared" / "data"


# The CPU kinds a metric's value may be given per (`value: {AMD-AVX2: V, Intel-AVX512: W}`): the
# vendor and torch's `torch.backends.cpu.get_cpu_capability()`, the vector width of the kernels a
# CPU training run sums with. Its weights, and so the figures, depend on both (docs/
# reproducibility.md): an AVX-512 figure measured on an AMD EPYC says nothing of an Intel Xeon's.
CPU_KINDS = tuple(f"{vendor}-{capability}" for vendor in ("AMD", "Intel", "other")
                  for capability in ("DEFAULT", "AVX2", "AVX512", "VSX", "ZVECTOR", "SVE256"))


# The regression file's schema, written once. A closed mapping ("keys") names its keys and the kind
# of each value, the keys it requires, the keys of which exactly one must be given ("one_of") and
# keys that need another ("needs"); an open mapping ("each") has free keys (or keys from "names")
# that share one kind of value; a list ("items") holds values of one kind. No mapping or list may
# be empty. The leaves (text, number, tolerance) are checked by LEAVES.
SCHEMA = {
    "file": {"keys": {"name": "text", "collection": "text", "train_threads": "count", "qrels": "text",
                      "steps": "steps", "runs": "runs", "expected": "expected", "efficiency": "efficiency"},
             "required": ("collection", "qrels", "steps", "runs", "expected")},
    "steps": {"items": "text"},
    "runs": {"each": "text"},
    "expected": {"each": "metrics"},
    "metrics": {"each": "metric", "names": [key for key, _ in METRICS], "what": "metric"},
    "metric": {"keys": {"value": "value", "tolerance": "tolerance", "tolerance_elsewhere": "tolerance",
                        "at_least": "number", "above": "margins"},
               "one_of": ("value", "at_least"), "needs": {"tolerance": "value", "tolerance_elsewhere": "value"},
               "example": "{value: 0.6436, tolerance: 0.002} or {at_least: 0.6, above: {bm25: 0.01}}"},
    "margins": {"each": "number"},
    "per_cpu": {"each": "number", "names": list(CPU_KINDS), "what": "CPU kind"},
    "efficiency": {"each": "efficiency_file"},
    "efficiency_file": {"keys": {"file": "text", "expected": "figures"}, "required": ("file", "expected")},
    "figures": {"each": "figure", "names": [key for key, _ in EFFICIENCY_FIGURES], "what": "efficiency figure"},
    "figure": {"keys": {"value": "number", "tolerance": "tolerance", "at_least": "number", "at_most": "number"},
               "one_of": ("value", "at_least", "at_most"), "needs": {"tolerance": "value"},
               "example": "{value: 247.0, tolerance: 1.0} or {at_most: 3200000}"},
}
RESERVED_RUN = "efficiency"  # the JSON line's key for the efficiency figures
ENVIRONMENT = "environment"  # the JSON line's key for what the figures were measured with
PLACEHOLDERS = ("data", "work", "threads", "train_threads")  # substituted in qrels, steps, runs and efficiency files
# Training steps: their figures depend on torch's thread count (the CPU LayerNorm backward sums its
# weight and bias gradients in one partial sum per thread, docs/reproducibility.md), so each one
# runs with the file's `train_threads` (`--threads {train_threads}`), whatever regress's --threads.
TRAINING_STEPS = (("train",), ("ssr", "fit"), ("adapt",))
TRAIN_THREADS_FLAG = "--threads {train_threads}"


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


LEAVES = {"text": ("a string", lambda value: isinstance(value, str)),
          "number": ("a number", _is_number),
          "tolerance": ("a non-negative number", lambda value: _is_number(value) and value >= 0),
          "count": ("a positive integer", lambda value: isinstance(value, int) and not isinstance(value, bool)
                    and value >= 1)}


class _Refused(Exception):
    def __init__(self, where: str, what: str):
        super().__init__(f"{where}: {what}" if where else what)


def _join(where: str, key) -> str:
    return f"{where}.{key}" if where else str(key)


def _validate(value, kind: str, where: str) -> None:
    """Refuse (one _Refused naming the key) the first place where `value` is not of `kind`."""
    if kind == "value":  # a metric's value: one number, or one per CPU kind measured
        return _validate(value, "per_cpu" if isinstance(value, dict) else "number", where)
    if kind in LEAVES:
        description, accepts = LEAVES[kind]
        if not accepts(value):
            raise _Refused(where, f"must be {description}, not {value!r}")
        return
    rule = SCHEMA[kind]
    if "items" in rule:
        if not isinstance(value, list) or not value:
            raise _Refused(where, f"must be a non-empty list, not {value!r}")
        for number, item in enumerate(value, start=1):
            _validate(item, rule["items"], f"{where}[{number}]")
        return
    if not isinstance(value, dict) or not value:
        example = f" such as {rule['example']}" if "example" in rule else ""
        raise _Refused(where, f"must be a non-empty mapping{example}, not {value!r}")
    if "each" in rule:
        for key, item in value.items():
            if not isinstance(key, str) or ("names" in rule and key not in rule["names"]):
                known = f" (known: {', '.join(rule['names'])})" if "names" in rule else ""
                raise _Refused(where, f"unknown {rule.get('what', 'name')} {key!r}{known}")
            _validate(item, rule["each"], _join(where, key))
        return
    allowed = rule["keys"]
    for key in value:
        if key not in allowed:
            raise _Refused(where, f"unknown key {key!r} (allowed: {', '.join(allowed)})")
    for key in rule.get("required", ()):
        if key not in value:
            raise _Refused(where, f"missing required key {key!r}")
    if "one_of" in rule and sum(key in value for key in rule["one_of"]) != 1:
        raise _Refused(where, f"give exactly one of {', '.join(rule['one_of'])}")
    for key, needed in rule.get("needs", {}).items():
        if key in value and needed not in value:
            raise _Refused(_join(where, key), f"needs {needed!r}")
    for key, item in value.items():
        _validate(item, allowed[key], _join(where, key))


def _templates(spec: dict):
    """(where, text) of every string that gets PLACEHOLDERS substituted."""
    yield "qrels", spec["qrels"]
    yield from ((f"steps[{number}]", step) for number, step in enumerate(spec["steps"], start=1))
    yield from ((f"runs.{run}", path) for run, path in spec["runs"].items())
    yield from ((f"efficiency.{name}.file", entry["file"]) for name, entry in spec.get("efficiency", {}).items())


def _check_references(spec: dict) -> None:
    """What the schema cannot say: placeholders are known, steps name a tool, runs and expectations
    match one to one, and margins name other listed runs."""
    for where, text in _templates(spec):
        try:
            fields = {field for _, field, _, _ in string.Formatter().parse(text) if field is not None}
        except ValueError as err:
            raise _Refused(where, f"{text!r}: {err}") from None
        if fields - set(PLACEHOLDERS):
            raise _Refused(where, f"unknown placeholder {{{sorted(fields - set(PLACEHOLDERS))[0]}}} "
                                  f"(known: {', '.join('{' + name + '}' for name in PLACEHOLDERS)})")
    for number, step in enumerate(spec["steps"], start=1):
        try:
            words = shlex.split(step)
        except ValueError as err:
            raise _Refused(f"steps[{number}]", f"{step!r}: {err}") from None
        if not words or words[0] not in TOOLS:
            raise _Refused(f"steps[{number}]", f"{step!r} must start with one of {', '.join(TOOLS)}")
        if is_training_step(words) and TRAIN_THREADS_FLAG not in " ".join(words):
            raise _Refused(f"steps[{number}]", f"a training step must pass `{TRAIN_THREADS_FLAG}` (its figures "
                                               f"depend on the thread count; the file states the count in "
                                               f"train_threads)")
    used = any("{train_threads}" in text for _, text in _templates(spec))
    if used and "train_threads" not in spec:
        raise _Refused("", "missing key 'train_threads' (the torch thread count the training steps run with, "
                           "the one the figures were measured with)")
    runs, expected = spec["runs"], spec["expected"]
    for reserved, what in ((RESERVED_RUN, "efficiency figures"), (ENVIRONMENT, "the environment")):
        if reserved in runs:
            raise _Refused(f"runs.{reserved}", f"reserved name (the JSON line's key for {what})")
    for run in runs:
        if run not in expected:
            raise _Refused(f"runs.{run}", "has no expectations under expected")
    for run, metrics in expected.items():
        if run not in runs:
            raise _Refused(f"expected.{run}", "is not a run listed under runs")
        for metric, expectation in metrics.items():
            for other in expectation.get("above", {}):
                if other not in runs or other == run:
                    raise _Refused(f"expected.{run}.{metric}.above.{other}",
                                   "is the run itself" if other == run else "is not a run listed under runs")


def is_training_step(words: list[str]) -> bool:
    """Whether a step's words (tool first) train a model: `train ...`, `ssr fit ...`."""
    return any(tuple(words[:len(prefix)]) == prefix for prefix in TRAINING_STEPS)


def load_regression(path: str) -> dict:
    """The regression file, checked against SCHEMA; InputError naming the file and the key."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such regression file")
    try:
        spec = yaml.safe_load(file.read_text())
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML ({' '.join(str(err).split())})") from None
    try:
        _validate(spec, "file", "")
        _check_references(spec)
    except _Refused as refused:
        raise InputError(f"{path}: {refused}") from None
    spec.setdefault("name", file.stem)
    return spec


def substitute(template: str, variables: dict[str, str]) -> str:
    try:
        return template.format(**variables)
    except KeyError as err:
        raise InputError(f"unknown placeholder {{{err.args[0]}}} in {template!r} "
                         f"(known: {', '.join('{' + k + '}' for k in variables)})") from None


Say = Callable[[str], None]  # one line (or block) of text for the user, written by the command


def run_step(index: int, step: str, variables: dict[str, str], log_dir: Path, note: Say) -> float:
    """Run one step, its output in LOG_DIR/step-NN-TOOL.log; `note` gets the command line, the time
    it took, and the log's tail when it failed."""
    words = shlex.split(substitute(step, variables))  # the first word, a tool, was checked on loading
    command = [sys.executable, "-m", f"lsr_pyserini.{words[0]}", *words[1:]]
    log = log_dir / f"step-{index:02d}-{words[0]}.log"
    note(f"[{index}] {' '.join(shlex.quote(w) for w in words)}")
    started = time.time()
    env = {**os.environ, "TQDM_MININTERVAL": "5"}
    with open(log, "w") as handle:
        result = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env)
    elapsed = time.time() - started
    if result.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-15:]
        note("\n".join(tail))
        raise InputError(f"step {index} ({words[0]}) failed with exit status {result.returncode}; log: {log}")
    note(f"    done in {elapsed:.1f}s")
    return elapsed


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.6g}"


def expected_value(value, cpu: str | None) -> tuple[float, float, str]:
    """(low, high, as the file states it) of a metric's value before its tolerance: a number, or
    the value of `cpu` when the file gives one per CPU kind; on a kind it does not list (or `cpu`
    None), the measured spread, from the lowest to the highest kind's value."""
    if not isinstance(value, dict):
        return value, value, _number(value)
    if cpu in value:
        return value[cpu], value[cpu], f"{_number(value[cpu])} ({cpu})"
    kinds = ", ".join(f"{kind} {_number(number)}" for kind, number in value.items())
    return min(value.values()), max(value.values()), f"{kinds}: on {cpu or 'a CPU kind not given'}, their spread"


def _ranges(expectation: dict, baselines: dict[str, float], cpu: str | None = None) -> list[tuple[float, float, str]]:
    """The ranges (low, high, as the file states it) a measured value must fall in; `baselines`:
    the same metric measured in each run named under `above`; `cpu`: this CPU's kind (a value
    given per CPU kind)."""
    ranges = []
    if "value" in expectation:
        value = expectation["value"]
        low, high, stated = expected_value(value, cpu)
        tolerance = expectation.get("tolerance", 0.0)
        if isinstance(value, dict) and cpu not in value:  # a kind not measured: the file's wider band
            tolerance = expectation.get("tolerance_elsewhere", tolerance)
        ranges.append((low - tolerance, high + tolerance, f"{stated} +/- {_number(tolerance)}"))
    if "at_least" in expectation:
        ranges.append((expectation["at_least"], math.inf, f">= {_number(expectation['at_least'])}"))
    if "at_most" in expectation:
        ranges.append((-math.inf, expectation["at_most"], f"<= {_number(expectation['at_most'])}"))
    for run, margin in expectation.get("above", {}).items():
        floor = baselines[run] + margin
        sign = "+" if margin >= 0 else "-"  # a negative margin: at most this far below that run
        ranges.append((floor, math.inf,
                       f">= {run}'s {_number(baselines[run])} {sign} {_number(abs(margin))} = {_number(floor)}"))
    return ranges


def _misses(label: str, got: float | None, expectation: dict, baselines: dict[str, float],
            cpu: str | None = None) -> list[str]:
    if got is None:
        return [f"{label} was not measured"]
    return [f"{label} = {_number(got)}, expected {stated}"
            for low, high, stated in _ranges(expectation, baselines, cpu) if not low - 1e-9 <= got <= high + 1e-9]


def check_expectations(spec: dict, measured: dict, cpu: str | None = None) -> list[str]:
    """Every missed expectation, one line each: metrics (values, floors, margins over other runs)
    and efficiency figures (`measured[RESERVED_RUN]`); `cpu`: this CPU's kind, for values given per
    CPU kind (None: their spread applies)."""
    misses = []
    for run, metrics in spec["expected"].items():
        for metric, expectation in metrics.items():
            baselines = {other: measured[other][metric] for other in expectation.get("above", {})}
            misses += _misses(f"{run}: {metric}", measured[run].get(metric), expectation, baselines, cpu)
    for name, entry in spec.get("efficiency", {}).items():
        figures = measured[RESERVED_RUN][name]
        for figure, expectation in entry["expected"].items():
            misses += _misses(f"{name}: {figure}", figures.get(figure), expectation, {})
    return misses


def read_efficiency(path: str) -> dict[str, float]:
    """The figures of EFFICIENCY_FIGURES found in the one object `evaluate --index/--store --json` wrote."""
    if not os.path.isfile(path):
        raise InputError(f"{path}: no such efficiency file "
                         f"(written by a step `evaluate --index/--store ... --json FILE`)")
    try:
        rows = json.loads(Path(path).read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: malformed JSON ({err.msg})") from None
    if not (isinstance(rows, list) and len(rows) == 1 and isinstance(rows[0], dict)):
        raise InputError(f"{path}: not the one object `evaluate --index/--store --json` writes")
    names = {key for key, _ in EFFICIENCY_FIGURES}
    return {key: value for key, value in rows[0].items() if key in names and _is_number(value)}


def _expected_cell(value, cpu: str | None) -> str:
    low, high, _ = expected_value(value, cpu)
    return f"{low:.4f}" if low == high else f"{low:.4f}-{high:.4f}"


def _metrics_table(spec: dict, measured: dict, cpu: str | None = None) -> str:
    """Each run's metrics beside the value (or floor, >=) the file expects (on this CPU kind)."""
    rows = []
    for name in spec["runs"]:
        row = {"run": name, **measured[name]}
        for key, _ in METRICS:
            expectation = spec["expected"][name].get(key, {})
            row[f"expected_{key}"] = (_expected_cell(expectation["value"], cpu) if "value" in expectation else
                                      f">={expectation['at_least']:.4f}" if "at_least" in expectation else "-")
        rows.append(row)
    columns = [("run", "run")] + [c for key, label in METRICS
                                  for c in ((key, label), (f"expected_{key}", "expected"))]
    return format_table(rows, columns)


def _efficiency_table(spec: dict, efficiency: dict) -> str:
    """Every figure read from each efficiency file beside what the file expects of it."""
    rows = []
    for name, entry in spec["efficiency"].items():
        for figure, value in efficiency[name].items():
            expectation = entry["expected"].get(figure)
            stated = ", ".join(text for _, _, text in _ranges(expectation, {})) if expectation else "-"
            rows.append({"efficiency": name, "figure": figure, "measured": _number(value), "expected": stated})
    return format_table(rows, [(key, key) for key in ("efficiency", "figure", "measured", "expected")])


def regress(path: str, data_root: Path, work: Path, threads: int, train_threads: int | None = None, *,
            note: Say, show: Say) -> tuple[dict, list[str]]:
    """Run the file's steps, measure its runs (and efficiency files), `show` the tables (`note`: the
    progress, as `run_step`); returns
    ({run: {metric: value}, "efficiency": {name: {figure: value}}, "environment": {...}}, misses).
    `threads`: {threads} (indexing, search, encoding); `train_threads`: {train_threads}, the training
    steps' torch threads (default: the file's train_threads, the count its figures were measured with)."""
    spec = load_regression(path)
    data = data_root / spec["collection"]
    if not data.is_dir():
        raise InputError(f"collection folder {data} not found (set --data-root)")
    train_threads = train_threads or spec.get("train_threads")
    variables = dict(zip(PLACEHOLDERS, (str(data), str(work), str(threads), str(train_threads))))
    log_dir = work / "logs"
    log_dir.mkdir(parents=True, exist_ok=True)
    training = f", training on {train_threads} thread(s)" if train_threads else ""
    note(f"regression {spec['name']}: {len(spec['steps'])} steps in {work}{training}")
    for index, step in enumerate(spec["steps"], start=1):
        run_step(index, step, variables, log_dir, note)
    qrels = substitute(spec["qrels"], variables)
    measured: dict = {}
    for name, run in spec["runs"].items():
        values = evaluate_run(qrels, substitute(run, variables))
        measured[name] = {key: round(values.get(key, {}).get("all", 0.0), 4) for key, _ in METRICS}
    # this CPU's kind, read (importing torch, seconds) only for a file that gives values per kind
    per_kind = any(isinstance(expectation.get("value"), dict)
                   for metrics in spec["expected"].values() for expectation in metrics.values())
    cpu = cpu_kind() if per_kind else None
    show(_metrics_table(spec, measured, cpu))
    if "efficiency" in spec:
        measured[RESERVED_RUN] = {name: read_efficiency(substitute(entry["file"], variables))
                                  for name, entry in spec["efficiency"].items()}
        show("")
        show(_efficiency_table(spec, measured[RESERVED_RUN]))
    misses = check_expectations(spec, measured, cpu)
    measured[ENVIRONMENT] = environment(threads=threads, train_threads=train_threads)
    return measured, misses


def report(measured: dict, misses: list[str], note: Say, show: Say) -> int:
    """`note` each missed expectation and `show` the measured metrics (and efficiency figures) as
    one JSON line (the last line of the output); the exit status: 1 when an expectation was missed."""
    for miss in misses:
        note(f"MISS {miss}")
    show(json.dumps(measured, sort_keys=True))
    return 1 if misses else 0
