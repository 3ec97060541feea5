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
with `python -m lsr_pyserini.encode queries --encoder ssr --model SSR_MODEL`. `fit` and `index` run
their SAEs on `--device`, always in float32.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

from .. import __version__
from ..core.length_order import encode_in_length_order
from ..core.cli import QUIET_HELP, progress_bar, quiet_libraries, run_main, set_threads
from ..core.devices import activate, add_device_args
from ..core.environment import environment
from ..core.errors import InputError
from ..core.options import positive_int
from ..core.readers import Document, checked_corpus, input_identity, read_corpus
from ..core.outputs import claim_output
from ..core.writer import SHARD_FOLDER, ShardWriter, to_impacts, write_corpus_shards
from ..stores.tokens import TOKEN_STORES, TokenRows, TokenRowsWriter
from ..core.declarations import UNSET
from ..models.resolve import resolve_settings
from ..models.shared_settings import QUERY_MAX_LENGTH
from ..models.ssr.config import FIT as SAE_FIT, RETRIEVAL, SCHEMA as SSR_SETTINGS
from ..models.ssr.backbone import TokenEncoder
from ..models.ssr.codes import codes, document_terms
from ..models.ssr.sae import SSR_MODEL, SAEFit, SAERows, SSRModel, TopKSAE, check_sizes

