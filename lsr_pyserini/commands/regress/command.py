"""Two-click reproductions: run a pipeline described in YAML and check its metrics.

    python -m lsr_pyserini.regress eval/regressions/scifact-splade-tiny.yaml [--data-root DIR] [--work DIR]

A regression file names a collection (a folder under the data root in the layout of
`../shared/data`: corpus.jsonl.gz, queries.<split>.tsv, qrels.<split>.trec), a list of steps, the
runs to evaluate, the expected metrics and, optionally, expected efficiency figures:

    name: splade-tiny-fine-tuning        # optional (default: the file's name)
    collection: scifact
    qrels: "{data}/qrels.test.trec"
    steps:
      - encode corpus --encoder splade-tiny --input {data}/corpus.jsonl.gz --output {work}/vectors
      - lucene index --collection JsonVectorCollection --input {work}/vectors --index {work}/index ...
      - evaluate --index {work}/index --queries {work}/queries.tsv --json {work}/efficiency.json
      - ...
    runs:
      splade-tiny: "{work}/run.splade-tiny.txt"
      splade-tiny-ft: "{work}/run.splade-tiny-ft.txt"
    expected:
      splade-tiny:
        ndcg_cut_10: {value: 0.6436, tolerance: 0.002}
      splade-tiny-ft:
        ndcg_cut_10: {value: 0.6685, tolerance: 0.005, above: {splade-tiny: 0.02}}
        recall_100: {at_least: 0.90}
    efficiency:
      splade-tiny:                       # a free name
        file: "{work}/efficiency.json"   # what that `evaluate --json` step wrote
        expected:
          avg_nonzeros_per_document: {value: 247.0, tolerance: 1.0}
          size_bytes: {at_most: 3300000}

Each step is `TOOL ARGS` and runs as `python -m lsr_pyserini.TOOL ARGS` in a subprocess, with
{data} (the collection folder), {work} (the scratch folder), {threads} (--threads) and
{train_threads} substituted.

Training steps (`train ...`, `ssr fit ...`) must pass `--threads {train_threads}`, and a file
with one states `train_threads: N`, the torch thread count its figures were measured with: a CPU
training run's weights depend on torch's thread count (docs/reproducibility.md), so regress runs
the training steps with the file's count, whatever --threads says (which drives Lucene indexing
and search, encoding and re-ranking: their outputs do not depend on it). --train-threads overrides
the file's count, and the figures may then differ from the file's.

A metric expectation is {value: V, tolerance: T} (|measured - V| <= T; T defaults to 0) or
{at_least: V} (measured >= V), either with an optional margin over other runs, above: {RUN: M, ...}
(measured >= that run's measured value of the same metric + M; M may be negative). A value that
depends on the CPU kind (a trained run: the vendor and the kernels' vector width move CPU
training's weights, docs/reproducibility.md) may be given per kind measured,
{value: {AMD-AVX2: V, Intel-AVX512: W}, tolerance: T, tolerance_elsewhere: E} (the vendor, AMD,
Intel or other, and torch.backends.cpu.get_cpu_capability()'s name): this CPU's kind's value
applies +/- T, and on a kind not listed the measured spread (from the lowest to the highest value)
+/- E (default T). Every run under
`runs` needs at least one expectation, and expectations and margins may name only runs listed there.
An efficiency figure is {value: V, tolerance: T}, {at_least: V} or {at_most: V}, read from the JSON
file an `evaluate --index DIR [--queries Q] [--store STORE] --json FILE` step wrote (see
`python -m lsr_pyserini.evaluate --help`); the names are the keys it writes (listed below).

The file is checked before any step runs: an unknown key, an empty or missing `expected`, a metric
or figure name not listed below, a bare number where a mapping belongs, a negative tolerance, or a
step that is not a string naming a tool is refused with one line naming the file and the key (exit
status 2). The command prints the metrics table (and the efficiency figures), then each missed
expectation on a MISS line and, last, the measured values as one JSON object,
{RUN: {METRIC: value}, ..., "efficiency": {NAME: {FIGURE: value}}, "environment": {...}} (the
"efficiency" key only when the file has that section; "environment": threads, train_threads and
the torch, transformers, Pyserini, Java and Python versions and the CPU the figures were measured
with; no run may be called "efficiency" or "environment"); it exits 1 when a value misses its
expectation.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from ...core.cli import note, run_main
from ...core.evaluation import EFFICIENCY_FIGURES, METRICS
from ...core.options import positive_int
from .run import default_data_root, regress, report


def build_parser() -> argparse.ArgumentParser:
    names = "metrics: " + ", ".join(key for key, _ in METRICS) + "\nefficiency figures:\n" + "\n".join(
        f"  {key:<26} {what}" for key, what in EFFICIENCY_FIGURES)
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.regress", description=__doc__, epilog=names,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("regression", help="regression YAML file (e.g. eval/regressions/scifact-bm25.yaml)")
    parser.add_argument("--data-root", type=Path, default=None,
                        help="folder holding the collections (default: $LSR_PYSERINI_DATA_ROOT, else "
                             "../shared/data beside the checkout)")
    parser.add_argument("--work", type=Path, help="scratch folder to keep (default: a temporary folder, removed)")
    parser.add_argument("--threads", type=positive_int, default=os.cpu_count() or 1,
                        help="value of {threads} in steps: Lucene indexing and search, encoding, re-ranking "
                             "(default: CPU count)")
    parser.add_argument("--train-threads", type=positive_int, default=None,
                        help="value of {train_threads}: the torch threads of the training steps (default: the "
                             "file's train_threads, the count its figures were measured with; another count "
                             "gives other figures)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    data_root = args.data_root or default_data_root()
    if args.work:
        args.work.mkdir(parents=True, exist_ok=True)
        measured, misses = regress(args.regression, data_root, args.work.resolve(), args.threads, args.train_threads,
                                   note=note, show=print)
    else:
        work = Path(tempfile.mkdtemp(prefix="lsr-regress-"))
        try:
            measured, misses = regress(args.regression, data_root, work, args.threads, args.train_threads,
                                       note=note, show=print)
        finally:
            shutil.rmtree(work, ignore_errors=True)
    sys.exit(report(measured, misses, note=note, show=print))


if __name__ == "__main__":
    run_main(main)
