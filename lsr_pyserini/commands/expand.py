"""Expand a corpus with TILDE: append each passage's most likely missing terms.

    python -m lsr_pyserini.expand --model TILDE_DIR --input CORPUS --output EXPANDED.jsonl [--top-m 200] [--store DIR]

Output: JSONL `{"_id", "text"}` with the passage (title and text joined) followed by its
expansion terms, readable by every `--input` of the toolkit (encode, prepare, train). With
`--store DIR`, the same forward pass also writes the TILDE store that `rerank --reranker tilde`
(TILDE-QL) reads. Each output appears only when complete. Both outputs are checked before the
model runs: an existing one is replaced only with --overwrite, and only if it is an expanded
corpus (JSON lines) or a TILDE store.
"""
from __future__ import annotations

import argparse
import json
import sys

from ..core.cli import QUIET_HELP, progress_bar, quiet_libraries, run_main
from ..core.declarations import UNSET
from ..core.devices import activate, add_device_args
from ..core.errors import InputError
from ..core.length_order import encode_in_length_order
from ..core.options import positive_int
from ..core.outputs import JSON_LINES, claim_output
from ..core.readers import CorpusCheck, read_corpus
from ..models.tilde.config import SCHEMA as TILDE
from ..models.tilde.model import TildeModel
from ..stores.tilde import PASSAGE_TERMS, TildeStoreWriter


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.expand", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="TILDE checkpoint folder, hub id (e.g. ielab/TILDE) or preset name "
                                                          "(e.g. splade-tiny: an MLM head not trained for TILDE)")
    parser.add_argument("--input", required=True, help="corpus: JSONL(.gz), BEIR folder or ir_datasets id")
    parser.add_argument("--output", help="expanded corpus, JSONL")
    parser.add_argument("--store", help="also write the TILDE store (token likelihoods) for re-ranking here")
    parser.add_argument("--top-m", type=positive_int, default=200,
                        help="predictions considered per passage before filtering (TILDEv2 paper: 128, 150, 200; default 200)")
    TILDE["doc_max_length"].add_to(parser, "--max-length", help="passage tokens read by TILDE", default=UNSET,
                                   default_text=f"a `train tilde` checkpoint's, else {TILDE['doc_max_length'].default}")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="passages per forward pass (default: 32)")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing expanded corpus / TILDE store (default: refuse to touch them)")
    add_device_args(parser, "TILDE model")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(getattr(args, "quiet", False))
    if not args.output and not args.store:
        raise InputError("give --output (expanded corpus), --store (TILDE store) or both")
    output = claim_output(args.output, JSON_LINES, args.overwrite) if args.output else None
    store = TildeStoreWriter(args.store, args.overwrite) if args.store else None
    check = CorpusCheck(args.input).run()
    activate(args.device, args.dtype)
    tilde = TildeModel(args.model, doc_max_length=args.max_length)
    docs = list(read_corpus(args.input))
    progress = progress_bar(len(docs), args.quiet, "doc")
    outputs = encode_in_length_order(lambda texts: tilde.passage_outputs(texts, args.top_m),
                                     [d.text for d in docs], args.batch_size, progress)
    progress.close()
    expansions = [terms for terms, _ in outputs]
    if store:
        store.write([d.id for d in docs], [loglik for _, loglik in outputs],
                    [tilde.scored_terms(d.text) for d in docs],
                    {"model": args.model, "vocab_size": tilde.vocab_size,
                     "doc_max_length": tilde.max_length["documents"],
                     "passage_terms": PASSAGE_TERMS})
        print(f"wrote the TILDE store of {check.count} passages into {args.store}", file=sys.stderr)
    if output:
        output.write_lines(json.dumps({"_id": d.id, "text": " ".join([d.text, *terms]).strip()}, ensure_ascii=False)
                           + "\n" for d, terms in zip(docs, expansions))
        added = sum(map(len, expansions)) / max(len(docs), 1)
        print(f"expanded {check.count} passages into {args.output} ({added:.1f} terms added per passage)",
              file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
