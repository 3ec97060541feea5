"""PISA (the `[pisa]` extra): an exact engine with dynamic pruning for the shards Lucene indexes.

PISA's library ships inside pyterrier-pisa's wheel.

    python -m lsr_pyserini.pisa index  --input VECTORS_DIR --index DIR [--encoding E] [--block-size N]
    python -m lsr_pyserini.pisa search --index DIR --topics QUERIES.tsv --output RUN --hits K
                                       [--threads N] [--algorithm A]

`index` reads the JsonVectorCollection shards `encode corpus` writes (the folder `lucene index`
reads, integer impacts as they are) and records their manifest (the encoder); it is resumable (the
shards read before an interruption are kept in DIR.partial/) and atomic (DIR appears complete).
`search` reads the query TSV `encode queries` writes (each term repeated by its impact, what
`lucene search --impact` reads) and writes a TREC run.

The default, MaxScore, is exact: Lucene's impact scores and its order, ties by docid, at every
rank. block_max_maxscore, wand, block_max_wand and ranked_or are exact too (other speeds);
ranked_and and block_max_ranked_and keep only documents with every query term. Measured against
the other engines in docs/benchmarks.md ("Engines at scale").
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...core.cli import QUIET_HELP, add_impact_search_arguments, progress_bar, quiet_messages, run_main
from ...core.options import positive_int
from .index import ALGORITHMS, DEFAULT_ALGORITHM, ENCODINGS, PisaBuild, PisaIndex, build_pisa_index, \
    require_pisa
from ...commands.impact_search import search_into_run
from ...stores.vectors import vector_bytes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.pisa", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="build a PISA index from JsonVectorCollection shards",
                                description="Build a PISA index (parts in DIR.partial/, resumable; files in "
                                            "DIR.building/, renamed to DIR when complete).")
    index.add_argument("--input", required=True, help="folder of JsonVectorCollection shards (`encode corpus --output`)")
    index.add_argument("--index", required=True, help="index folder to write")
    index.add_argument("--overwrite", action="store_true", help="replace an existing PISA index (default: refuse)")
    index.add_argument("--encoding", choices=ENCODINGS, default="block_simdbp",
                       help="PISA's posting-list compression (default: block_simdbp)")
    index.add_argument("--block-size", type=positive_int, default=64,
                       help="postings per block of the block-max score bounds (default: 64)")
    index.add_argument("--quiet", action="store_true", help=QUIET_HELP)

    search = commands.add_parser("search", help="search a PISA index with an impact query TSV",
                                 description="Search a PISA index; write a TREC run.")
    add_impact_search_arguments(search, "pisa", "PISA index folder (`pisa index --index`)")
    search.add_argument("--algorithm", choices=ALGORITHMS, default=DEFAULT_ALGORITHM,
                        help=f"PISA's query algorithm (default: {DEFAULT_ALGORITHM}, exact)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_messages(getattr(args, "quiet", False))
    require_pisa()
    if args.command == "index":
        with progress_bar(vector_bytes(Path(args.input)), args.quiet, "B", desc="reading shards") as progress:
            manifest = build_pisa_index(args.input, args.index, PisaBuild(args.encoding, args.block_size),
                                        args.overwrite, progress)
        print(f"indexed {manifest['documents']:,} documents, {manifest['terms']:,} terms, "
              f"{manifest['nonzeros']:,} postings into {args.index} in {manifest['build_seconds']:.1f}s",
              file=sys.stderr)
        return
    searcher = PisaIndex(args.index, args.algorithm)  # an index this version reads, before its encoder is trusted
    search_into_run(args, searcher.manifest.get("encoder"), searcher.documents,
                    lambda queries: searcher.search(queries, args.hits, args.threads), f", {args.algorithm}")


if __name__ == "__main__":
    run_main(main)
