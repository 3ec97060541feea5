"""Train or fine-tune a model family on queries, qrels, a corpus and hard negatives.

    python -m lsr_pyserini.train FAMILY --queries Q.tsv --qrels QRELS --corpus CORPUS \\
        --negatives RUN --output DIR [--base PRESET_OR_MODEL] [--teacher SCORES] ...

FAMILY: splade (fine-tune a SPLADE checkpoint), tilde (BiQDL), tildev2 (contextualised exact
match), bgem3 (BGE-M3's dense, sparse and ColBERT heads on one body), ... Hard negatives come from a Lucene run of the training queries (BM25 by default: see
eval/regressions/*.yaml for the steps). The output folder is a transformers checkpoint
(safetensors) plus the family's head files, usable with `lsr_pyserini.encode --model DIR`.
Interrupting (Ctrl-C) saves a checkpoint; the same command resumes from it. An output folder
that holds a finished model is replaced only with --overwrite; anything else is never touched.
"""
from __future__ import annotations

import argparse
import sys

from ..core.cli import QUIET_HELP, quiet_libraries, run_main, set_threads
from ..core.declarations import UNSET
from ..core.devices import activate, add_device_args
from ..core.options import (
    int_in,
    non_negative_int,
    positive_float,
    positive_int,
    probability,
    random_seed,
    refuse_foreign,
)
from ..models.registry import schema_of
from ..models.resolve import base_settings
from . import load_families
from .data import TrainingData
from .loop import claim_training_output, seed_everything, train

TEACHER_OPTIONS = ("--teacher", "--teacher-scale")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.train", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="family", required=True)
    for family, builder in load_families().items():
        p = sub.add_parser(family, help=(builder.__doc__ or family).strip().splitlines()[0])
        p.add_argument("--queries", required=True, help="training queries, qid<TAB>text TSV")
        p.add_argument("--qrels", required=True, help="training qrels (qid 0 docid relevance)")
        p.add_argument("--corpus", required=True, help="corpus: JSONL(.gz), BEIR folder or ir_datasets id")
        p.add_argument("--negatives", required=True, help="TREC run of the training queries (e.g. BM25)")
        p.add_argument("--output", required=True, help="folder for the trained checkpoint")
        p.add_argument("--overwrite", action="store_true",
                       help="replace a model (or discard a checkpoint) this command wrote in --output "
                            "(default: resume a checkpoint, refuse a finished model)")
        p.add_argument("--base", default=builder.default_base,
                       help=f"preset name or checkpoint to start from (default: {builder.default_base})")
        teacher = builder.reads_teacher  # the other families refuse these options (main): their help hides them
        p.add_argument("--teacher", help="teacher scores for MarginMSE: 'qid docid score' lines or a TREC run "
                                         "(default: none)" if teacher else argparse.SUPPRESS)
        p.add_argument("--teacher-scale", type=positive_float,
                       help="multiply the teacher's scores by this (MarginMSE matches margins, so the teacher's "
                            "must be on the student's scale; default: 1)" if teacher else argparse.SUPPRESS)
        p.add_argument("--negatives-depth", type=positive_int, default=100,
                       help="run depth to sample negatives from (default: 100)")
        p.add_argument("--epochs", type=positive_int, default=1, help="passes over the training queries (default: 1)")
        p.add_argument("--max-steps", type=non_negative_int,
                       help="stop after this many steps; 0 saves the starting model untrained, e.g. a family's "
                            "new heads as its untrained baseline (default: all epochs)")
        p.add_argument("--batch-size", type=positive_int, default=8, help="queries per step (default: 8)")
        p.add_argument("--group-size", type=int_in(2), default=2,
                       help="documents per query: 1 positive + N-1 hard negatives, N >= 2 (default: 2)")
        p.add_argument("--lr", type=positive_float, default=2e-5, help="AdamW learning rate (default: 2e-5)")
        p.add_argument("--warmup-ratio", type=probability, default=0.1,
                       help="linear warm-up share of steps, in [0, 1] (default: 0.1)")
        p.add_argument("--seed", type=random_seed, default=42, help="random seed (default: 42)")
        p.add_argument("--save-every", type=positive_int, default=50, help="checkpoint every N steps (default: 50)")
        p.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
        p.add_argument("--quiet", action="store_true", help=QUIET_HELP)
        add_device_args(p, "training steps")
        add_family_flags(p, family, builder)
    return parser


def add_family_flags(parser: argparse.ArgumentParser, family: str, builder) -> None:
    """The family's flags, generated from its declarations: the model settings it takes (defaults:
    the base's, recorded in the trained checkpoint) and its training options."""
    group = parser.add_argument_group(f"{family} model settings (default: the base's when it is a {family} preset "
                                      f"or checkpoint, else the family's; saved with the checkpoint)")
    schema = schema_of(family)
    for name in builder.model_settings:
        setting = schema[name]
        setting.add_to(group, default=UNSET, default_text=f"the base's, else {setting.default}")
    options = parser.add_argument_group(f"{family} training options")
    for setting in builder.schema.settings:
        setting.add_to(options, default=setting.default)


def model_config(family: str, builder, args) -> dict:
    """The trained model's settings: the base's (or the family's defaults) with the model-setting
    flags given, checked against the family's declarations; set on `args` too."""
    settings = base_settings(family, args.base) if args.base else schema_of(family).defaults()
    given = {name: getattr(args, name) for name in builder.model_settings if getattr(args, name) is not None}
    settings.update(schema_of(family).checked(given, "flag"))
    for name in builder.model_settings:
        setattr(args, name, settings[name])
    return settings


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(getattr(args, "quiet", False))
    families = load_families()
    readers = [family for family, builder in families.items() if builder.reads_teacher]
    refuse_foreign([flag for flag in TEACHER_OPTIONS if getattr(args, flag[2:].replace("-", "_")) is not None],
                   dict.fromkeys(TEACHER_OPTIONS, readers), args.family, ("training family", "training families"))
    if args.teacher_scale is None:
        args.teacher_scale = 1.0
    claim_training_output(args.output, args.overwrite)  # before any data or model is loaded
    set_threads(args.threads)
    placement = activate(args.device, args.dtype)  # autocast, float32 master weights (train/loop.py)
    seed_everything(args.seed)
    data = TrainingData(args.queries, args.qrels, args.corpus, args.negatives, args.negatives_depth, args.teacher,
                        args.teacher_scale)
    config = model_config(args.family, families[args.family], args)
    args.model_config = config
    model = families[args.family](config["model"] if args.base else args.base, args)
    # settings the family decides while building the model (SparseEmbed's dim from the base's heads, BGE-M3's
    # body, bm25aug's scoring): recorded with the checkpoint's config like every other declared setting
    decided = getattr(model, "decided_settings", None)
    if decided is not None:
        config.update(schema_of(args.family).checked(decided(), "trained model"))
    settings = {k: v for k, v in vars(args).items()
                if k not in ("quiet", "save_every", "threads", "overwrite", "device", "dtype", "model_config")}
    settings.update(placement.identity())  # a checkpoint resumes in the same dtype, on any device
    summary = train(model, data, args.output, settings, epochs=args.epochs, batch_size=args.batch_size,
                    group_size=args.group_size, lr=args.lr, seed=args.seed, warmup_ratio=args.warmup_ratio,
                    max_steps=args.max_steps, save_every=args.save_every, quiet=args.quiet, overwrite=args.overwrite,
                    config=(args.family, config))
    print(f"trained {args.family} for {summary['steps']} steps in {summary['seconds']} s -> {args.output}",
          file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