SAE_DTYPE_HELP = ("the SAEs compute in float32 on every device, auto included: half precision would change which "
                  "latents TopK keeps and saves next to nothing on matrices this small (default: auto)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.ssr", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    embed = sub.add_parser("embed", help="backbone token embeddings of a corpus into a token store")
    embed.add_argument("--model", required=True, help="Hugging Face encoder: folder, hub id or python-package:PKG/DIR")
    embed.add_argument("--input", required=True, help="JSONL/JSONL.GZ corpus, BEIR folder or ir_datasets id")
    embed.add_argument("--output", required=True, help="token store folder to create")
    embed.add_argument("--max-length", type=positive_int,
                       help="tokens kept per document (default: the model's max_seq_length, else min(positions, 512))")
    QUERY_MAX_LENGTH.add_to(embed, default=QUERY_MAX_LENGTH.default)
    embed.add_argument("--pooling", choices=("cls", "mean"),
                       help="pooled vector for the [CLS] SAE (default: the sentence-transformers config's, else cls)")
    embed.add_argument("--no-projection", action="store_true",
                       help="ignore a ColBERT linear projection found in the checkpoint (default: apply it)")
    embed.add_argument("--batch-size", type=positive_int, default=32, help="texts per forward pass (default: 32)")
    add_device_args(embed, "backbone")
    embed.add_argument("--overwrite", action="store_true",
                       help="replace an existing token store (default: refuse, unless it has these settings: "
                            "then there is nothing to do)")
    fit = sub.add_parser("fit", help="train the token and [CLS] TopK SAEs on a token store (reconstruction)")
    fit.add_argument("--tokens", required=True, help="token store written by `ssr embed`")
    fit.add_argument("--output", required=True, help="SSR model folder to create")
    add_fit_arguments(fit)
    index = sub.add_parser("index", help="pseudo-term shards for Lucene and the code store for re-ranking")
    index.add_argument("--model", required=True, help="SSR model folder (from `ssr fit` or `train ssr`)")
    index.add_argument("--tokens", required=True, help="token store of the corpus (from `ssr embed`)")
    index.add_argument("--output", required=True, help="folder for the JsonVectorCollection shards")
    index.add_argument("--codes", required=True, help="code store folder to create (for `rerank --reranker ssr`)")
    SSR_SETTINGS["impact_scale"].add_to(index, default=UNSET, default_text="the SSR model's, else 100")
    index.add_argument("--shard-size", type=positive_int, default=10_000, help="documents per shard (default: 10000)")
    for command in (fit, index):
        add_device_args(command, "SAEs", dtypes=("auto", "float32"), dtype_help=SAE_DTYPE_HELP)
    index.add_argument("--overwrite", action="store_true",
                       help="replace existing shards and code store of this tool (default: refuse)")
    for command in (embed, fit, index):
        command.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
        command.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


def complete_store_with(path: str, settings: dict) -> bool:
    """Whether PATH is a complete token store written with exactly these settings (then `embed` resumes
    as `encode corpus` does: nothing left to do)."""
    try:
        manifest = TokenRows(path, "tokens").manifest
    except InputError:
        return False
    return all(manifest.get(key) == value for key, value in settings.items())


def embed(args) -> None:
    claim_output(args.output, TOKEN_STORES["tokens"], args.overwrite, resumable=True)  # before the model loads
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


def add_fit_arguments(parser) -> None:
    for setting in (*SAE_FIT.settings, *RETRIEVAL.settings):
        setting.add_to(parser, default=setting.default)
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing SSR model folder (default: refuse)")


def fit_sae(data: np.ndarray, latents: int, k: int, steps: int, batch_size: int, lr: float, seed: int,
            aux_k: int, aux_weight: float, dead_after: int, label: str, quiet: bool,
            device: str = "cpu") -> tuple[TopKSAE, dict]:
    """Train a TopK SAE on the rows of ``data`` (float16/32, N x d) on ``device``, in float32, with the
    training loop of every family (`train/loop.py`); returns it (on the CPU) and a summary. The
    initialisation is drawn on the CPU whatever the device, and each batch is read from ``data`` as
    float32 rows, then moved. A batch larger than the data takes every row at each step."""
    import torch

    from ..core.devices import placed
    from ..train.loop import train

    torch.manual_seed(seed)
    rows = SAERows(data, seed)
    sae = TopKSAE(data.shape[1], latents, k)
    with torch.no_grad():  # b_pre starts at the data mean (a cheap stand-in for the geometric median)
        sae.b_pre.copy_(torch.from_numpy(np.asarray(rows.sample, dtype=np.float32).mean(0)))
    fit = SAEFit(sae, aux_k, aux_weight, dead_after)
    step_rows = min(batch_size, len(data))
    started = time.time()
    with placed(device, "float32"):
        train(fit, rows, None, {}, epochs=-(-steps // (len(data) // step_rows)), batch_size=step_rows, group_size=1,
              lr=lr, seed=seed, max_steps=steps, quiet=quiet, label=f"{label} SAE")
        with torch.no_grad():
            _, final = fit.loss(torch.from_numpy(np.asarray(rows.sample[:8192], dtype=np.float32)))
    summary = {"steps": steps, "batch_size": batch_size, "lr": lr, "seed": seed, "aux_k": aux_k,
               "aux_weight": aux_weight, "dead_after": dead_after, "training_rows": int(len(data)),
               "seconds": round(time.time() - started, 2), "final_nmse": round(final["nmse"], 4),
               "dead_latents": int((fit.since_fired > dead_after).sum())}
    return sae.cpu().eval(), summary


def fit_command(args, device: str = "cpu") -> None:
    check_sizes(1, args.latents, args.k)
    check_sizes(1, args.cls_latents, args.cls_k)
    output = claim_output(args.output, SSR_MODEL, args.overwrite)
    store = TokenRows(args.tokens, "tokens")
    backbone = store.manifest["backbone"]
    common = {"lr": args.lr, "seed": args.seed, "aux_k": args.aux_k, "aux_weight": args.aux_weight,
              "dead_after": args.dead_after, "quiet": args.quiet, "device": device}
    token_sae, token_log = fit_sae(store.arrays["tokens"], args.latents, args.k, args.steps, args.batch_size,
                                   label="token", **common)
    cls_sae, cls_log = fit_sae(store.arrays["pooled"], args.cls_latents, args.cls_k, args.cls_steps,
                               args.cls_batch_size, label="[CLS]", **common)
    settings = {key: getattr(args, key) for key in RETRIEVAL.names}
    model = SSRModel(backbone, token_sae, cls_sae, settings,
                     {"token_sae": token_log, "cls_sae": cls_log, "tokens": str(Path(args.tokens).resolve()),
                      "environment": environment()})
    output.drop_scratch(".building")
    building = output.scratch(".building")
    model.save(building)
    output.replace_with(building)
    print(f"trained SAEs in {token_log['seconds'] + cls_log['seconds']:.0f}s: token h={args.latents} K={args.k} "
          f"(normalised MSE {token_log['final_nmse']}, {token_log['dead_latents']} dead), [CLS] h={args.cls_latents} "
          f"K={args.cls_k} (normalised MSE {cls_log['final_nmse']}); model in {output.path}", file=sys.stderr)


def index_command(args, device: str = "cpu") -> None:
    claim_output(args.codes, TOKEN_STORES["codes"], args.overwrite)  # before any coding
    claim_output(args.output, SHARD_FOLDER, args.overwrite, resumable=True)
    model = SSRModel.load(args.model)
    impact_scale = resolve_settings(args.model, {"impact_scale": args.impact_scale}, "flag")["impact_scale"]
    for sae in (model.token_sae, model.cls_sae):  # codes are computed on the device, read back to the CPU
        sae.to(device)
    tokens = TokenRows(args.tokens, "tokens")
    dim = int(tokens.manifest["backbone"]["dim"])
    if dim != model.token_sae.input_dim:
        raise InputError(f"SAE input size {model.token_sae.input_dim} does not match the token store {args.tokens} "
                         f"(embedding size {dim})")
    index_type = np.uint16 if max(model.token_sae.latents, model.cls_sae.latents) <= 2**16 else np.int32
    settings = {"model": str(Path(args.model).resolve()), "tokens": str(Path(args.tokens).resolve()),
                "token_sae": model.token_sae.describe(), "cls_sae": model.cls_sae.describe(),
                "backbone": model.backbone, "settings": model.settings}
    code_writer = TokenRowsWriter(args.codes, "codes", settings, overwrite=args.overwrite)
    shard_writer = ShardWriter(args.output, {"encoder": {"family": "ssr", **settings}, "impact_scale": impact_scale,
                                             "shard_size": args.shard_size, "documents": len(tokens.docids)},
                               overwrite=args.overwrite)
    progress = progress_bar(len(tokens.docids), args.quiet, "doc")
    started = time.time()

    def to_records(shard: list[Document]) -> list[dict]:
        records = []
        for doc in shard:
            row = tokens.row[doc.id]
            token_codes = codes(model.token_sae, tokens.arrays["tokens"][tokens.offsets[row]:tokens.offsets[row + 1]])
            cls_codes = codes(model.cls_sae, tokens.arrays["pooled"][row:row + 1])
            code_writer.add(doc.id, {"token_index": token_codes[0].astype(index_type),
                                     "token_value": token_codes[1].astype(np.float16)},
                            {"cls_index": cls_codes[0][0].astype(index_type),
                             "cls_value": cls_codes[1][0].astype(np.float16)})
            records.append({"id": doc.id, "contents": "",
                            "vector": to_impacts(document_terms(model, token_codes, cls_codes), impact_scale)})
            progress.update(1)
        return records

    docs = (Document(docid, "") for docid in tokens.docids)
    write_corpus_shards(docs, shard_writer, args.shard_size, to_records, progress, len(tokens.docids), args.output)
    progress.close()
    if len(code_writer.docids) != len(tokens.docids):
        raise InputError(f"{args.output}: holds shards from an earlier run; pass --overwrite to code every document")
    documents, nonzeros = shard_writer.totals()
    code_manifest = code_writer.finish({"toolkit_version": __version__})
    shard_writer.finish({"toolkit_version": __version__, "documents_written": documents,
                         "avg_nonzeros_per_document": round(nonzeros / max(documents, 1), 3),
                         "shard_count": len(shard_writer.shards), "seconds_this_run": round(time.time() - started, 2),
                         "code_store": str(Path(args.codes).resolve())})
    print(f"coded {documents} documents ({code_manifest['tokens']} tokens): {nonzeros / max(documents, 1):.1f} "
          f"pseudo-terms per document in {args.output}; codes in {args.codes}", file=sys.stderr)


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(getattr(args, "quiet", False))
    set_threads(args.threads)
    if args.command == "embed":
        activate(args.device, args.dtype)
        embed(args)
    else:  # the SAEs train and code in float32 on the device (--dtype offers auto and float32 only)
        placement = activate(args.device, "float32")
        {"fit": fit_command, "index": index_command}[args.command](args, placement.device)


if __name__ == "__main__":
    run_main(main)
