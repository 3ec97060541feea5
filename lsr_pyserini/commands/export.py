"""Save a model in the sentence-transformers layout, which `SparseEncoder(DIR)` or `SentenceTransformer(DIR)` opens.

The folder (SPLADE, inference-free SPLADE: `SparseEncoder`; dense: `SentenceTransformer`) gives the
vectors this toolkit gives, and `--encoder DIR` (`encode dense --model DIR`) here still reads it.

    python -m lsr_pyserini.export splade --encoder PRESET_OR_CHECKPOINT [--model DIR] --output DIR
    python -m lsr_pyserini.export dense --model PATH_OR_HUB_ID [--pooling-mode cls|mean] [--normalize] --output DIR

`train splade` already saves its checkpoints in this layout; `export` is for presets (e.g.
splade-tiny, an inference-free preset) and checkpoints saved before it did. The folder holds the
transformers weights and tokenizer, the sentence-transformers modules (models/st_layout.py), the
family marker `lsr_family.json` with every setting (impact scale included) and `lsr_export.json`
(what was exported, with which library versions). docs/training.md says how to publish one.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..core.cli import QUIET_HELP, quiet_libraries, run_main
from ..core.environment import environment
from ..core.errors import InputError
from ..core.hf import write_config
from ..core.outputs import claim_output, json_file_kind
from ..core.records import add_former_flags
from ..models.dense.config import SCHEMA as DENSE

EXPORT_RECORD = "lsr_export.json"
EXPORTED = json_file_kind("a folder exported by this tool (lsr_export.json)", EXPORT_RECORD,
                          lambda record: isinstance(record, dict) and "exported" in record)
DENSE_SKIPPED = ("model", "quantize", "batch_size")  # the model is --model; int8 and batching are not saved


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.export", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="kind", required=True)
    splade = sub.add_parser("splade", help="a SPLADE preset or checkpoint, for sentence-transformers' SparseEncoder")
    splade.add_argument("--encoder", required=True,
                        help="splade preset name, .yaml preset or checkpoint folder (its settings are saved)")
    splade.add_argument("--model", help="another location of the preset's model (default: the preset's)")
    dense = sub.add_parser("dense", help="a dense transformer encoder, for sentence-transformers' SentenceTransformer")
    dense.add_argument("--model", required=True, help="checkpoint folder, hub id or python-package:PKG/DIR")
    for setting in DENSE.settings:  # generated from the dense family's declarations
        if setting.name not in DENSE_SKIPPED:
            setting.add_to(dense, default=setting.default)
    add_former_flags(dense, "dense")  # --pooling of before: --pooling-mode
    for command in (splade, dense):
        command.add_argument("--output", required=True, help="folder to write (OUTPUT.partial/ while writing)")
        command.add_argument("--overwrite", action="store_true",
                             help="replace a folder this command exported (default: refuse)")
        command.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


def export_splade(encoder: str, model: str | None, folder) -> dict:
    """Write `encoder` (a splade preset or checkpoint) to `folder`; returns its settings."""
    from pathlib import Path

    from ..core.presets import resolve_model
    from ..models.resolve import resolve_settings
    from ..models.splade.encoder import read_query_weights
    from ..models.splade.model import SpladeModel

    settings = resolve_settings(encoder, {"model": model})
    if settings["family"] != "splade":
        raise InputError(f"--encoder {encoder} is a {settings['family']!r} model: export splade takes a splade "
                         f"preset or checkpoint")
    path = resolve_model(settings["model"])
    config = {k: v for k, v in settings.items() if k not in ("family", "name")}
    table = read_query_weights(path, config["query_weights"]) if config["query_mode"] == "tokenizer" else None
    if table is not None and Path(config["query_weights"]).is_absolute():
        config["query_weights"] = Path(config["query_weights"]).name  # copied into the folder
    SpladeModel(path, config).eval().save(folder, table)
    write_config(folder, "splade", config)
    return config


def export_dense(settings: dict, folder) -> dict:
    """Write the dense encoder `settings` describe to `folder`; returns the settings it encodes with."""
    from ..models.dense.encoder import TransformerDenseEncoder
    from ..models.st_layout import write_dense

    encoder = TransformerDenseEncoder(**settings)
    encoder.model.save_pretrained(folder)
    max_length = encoder.tokenizer.model_max_length
    encoder.tokenizer.model_max_length = encoder.max_length
    try:
        encoder.tokenizer.save_pretrained(folder)
    finally:
        encoder.tokenizer.model_max_length = max_length
    write_dense(folder, dim=encoder.dim, pooling_mode=encoder.pooling_mode, normalize=encoder.normalize,
                max_length=encoder.max_length, query_prefix=encoder.prefixes["queries"],
                doc_prefix=encoder.prefixes["documents"])
    return encoder.describe()


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(args.quiet)
    claim = claim_output(args.output, EXPORTED, args.overwrite)  # before any model is loaded
    claim.drop_scratch(".partial")  # an interrupted export starts again
    partial = claim.scratch(".partial")
    try:
        if args.kind == "splade":
            settings = export_splade(args.encoder, args.model, partial)
            source = args.encoder
        else:
            given = {s.name: getattr(args, s.name) for s in DENSE.settings if s.name not in DENSE_SKIPPED}
            settings = export_dense({"model": args.model, **given}, partial)
            source = args.model
        (partial / EXPORT_RECORD).write_text(json.dumps(
            {"exported": args.kind, "from": source, "settings": settings, "environment": environment()},
            indent=2, default=str) + "\n")
    except BaseException:  # a refused or interrupted export leaves nothing behind
        claim.drop_scratch(".partial")
        claim.release()
        raise
    claim.replace_with(partial)
    claim.release()
    print(f"exported {args.kind} {source} -> {claim.path} (sentence-transformers layout)", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
