"""BMP (the `[bmp]` extra): Block-Max Pruning over the shards Lucene indexes, an approximate engine.

    python -m lsr_pyserini.bmp index  --input VECTORS_DIR --index DIR [--block-size N]
    python -m lsr_pyserini.bmp search --index DIR --topics QUERIES.tsv --output RUN --hits K [--alpha A] [--beta B]

`index` reads the JsonVectorCollection shards `encode corpus` writes (the folder `lucene index`
reads) and records their manifest (the encoder); BMP keeps impacts in 8 bits, so impacts above 255
are scaled by the largest one (engines/bmp/index.py); the index is written in DIR.building/ and
renamed to DIR when complete. `search` reads the query TSV `encode queries` writes and writes a TREC
run, scores divided by that scale. Approximate even at --alpha 1 --beta 1 once an impact exceeds
255; its recall of Lucene's exact run is in docs/bmp.md.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...core.cli import QUIET_HELP, add_impact_search_arguments, progress_bar, quiet_messages, run_main
from ...core.options import float_in, positive_int
from ...commands.impact_search import search_into_run
from ...stores.vectors import vector_bytes
from .index import BmpBuild, BmpIndex, build_bmp_index, require_bmp


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.bmp", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="build a BMP index from JsonVectorCollection shards",
                                description="Build a BMP index (DIR.building/, renamed to DIR when complete).")
    index.add_argument("--input", required=True, help="folder of JsonVectorCollection shards (`encode corpus --output`)")
    index.add_argument("--index", required=True, help="index folder to write")
    index.add_argument("--overwrite", action="store_true", help="replace an existing BMP index (default: refuse)")
    index.add_argument("--block-size", type=positive_int, default=BmpBuild.block_size,
                       help=f"documents per block of the block-max bounds (default: {BmpBuild.block_size})")
    index.add_argument("--quiet", action="store_true", help=QUIET_HELP)

    search = commands.add_parser("search", help="search a BMP index with an impact query TSV",
                                 description="Search a BMP index; write a TREC run.")
    add_impact_search_arguments(search, "bmp", "BMP index folder (`bmp index --index`)")
    search.add_argument("--alpha", type=float_in(0, 1), default=1.0,
                        help="block pruning: blocks whose bound is below alpha x the k-th score are skipped "
                             "(default: 1.0, none beyond the bounds)")
    search.add_argument("--beta", type=float_in(0, 1), default=1.0,
                        help="query term pruning: the fraction of the query's weight kept (default: 1.0, all)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_messages(getattr(args, "quiet", False))
    require_bmp()
    if args.command == "index":
        # the shards are read twice: for the largest impact, then to index them
        with progress_bar(vector_bytes(Path(args.input)), args.quiet, "B", desc="finding the largest impact") as progress:
            manifest = build_bmp_index(args.input, args.index, BmpBuild(args.block_size), args.overwrite, progress)
        print(f"indexed {manifest['documents']:,} documents into {args.index} (impacts x {manifest['scale']:.4g}) "
              f"in {manifest['build_seconds']:.1f}s", file=sys.stderr)
        return
    index = BmpIndex(args.index)
    search_into_run(args, index.manifest.get("encoder"), index.documents,
                    lambda queries: index.search(queries, args.hits, args.alpha, args.beta, args.threads),
                    f", alpha {args.alpha}, beta {args.beta}")


if __name__ == "__main__":
    run_main(main)
