"""Re-rank the candidates of a first-stage TREC run with scores from a store built at encoding time.

    python -m lsr_pyserini.rerank --reranker dense --run RUN --queries Q.tsv --store STORE --output RUN2
                                  [--model PATH_OR_ID] [--hits 1000] [--interpolate WEIGHT --fusion minmax|zscore]

The top --hits documents of each query in RUN are scored by the re-ranker (document-side data
comes from STORE only; nothing is encoded for documents at query time). Without --interpolate the
output ranks by the re-ranker's score; with it, by
WEIGHT x normalised re-ranker score + (1 - WEIGHT) x normalised first-stage score, normalised
per query (lsr_pyserini/fusion.py). Every document of RUN's top --hits must be in STORE (else
one error line and exit 2). The output is written atomically: on any error no file appears.
"""
from __future__ import annotations

import argparse
import sys
import time

from ..core.cli import run_main, set_threads
from ..core.devices import activate, add_device_args
from ..core.errors import InputError
from ..core.fusion import NORMALISATIONS
from ..core.options import positive_int, probability
from ..core.outputs import TREC_RUN, claim_output
from ..core.readers import read_queries, read_run
from ..core.writer import OUTPUT_FORMAT_HELP, OUTPUT_FORMATS, run_lines
from ..rerankers import (
    add_reranker_options,
    available_rerankers,
    build_reranker,
    candidates_of,
    check_candidates,
    rerank,
    reranker_options,
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.rerank", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reranker", required=True, help=f"re-ranker name ({', '.join(available_rerankers())})")
    parser.add_argument("--run", required=True, help="first-stage TREC run (qid Q0 docid rank score tag)")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV (or ir_datasets id) with the run's queries")
    parser.add_argument("--store", required=True, help="store written at encoding time (e.g. by `encode dense`)")
    parser.add_argument("--output", required=True, help="re-ranked TREC run to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    parser.add_argument("--model", help="query encoder checkpoint (default: the one the store records)")
    parser.add_argument("--hits", type=positive_int, default=1000,
                        help="candidates re-ranked per query (default: 1000)")
    parser.add_argument("--interpolate", type=probability, metavar="WEIGHT",
                        help="fuse: WEIGHT x re-ranker + (1 - WEIGHT) x first stage, after per-query "
                             "normalisation (default: re-ranker scores alone)")
    parser.add_argument("--fusion", choices=NORMALISATIONS, default="minmax",
                        help="per-query normalisation for --interpolate (default: minmax)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="queries per forward pass (default: 32)")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="trec", help=OUTPUT_FORMAT_HELP)
    parser.add_argument("--tag", help="run tag (default: the reranker's name, +fused with --interpolate)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    add_device_args(parser, "query encoder")
    add_reranker_options(parser)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    output = claim_output(args.output, TREC_RUN, args.overwrite)
    options = {"model": args.model, "batch_size": args.batch_size,
               **reranker_options(args.reranker, vars(args))}
    set_threads(args.threads)
    activate(args.device, args.dtype)
    run = read_run(args.run)
    if not run:
        raise InputError(f"{args.run}: run is empty")
    texts = {q.id: q.text for q in read_queries(args.queries)}
    lacking = [qid for qid in run if qid not in texts]
    if lacking:
        raise InputError(f"{args.run}: query {lacking[0]!r} has no text in {args.queries} "
                         f"({len(lacking)} of {len(run)} queries lack one)")
    first_stage = candidates_of(run, args.hits)
    reranker = build_reranker(args.reranker, args.store, options)
    check_candidates(reranker, first_stage, args.hits, args.run, args.store)
    started = time.perf_counter()
    reranked = rerank(reranker, first_stage, texts, args.interpolate, args.fusion)
    elapsed = time.perf_counter() - started
    tag = args.tag or (args.reranker if args.interpolate is None else f"{args.reranker}+fused")
    output.write_lines(run_lines(reranked, tag, args.output_format))
    candidates = sum(len(r) for r in first_stage.values())
    print(f"re-ranked {candidates} candidates of {len(first_stage)} queries with {args.reranker} in {elapsed:.1f}s "
          f"({1000 * elapsed / len(first_stage):.1f} ms per query) into {args.output}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
