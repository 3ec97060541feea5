"""Two-click reproductions: run a pipeline described in YAML and check its metrics.

    python -m lsr_pyserini.regress eval/regressions/scifact-splade-tiny.yaml [--data-root DIR] [--work DIR]

A regression file names a collection (a folder under the data root in the layout of
`../shared/data`: corpus.jsonl.gz, queries.<split>.tsv, qrels.<split>.trec), a list of steps, the
runs to evaluate, and the expected metrics with tolerances:

    collection: scifact
    qrels: "{data}/qrels.test.trec"
    steps:
      - encode corpus --encoder splade-tiny --input {data}/corpus.jsonl.gz --output {work}/vectors
      - lucene index --collection JsonVectorCollection --input {work}/vectors --index {work}/index ...
    runs:
      splade-tiny: "{work}/run.splade-tiny.txt"
    expected:
      splade-tiny:
        ndcg_cut_10: {value: 0.6436, tolerance: 0.002}

Each step is `TOOL ARGS` and runs as `python -m lsr_pyserini.TOOL ARGS` in a subprocess, with
{data} (the collection folder), {work} (the scratch folder) and {threads} substituted. The command
prints a table, then the measured metrics as one JSON object on its last line, and exits 1 when a
metric misses its expectation (|measured - value| > tolerance).
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from .core.cli import run_main
from .core.options import positive_int
from .core.regression import default_data_root, regress, report


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.regress", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("regression", help="regression YAML file (e.g. eval/regressions/scifact-bm25.yaml)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="folder holding the collections (default: $LSR_PYSERINI_DATA_ROOT, else "
                             "../shared/data beside the checkout)")
    parser.add_argument("--work", type=Path, help="scratch folder to keep (default: a temporary folder, removed)")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                        help="value of {threads} in steps (default: CPU count)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    data_root = args.data_root or default_data_root()
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        measured, misses = regress(args.regression, data_root, args.work.resolve(), args.threads)
    else:
        work = Path(tempfile.mkdtemp(prefix="lsr-regress-"))
        try:
            measured, misses = regress(args.regression, data_root, work, args.threads)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(report(measured, misses))


if __name__ == "__main__":
    run_main(main)
