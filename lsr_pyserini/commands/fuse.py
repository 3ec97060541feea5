"""Fuse any number of TREC runs into one: min-max or z-score interpolation, or reciprocal rank fusion.

    python -m lsr_pyserini.fuse --run RUN1 --run RUN2 [--run ...] [--weight W1 --weight W2 ...]
                                [--method minmax|zscore|rrf] [--rrf-k 60] [--hits 1000] --output FUSED

Scores are normalised per query (see lsr_pyserini/fusion.py), multiplied by the run's weight and
summed; a document a run did not retrieve counts as that run's lowest normalised score. Weights
are given in the order of the runs (default: equal weights summing to 1). The fused run is
written atomically: on error no output file appears.
"""
from __future__ import annotations

import argparse
import sys

from ..core.cli import run_main, warn
from ..core.fusion import METHODS, RRF_K, common_queries, fuse
from ..core.options import finite_float, positive_float, positive_int
from ..core.outputs import TREC_RUN, claim_output
from ..core.readers import InputError, read_run
from ..core.writer import OUTPUT_FORMAT_HELP, OUTPUT_FORMATS, run_lines


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.fuse", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--run", action="append", default=[], required=True, metavar="RUN",
                        help="TREC run file (qid Q0 docid rank score tag); repeat, at least twice")
    parser.add_argument("--weight", action="append", type=finite_float, metavar="W",
                        help="weight of the run at the same position; repeat once per run "
                             "(default: 1/number of runs each)")
    parser.add_argument("--method", choices=METHODS, default="minmax",
                        help="minmax or zscore interpolation of per-query normalised scores, or rrf "
                             "(default: minmax)")
    parser.add_argument("--rrf-k", type=positive_float, default=RRF_K,
                        help=f"k of RRF, 1/(k + rank) (default: {RRF_K})")
    parser.add_argument("--hits", type=positive_int, default=1000, help="documents kept per query (default: 1000)")
    parser.add_argument("--output", required=True, help="fused TREC run to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="trec", help=OUTPUT_FORMAT_HELP)
    parser.add_argument("--tag", default=None, help="run tag in the last column (default: fused-METHOD)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if len(args.run) < 2:
        raise InputError("give at least two --run files to fuse")
    if args.weight is not None and len(args.weight) != len(args.run):
        raise InputError(f"{len(args.weight)} --weight for {len(args.run)} --run: give one weight per run, in order")
    output = claim_output(args.output, TREC_RUN, args.overwrite)
    runs = []
    for path in args.run:
        run = read_run(path)
        if not run:
            raise InputError(f"{path}: run is empty")
        runs.append(run)
    queries, partial = common_queries(runs, args.run)
    if partial:
        warn(f"{partial} of {len(queries)} queries are missing from some runs; "
             f"they are fused from the runs that have them")
    fused = fuse(runs, args.weight, method=args.method, rrf_k=args.rrf_k, depth=args.hits, names=args.run)
    output.write_lines(run_lines(fused, args.tag or f"fused-{args.method}", args.output_format))
    print(f"fused {len(args.run)} runs ({args.method}) into {args.output}: {len(fused)} queries", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
