"""Full dense retrieval: exact inner-product search of every document in a dense store (faiss).

    python -m lsr_pyserini.search_dense --store STORE --queries Q.tsv --output RUN [--hits 1000] [--model PATH_OR_ID]

Queries are encoded as the store's manifest says its documents were (same model, pooling,
normalisation, prefixes; or the PromptReps prompt). The TREC run is written atomically.
"""
from __future__ import annotations

import argparse
import sys
import time

from ...core.cli import run_main, set_threads
from ...core.devices import activate, add_device_args
from ...core.options import positive_int
from ...core.outputs import TREC_RUN, claim_output
from ...core.readers import InputError, read_queries
from ...core.writer import run_lines
from ...models.dense.reranker import DenseReranker


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.search_dense", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="dense store (from `encode dense` or `encode corpus --dense-store`)")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV or ir_datasets id")
    parser.add_argument("--output", required=True, help="TREC run to write")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    parser.add_argument("--hits", type=positive_int, default=1000, help="documents retrieved per query (default: 1000)")
    parser.add_argument("--model", help="query encoder checkpoint (default: the one the store records)")
    parser.add_argument("--chat-template", metavar="FILE",
                        help="promptreps: Jinja chat template for a tokenizer without one (default: the store's)")
    parser.add_argument("--batch-size", type=positive_int, default=32, help="queries per forward pass (default: 32)")
    parser.add_argument("--tag", default="dense", help="run tag (default: dense)")
    parser.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    add_device_args(parser, "query encoder")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    output = claim_output(args.output, TREC_RUN, args.overwrite)
    set_threads(args.threads)
    activate(args.device, args.dtype)
    queries = list(read_queries(args.queries))
    if not queries:
        raise InputError(f"{args.queries}: no queries")
    searcher = DenseReranker(args.store, {"model": args.model, "batch_size": args.batch_size,
                                          "chat_template": args.chat_template})
    started = time.perf_counter()
    vectors = searcher.encode_queries([q.text for q in queries])
    results = searcher.store.search(vectors, args.hits)
    elapsed = time.perf_counter() - started
    output.write_lines(run_lines({q.id: r for q, r in zip(queries, results)}, args.tag))
    print(f"searched {searcher.store.index.ntotal} documents for {len(queries)} queries in {elapsed:.1f}s "
          f"into {args.output}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
