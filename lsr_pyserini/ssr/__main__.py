"""SSR (single-stage sparse retrieval with sparse-autoencoder neurons as pseudo-terms) on Lucene.

    python -m lsr_pyserini.ssr embed --model BACKBONE --input CORPUS --output TOKENS
    python -m lsr_pyserini.ssr fit   --tokens TOKENS --output SSR_MODEL [--latents 4096 --k 32 ...]
    python -m lsr_pyserini.ssr index --model SSR_MODEL --tokens TOKENS --output VECTORS --codes CODES

`embed` runs the backbone once over the corpus and keeps each document's float16 token embeddings
and pooled vector (a token store: the dense MaxSim baseline's store and the SAEs' training data).
`fit` trains the token SAE and the [CLS] SAE on that store (reconstruction, unsupervised); a model
fine-tuned with `python -m lsr_pyserini.train ssr` is used the same way. `index` applies the SAEs
to the stored embeddings and writes, in one pass, JsonVectorCollection shards of pseudo-terms for
Lucene (the shared writer) and the code store `rerank --reranker ssr` reads. Queries are encoded
with `python -m lsr_pyserini.encode queries --encoder ssr --model SSR_MODEL`.
"""
from __future__ import annotations

import argparse
import sys
import time

from .. import __version__
from ..cli import run_main
from ..data import InputError


def build_parser() -> argparse.ArgumentParser:
    from .sae import add_fit_arguments

    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.ssr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    embed = sub.add_parser("embed", help="backbone token embeddings of a corpus into a token store")
    embed.add_argument("--model", required=True, help="Hugging Face encoder: folder, hub id or python-package:PKG/DIR")
    embed.add_argument("--input", required=True, help="JSONL/JSONL.GZ corpus, BEIR folder or ir_datasets id")
    embed.add_argument("--output", required=True, help="token store folder to create")
    embed.add_argument("--max-length", type=int,
                       help="tokens kept per document (default: the model's max_seq_length, else min(positions, 512))")
    embed.add_argument("--query-max-length", type=int, default=64, help="tokens kept per query (default: 64)")
    embed.add_argument("--pooling", choices=("cls", "mean"),
                       help="pooled vector for the [CLS] SAE (default: the sentence-transformers config's, else cls)")
    embed.add_argument("--no-projection", action="store_true",
                       help="ignore a ColBERT linear projection found in the checkpoint (default: apply it)")
    embed.add_argument("--batch-size", type=int, default=32, help="texts per forward pass (default: 32)")
    embed.add_argument("--overwrite", action="store_true", help="replace an existing store")
    fit = sub.add_parser("fit", help="train the token and [CLS] TopK SAEs on a token store (reconstruction)")
    fit.add_argument("--tokens", required=True, help="token store written by `ssr embed`")
    fit.add_argument("--output", required=True, help="SSR model folder to create")
    add_fit_arguments(fit)
    index = sub.add_parser("index", help="pseudo-term shards for Lucene and the code store for re-ranking")
    index.add_argument("--model", required=True, help="SSR model folder (from `ssr fit` or `train ssr`)")
    index.add_argument("--tokens", required=True, help="token store of the corpus (from `ssr embed`)")
    index.add_argument("--output", required=True, help="folder for the JsonVectorCollection shards")
    index.add_argument("--codes", required=True, help="code store folder to create (for `rerank --reranker ssr`)")
    index.add_argument("--impact-scale", type=float,
                       help="integer impact = round(activation x scale) (default: the model's, 100)")
    index.add_argument("--shard-size", type=int, default=10_000, help="documents per shard (default: 10000)")
    index.add_argument("--overwrite", action="store_true", help="replace existing shards and code store")
    for command in (embed, fit, index):
        command.add_argument("--threads", type=int, help="torch CPU threads (default: all cores)")
        command.add_argument("--quiet", action="store_true", help="no progress bar")
    return parser


def complete_store_with(path: str, settings: dict) -> bool:
    """Whether PATH is a complete token store written with exactly these settings (then `embed` resumes
    as `encode corpus` does: nothing left to do)."""
    from .store import TokenRows

    try:
        manifest = TokenRows(path, "tokens").manifest
    except InputError:
        return False
    return all(manifest.get(key) == value for key, value in settings.items())


def embed(args) -> None:
    from ..encode import checked_corpus, encode_in_length_order, input_identity, progress_bar
    from ..data import read_corpus
    from .backbone import TokenEncoder
    from .sae import require_positive
    from .store import TokenRowsWriter

    require_positive(args, ("batch_size", "max_length", "query_max_length"))
    encoder = TokenEncoder(args.model, max_length=args.max_length, query_max_length=args.query_max_length,
                           pooling=args.pooling, projection=not args.no_projection)
    check = checked_corpus(args.input)
    settings = {"backbone": encoder.describe(), **input_identity(args.input)}
    if not args.overwrite and complete_store_with(args.output, settings):
        print(f"{args.output}: complete token store with these settings already there: nothing to do", file=sys.stderr)
        return
    writer = TokenRowsWriter(args.output, "tokens", settings, overwrite=args.overwrite)
    started = time.time()
    progress = progress_bar(check.count, args.quiet, "doc")
    docs = list(read_corpus(args.input))
    pairs = encode_in_length_order(lambda texts: encoder.encode(texts, "documents"), [d.text for d in docs],
                                   args.batch_size, progress)
    progress.close()
    for doc, (pooled, tokens) in zip(docs, pairs):
        writer.add(doc.id, {"tokens": tokens.astype("float16")}, {"pooled": pooled.astype("float16")})
    manifest = writer.finish({"toolkit_version": __version__, "seconds": round(time.time() - started, 2)})
    print(f"embedded {manifest['documents']} documents ({manifest['tokens']} tokens, {encoder.dim} dimensions) "
          f"into {args.output}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    if args.threads:
        import torch

        torch.set_num_threads(args.threads)
    if args.command == "embed":
        embed(args)
    elif args.command == "fit":
        from .sae import fit_command

        fit_command(args)
    else:
        from .index import index_command

        index_command(args)


if __name__ == "__main__":
    run_main(main)
