"""Re-record the golden references (tests/golden/README.md): runs the tests that compare against
them (marked `golden`) with LSR_GOLDEN_RECORD=1, so they write what this code computes on this CPU kind instead of
comparing it. Re-recording is a decision: say in the commit message why the outputs changed.

    PYTHONPATH=$PWD python tests/golden/record.py [pytest -k expression within the golden-marked tests]
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(HERE))
from reference import cpu_flags, cpu_kind  # noqa: E402

TESTS = ["tests/core/test_devices.py", "tests/kernels/test_fastpath.py"]
# the variables that make torch, MKL, oneDNN and faiss take narrower kernels than the CPU has
LOWERING = ("ATEN_CPU_CAPABILITY", "MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "FAISS_OPT_LEVEL")


def main(argv: list[str]) -> int:
    import torch

    from lsr_pyserini.core.environment import cpuinfo_field

    commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "lsr_pyserini"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip())
    recorded = {"commit": os.environ.get("LSR_GOLDEN_COMMIT") or commit + ("+uncommitted library changes" if dirty else ""),
                "cpu": f"{cpuinfo_field('model name')} (family {cpuinfo_field('cpu family')}, "
                       f"model {cpuinfo_field('model')})",
                "avx512f": "avx512f" in cpu_flags(), "torch": torch.__version__}
    lowered = {name: os.environ[name] for name in LOWERING if name in os.environ}
    if lowered:  # another kind's kernels emulated on this CPU: say so in the recording
        recorded["emulated with"] = lowered
    env = {**os.environ, "LSR_GOLDEN_RECORD": "1", "LSR_GOLDEN_RECORDED": json.dumps(recorded)}
    print(f"recording CPU kind {cpu_kind()}: {recorded}", flush=True)
    selection = ["-m", "golden", *(["-k", argv[0]] if argv else [])]  # the tests marked golden, or some of them
    return subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                            *TESTS, *selection], cwd=ROOT, env=env)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
