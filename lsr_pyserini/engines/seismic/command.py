"""Seismic (pyseismic-lsr, the `[seismic]` extra): a second serving engine for the shards Lucene indexes.

    python -m lsr_pyserini.seismic index  --input VECTORS_DIR --index DIR [build options]
    python -m lsr_pyserini.seismic search --index DIR --topics QUERIES.tsv --output RUN --hits K [--threads N]
                                          [--query-cut N] [--heap-factor F]

`index` reads the JsonVectorCollection shards `encode corpus` writes (the folder `lucene index`
reads, integer impacts as they are); `search` reads the query TSV `encode queries` writes (what
`lucene search --impact` reads: each term repeated by its impact) and writes a TREC run.

The defaults are exact: every posting kept, block summaries at full energy, the whole query,
heap factor 1.0 give Lucene's impact scores and top k (ties by docid, as Pyserini orders them).
Faster, approximate settings (--n-postings, --summary-energy at build time; --query-cut,
--heap-factor at search time) are measured in docs/seismic.md. A vocabulary beyond Seismic's
16-bit component ids (more than 65,536 terms) uses its large-vocabulary index (32-bit ids).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from ...core.cli import QUIET_HELP, add_impact_search_arguments, progress_bar, quiet_messages, run_main
from ...core.options import float_in, int_in, positive_float, positive_int
from .index import (
    LARGE_VOCABULARY_CHOICES,
    MANIFEST,
    SeismicBuild,
    SeismicIndex,
    build_seismic_index,
    require_seismic,
)
from ...commands.impact_search import search_into_run
from ...stores.vectors import vector_bytes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.seismic", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="build a Seismic index from JsonVectorCollection shards",
                                description="Build a Seismic index (DIR.building/, renamed to DIR when complete).")
    index.add_argument("--input", required=True, help="folder of JsonVectorCollection shards (`encode corpus --output`)")
    index.add_argument("--index", required=True, help="index folder to write")
    index.add_argument("--overwrite", action="store_true", help="replace an existing Seismic index (default: refuse)")
    index.add_argument("--n-postings", type=positive_int,
                       help="static pruning: postings kept per term on average (default: keep every posting, exact)")
    index.add_argument("--max-fraction", type=float_in(1, 1000), default=1.5,
                       help="a posting list keeps at most n_postings x this (default: 1.5)")
    index.add_argument("--summary-energy", type=float_in(0.01, 1), default=1.0,
                       help="fraction of a block's weight its summary keeps; 1.0: an upper bound, exact (default: 1.0)")
    index.add_argument("--centroid-fraction", type=float_in(0.0001, 1), default=0.1,
                       help="blocks per posting list as a fraction of its length (default: 0.1)")
    index.add_argument("--min-cluster-size", type=positive_int, default=2, help="smallest block (default: 2)")
    index.add_argument("--doc-cut", type=positive_int, default=15,
                       help="largest components of a document used to cluster it into blocks (default: 15)")
    index.add_argument("--large-vocabulary", choices=LARGE_VOCABULARY_CHOICES, default="auto",
                       help="over 65,536 terms: auto uses Seismic's 32-bit index, never refuses (default: auto)")
    index.add_argument("--threads", type=int_in(0), default=0, help="build threads (default: 0, all cores)")
    index.add_argument("--quiet", action="store_true", help=QUIET_HELP)

    search = commands.add_parser("search", help="search a Seismic index with an impact query TSV",
                                 description="Search a Seismic index; write a TREC run.")
    add_impact_search_arguments(search, "seismic", "Seismic index folder (`seismic index --index`)")
    search.add_argument("--query-cut", type=positive_int,
                        help="search with only the N largest query impacts (default: the whole query, exact)")
    search.add_argument("--heap-factor", type=positive_float, default=1.0,
                        help="skip a block when its summary score is below this x the k-th score; "
                             "1.0 is exact on an exact index, above 1 prunes more (default: 1.0)")
    return parser


def seismic_documents_encoder(index: str) -> dict | None:
    """The encoder of the shards a Seismic index was built from (recorded in its manifest, else read
    from its `input` shards), read without loading the index; None when it records none."""
    import json

    from ..base import recorded_input, shards_encoder

    try:
        manifest = json.loads((Path(index) / MANIFEST).read_text(encoding="utf-8"))
        return manifest.get("encoder") or shards_encoder(recorded_input(index, manifest))
    except (OSError, ValueError, AttributeError):
        return None  # not a Seismic index: SeismicIndex says so


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_messages(getattr(args, "quiet", False))
    require_seismic()
    if args.command == "index":
        build = SeismicBuild(n_postings=args.n_postings, centroid_fraction=args.centroid_fraction,
                             min_cluster_size=args.min_cluster_size, summary_energy=args.summary_energy,
                             max_fraction=args.max_fraction, doc_cut=args.doc_cut,
                             large_vocabulary=args.large_vocabulary, threads=args.threads)
        with progress_bar(vector_bytes(Path(args.input)), args.quiet, "B", desc="reading shards") as progress:
            manifest = build_seismic_index(args.input, args.index, build, args.overwrite, progress)
        print(f"indexed {manifest['documents']:,} documents, {manifest['terms']:,} terms, "
              f"{manifest['nonzeros']:,} postings into {args.index} in {manifest['build_seconds']:.1f}s "
              f"({'exact' if manifest['exact'] else 'approximate'}"
              f"{', large vocabulary' if manifest['large_vocabulary'] else ''})", file=sys.stderr)
        return
    searcher = SeismicIndex(args.index)  # an index this version reads (else one line saying what it is not)
    search_into_run(args, seismic_documents_encoder(args.index), searcher.documents,
                    lambda queries: searcher.search(queries, args.hits, args.query_cut, args.heap_factor, args.threads))


if __name__ == "__main__":
    run_main(main)
