"""Golden references (tests/golden/README.md): sha256 digests of outputs on the sample data,
recorded once by `tests/golden/record.py` and compared by the device and fast-path tests.

Outputs whose bits depend on the CPU's vector width (float stores, runs scored in float, trained
weights, float query vectors) are kept per CPU kind (`cpu_kind()`); on a kind with no recording
the test skips with the reason "no golden recording for CPU kind <kind>: ...", never passes."""
from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
# LSR_GOLDEN_RECORD=1 (set by record.py): write what the tests compute instead of comparing it
RECORD = os.environ.get("LSR_GOLDEN_RECORD") == "1"
SKIP_REASON = "no golden recording for CPU kind {kind}: run tests/golden/record.py"


def cpu_flags() -> set[str]:
    """The first `flags` (x86) or `Features` (ARM) line of /proc/cpuinfo, as a set."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(("flags", "Features")):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


def cpu_kind() -> str:
    """The kind the recordings are kept by: the vendor and torch's kernel capability (AMD-AVX2,
    Intel-AVX512, ...), as the regression files name it (lsr_pyserini.core.environment). MKL and
    oneDNN pick their code paths by both."""
    from lsr_pyserini.core.environment import cpu_kind as kind

    return kind()


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def digests(files: dict[str, bytes]) -> dict[str, str]:
    return {name: digest(data) for name, data in sorted(files.items())}


def folder_digests(folder: Path, pattern: str = "*", exclude: tuple[str, ...] = ()) -> dict[str, str]:
    """sha256 of each file under `folder` matching `pattern`, by relative path."""
    return {str(p.relative_to(folder)): digest(p.read_bytes()) for p in sorted(folder.rglob(pattern))
            if p.is_file() and p.name not in exclude}


def _load(file: str) -> dict:
    path = HERE / file
    return json.loads(path.read_text()) if path.exists() else {"any_kind": {}, "by_kind": {}, "recorded": {}}


def check(file: str, name: str, value, per_kind: bool) -> None:
    """Assert that `value` (digests, verdicts: JSON data) equals the recording `name` in
    tests/golden/FILE: under this CPU's kind when `per_kind`, else the one for every kind. In
    record mode, store it instead. A kind with no recording skips, naming the kind."""
    kind = cpu_kind()
    data = _load(file)
    if RECORD:
        if per_kind:
            data["by_kind"].setdefault(kind, {})[name] = value
        else:
            data["any_kind"][name] = value
        meta = json.loads(os.environ.get("LSR_GOLDEN_RECORDED", "{}"))
        first = data["recorded"].setdefault(kind, meta)  # the kind's first recording names the commit and CPU
        if first is not meta and {k: v for k, v in first.items() if k != "later"} != meta:
            first.setdefault("later", {})[name] = meta  # a digest recorded since, by another commit or CPU
        (HERE / file).write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        return
    if per_kind:
        recorded = data["by_kind"].get(kind, {})
        if name not in recorded:
            pytest.skip(SKIP_REASON.format(kind=kind))
        expected = recorded[name]
    else:
        assert name in data["any_kind"], f"{name} missing from tests/golden/{file}: run tests/golden/record.py"
        expected = data["any_kind"][name]
    assert value == expected, f"{name} differs from tests/golden/{file} (CPU kind {kind})"
