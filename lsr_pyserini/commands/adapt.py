"""Adapt a learned sparse model to a corpus from its text alone (no queries, no judgements).

    python -m lsr_pyserini.adapt --corpus CORPUS --output DIR [--base splade-tiny] [--seed 42]

Writes a SPLADE checkpoint folder whose impacts carry the corpus's own BM25 beside the neural
weights (`exact_match: bm25`, models/exact_match.py), its neural side trained on pseudo-queries
drawn from the corpus (titles and spans) inside that sum (train/adapt.py). The folder runs through
the impact pipeline like any checkpoint: `encode corpus|queries --encoder DIR`, `lucene index
--impact`, `lucene search --impact`, `Searcher(encoder=DIR)`; sentence-transformers opens its
neural side (`SparseEncoder(DIR)`). Nothing but the corpus's text is read. The defaults were chosen
on SciFact train (docs/adapt.md says how). Interrupting (Ctrl-C) keeps a
checkpoint; the same command resumes it and writes the same model as an uninterrupted run.
"""
from __future__ import annotations

import argparse
import sys

from ..core.cli import QUIET_HELP, quiet_libraries, run_main, set_threads
from ..core.options import int_in, non_negative_float, non_negative_int, positive_float, positive_int, random_seed
from ..models.shared_settings import LAMBDA_D, LAMBDA_Q
from ..models.splade.config import QUERY_MODE, QUERY_WEIGHTS_LR

DEFAULTS = {  # chosen on SciFact train only (docs/adapt.md)
    "base": "splade-tiny", "pseudo_queries": 4000, "steps": 0, "batch_size": 8, "group_size": 4, "lr": 2e-5,
    "exact_match_weight": 2.0, "doc_max_length": 128,
}


def build_parser() -> argparse.ArgumentParser:
    d = DEFAULTS
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.adapt", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", required=True, help="corpus: BEIR folder, JSONL(.gz) or ir_datasets id")
    parser.add_argument("--output", required=True, help="folder for the adapted checkpoint")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace a model this command wrote in --output (default: resume a checkpoint, "
                             "refuse a finished model)")
    parser.add_argument("--base", default=d["base"], help=f"SPLADE preset or checkpoint to adapt (default: {d['base']})")
    parser.add_argument("--seed", type=random_seed, default=42, help="random seed (default: 42)")
    parser.add_argument("--pseudo-queries", type=positive_int, default=d["pseudo_queries"],
                        help=f"pseudo-queries drawn from the corpus (default: {d['pseudo_queries']}; "
                             f"at most one per passage)")
    parser.add_argument("--steps", type=non_negative_int, default=d["steps"],
                        help=f"training steps; 0 keeps the base's neural weights and adds the corpus's "
                             f"statistics only (default: {d['steps']})")
    parser.add_argument("--batch-size", type=positive_int, default=d["batch_size"],
                        help=f"pseudo-queries per step (default: {d['batch_size']})")
    parser.add_argument("--group-size", type=int_in(2), default=d["group_size"],
                        help=f"passages per pseudo-query: its own + N-1 hard negatives (default: {d['group_size']})")
    parser.add_argument("--lr", type=positive_float, default=d["lr"], help=f"AdamW learning rate (default: {d['lr']})")
    parser.add_argument("--exact-match-weight", type=non_negative_float, default=d["exact_match_weight"],
                        help=f"weight of BM25 beside the model's score, in training and in the checkpoint "
                             f"(default: {d['exact_match_weight']})")
    parser.add_argument("--doc-max-length", type=positive_int, default=d["doc_max_length"],
                        help=f"passage tokens the neural side reads while training (default: "
                             f"{d['doc_max_length']}; the checkpoint keeps the base's for encoding)")
    for setting in (LAMBDA_D, LAMBDA_Q):  # the FLOPS weights SPLADE's training declares, as `train` gives them
        setting.add_to(parser, default=setting.default)
    parser.add_argument("--query-mode", choices=QUERY_MODE.choices, default="model",
                        help="model: queries run through the base's masked LM; tokenizer: inference-free queries, "
                             "each distinct token weighted by a learned table that starts from the corpus's IDF "
                             "over the tokenizer's tokens (default: model)")
    QUERY_WEIGHTS_LR.add_to(parser, default=QUERY_WEIGHTS_LR.default)
    parser.add_argument("--save-every", type=positive_int, default=50, help="checkpoint every N steps (default: 50)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(args.quiet)
    from ..train.adapt import adapt

    set_threads(args.threads)
    summary = adapt(args, say=None if args.quiet else (lambda line: print(line, file=sys.stderr)))
    print(f"adapted {args.base} to {args.corpus}: {summary['passages']} passages, {summary['pseudo_queries']} "
          f"pseudo-queries, {summary['steps']} steps in {summary['seconds']} s -> {args.output}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
