"""Offline demo: encode, index, search and evaluate the sample passages shipped with the package.

    python -m lsr_pyserini.demo [--work DIR]

Runs the reproduction `lsr_pyserini/sample/sample-splade-tiny.yaml` (BM25 and SPLADE-tiny) on
the bundled sample collection with no network access, and prints the metrics table.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from . import regress
from .cli import run_main

SAMPLE_DIR = Path(__file__).resolve().parent / "sample"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", help="keep the encoded files, indexes and runs in this folder")
    args = parser.parse_args(argv)
    regress_args = [str(SAMPLE_DIR / "sample-splade-tiny.yaml"), "--data-root", str(SAMPLE_DIR.parent)]
    if args.work:
        regress_args += ["--work", args.work]
    regress.main(regress_args)


if __name__ == "__main__":
    run_main(main)
