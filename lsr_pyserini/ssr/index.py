"""`ssr index`: code a token store with an SSR model into Lucene shards and a code store, one pass."""
from __future__ import annotations

import sys
import time
from pathlib import Path

import numpy as np

from .. import __version__
from ..data import Document, InputError
from ..writer import ShardWriter, quantize, write_corpus_shards
from .codes import codes, document_terms
from .sae import SSRModel
from .store import TokenRows, TokenRowsWriter

DEFAULT_IMPACT_SCALE = 100


def index_command(args) -> None:
    from ..encode import progress_bar

    if args.shard_size <= 0:
        raise InputError(f"--shard-size must be positive, got {args.shard_size}")
    impact_scale = args.impact_scale or DEFAULT_IMPACT_SCALE
    if impact_scale <= 0:
        raise InputError(f"--impact-scale must be positive, got {impact_scale}")
    model = SSRModel.load(args.model)
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
                            "vector": quantize(document_terms(model, token_codes, cls_codes), impact_scale)})
            progress.update(1)
        return records

    docs = (Document(docid, "") for docid in tokens.docids)
    write_corpus_shards(docs, shard_writer, args.shard_size, to_records, progress)
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
