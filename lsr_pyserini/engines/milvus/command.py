"""Milvus (pymilvus + milvus-lite, the `[milvus]` extra): the distributed engine for the shards Lucene indexes.

    python -m lsr_pyserini.milvus index  --input VECTORS_DIR --uri URI --collection NAME
                                         [--dense-store DIR] [--overwrite] [--token-file F]
    python -m lsr_pyserini.milvus search --uri URI --collection NAME --topics QUERIES.tsv --output RUN
                                         [--hits K] [--drop-ratio-search R]
                                         [--hybrid TEXTS.tsv [--depth D] [--rrf-k K]]

URI: a milvus-lite database on this machine (a path, e.g. indexes/scifact.milvus.db) or a Milvus
server or cluster (http://host:19530; --token-file for a secured one). `index` loads the
JsonVectorCollection shards `encode corpus` writes (integer impacts as they are), and with
--dense-store a dense store's vectors into a second field of the same entities, in batches keyed
by docid: an interrupted load resumes where it stopped, and other input is refused (--overwrite
replaces the collection). `search` reads the query TSV `encode queries` writes (what `lucene search
--impact` reads) and writes a TREC run; exact by default (Lucene's impact scores and top k, ties by
docid). With --hybrid TEXTS.tsv (the query texts, encoded by the dense store's encoder) it runs
Milvus's hybrid_search: the sparse and the dense field's top --depth fused by reciprocal rank
fusion inside Milvus. Also `search --engine milvus` and `Searcher(engine="milvus")`; see docs/milvus.md.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ...core.cli import QUIET_HELP, progress_bar, quiet_messages, run_main
from ...core.errors import InputError
from ...core.indexes import is_remote
from ...core.options import float_in, non_negative_float, positive_int
from ...core.outputs import TREC_RUN, claim_output
from ...core.topics import IMPACTS, check_topics
from ...core.writer import run_lines
from .collection import ALGORITHMS, BATCH_DOCUMENTS, MilvusCollection, load_collection, require_milvus
from ...stores.vectors import read_impact_queries


def add_connection(parser) -> None:
    parser.add_argument("--uri", required=True,
                        help="a milvus-lite database path (e.g. indexes/scifact.milvus.db) or a server's "
                             "address (http://host:19530)")
    parser.add_argument("--collection", required=True, help="collection name (letters, digits, '_')")
    parser.add_argument("--token-file",
                        help="file holding a secured cluster's token (user:password or an API key; "
                             "default: none)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.milvus", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="load JsonVectorCollection shards into a Milvus collection",
                                description="Load shards (and a dense store) into a Milvus collection; resumable.")
    index.add_argument("--input", required=True, help="folder of JsonVectorCollection shards (`encode corpus --output`)")
    add_connection(index)
    index.add_argument("--dense-store",
                       help="a dense store of the same documents (`encode dense --output`): its vectors go into "
                            "the entities' dense field (default: sparse only)")
    index.add_argument("--overwrite", action="store_true",
                       help="drop the collection first when it exists (default: resume the same input, refuse other)")
    index.add_argument("--index-algorithm", choices=ALGORITHMS,
                       help="the sparse inverted index's query algorithm (default: the server's, DAAT_MAXSCORE on "
                            "Milvus 2.5+; milvus-lite has TAAT_NAIVE only)")
    index.add_argument("--shards", type=positive_int,
                       help="the collection's shards on a cluster (Milvus's num_shards; default: the server's, 1; "
                            "milvus-lite keeps one)")
    index.add_argument("--batch", type=positive_int, default=BATCH_DOCUMENTS,
                       help=f"documents per upsert, each flushed before its progress is recorded "
                            f"(default: {BATCH_DOCUMENTS})")
    index.add_argument("--quiet", action="store_true", help=QUIET_HELP)

    search = commands.add_parser("search", help="search a collection with an impact query TSV",
                                 description="Search a Milvus collection; write a TREC run.")
    add_connection(search)
    search.add_argument("--topics", required=True, help="query TSV from `encode queries` (terms repeated by impact)")
    search.add_argument("--output", required=True, help="TREC run to write")
    search.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    search.add_argument("--hits", type=positive_int, default=1000, help="documents per query (default: 1000)")
    search.add_argument("--drop-ratio-search", type=float_in(0, 0.99), default=0.0,
                        help="Milvus drops this fraction of the smallest query weights; 0 is exact (default: 0)")
    search.add_argument("--min-idf", type=non_negative_float, default=0.0,
                        help="query terms with idf <= this are left out, as Pyserini's LuceneImpactSearcher "
                             "does (default: 0)")
    search.add_argument("--hybrid", metavar="TEXTS",
                        help="query texts (qid<TAB>text, the same qids): also search the dense field with them, "
                             "encoded by the collection's dense store's encoder, fused with RRF inside Milvus")
    search.add_argument("--depth", type=positive_int, default=1000,
                        help="with --hybrid: each field's top N that are fused (default: 1000)")
    search.add_argument("--rrf-k", type=non_negative_float, default=60.0,
                        help="with --hybrid: RRF's k, sum of 1 / (k + rank) (default: 60)")
    search.add_argument("--dense-store",
                        help="with --hybrid: the dense store whose encoder encodes the texts (default: the one "
                             "the collection was loaded with)")
    search.add_argument("--tag", default="milvus", help="run tag (default: milvus)")
    search.add_argument("--unrecorded-topics", action="store_true",
                        help="search a topics file that `encode queries` did not record and that reads as query "
                             "text (default: refuse it, docs/encoding.md)")
    return parser


def read_token(path: str | None) -> str | None:
    if path is None:
        return None
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such token file")
    token = file.read_text(encoding="utf-8").strip()
    if not token:
        raise InputError(f"{path}: empty token file")
    return token


def hybrid_queries(collection: MilvusCollection, queries, texts_path: str, dense_store: str | None) -> list:
    """(qid, impacts, dense vector) of each impact query, its text encoded by the dense store's encoder."""
    from ...core.readers import read_queries
    from ...encoders.query import DenseQueries

    store = dense_store or collection.manifest.get("dense_store_path")
    if not store or not Path(store).is_dir():
        raise InputError(f"--hybrid: the dense store that encodes the query texts ({store}) is not here: "
                         f"give --dense-store")
    texts = {query.id: query.text for query in read_queries(texts_path)}
    missing = [qid for qid, _ in queries if qid not in texts]
    if missing:
        raise InputError(f"{texts_path}: no text for query {missing[0]!r} ({len(missing)} of {len(queries)} missing)")
    vectors = DenseQueries(store).queries([qid for qid, _ in queries], [texts[qid] for qid, _ in queries])
    return [(qid, impacts, vector) for (qid, impacts), vector in zip(queries, vectors)]


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_messages(getattr(args, "quiet", False))
    require_milvus()
    token = read_token(args.token_file)
    if args.command == "index":
        if not is_remote(args.uri) and (args.shards not in (None, 1) or args.index_algorithm not in (None, "TAAT_NAIVE")):
            given = f"--shards {args.shards}" if args.shards not in (None, 1) else f"--index-algorithm {args.index_algorithm}"
            raise InputError(f"{given}: a milvus-lite database ({args.uri}) keeps one shard and TAAT_NAIVE only, and "
                             f"would ignore it: give a Milvus server's URI (http://host:19530)")
        with progress_bar(0, args.quiet, "B") as progress:
            manifest = load_collection(args.input, args.uri, args.collection, args.dense_store, args.overwrite,
                                       token, args.batch, progress, args.index_algorithm, args.shards)
        dense = f", dense field of {manifest['dense_dim']} dimensions" if manifest.get("dense_dim") else ""
        left_out = "" if dense else f" ({manifest['empty_documents']:,} without impacts left out)"
        print(f"loaded {manifest['entities']:,} documents{left_out}, {manifest['terms']:,} terms{dense} into "
              f"collection {args.collection!r} at {args.uri}"
              + (f" in {manifest['load_seconds']:.1f}s" if "load_seconds" in manifest else ""), file=sys.stderr)
        return
    collection = MilvusCollection(args.uri, args.collection, token, args.min_idf, args.drop_ratio_search)
    try:
        check_topics(args.topics, collection.manifest.get("encoder") or None, IMPACTS, args.unrecorded_topics,
                     index=f"{args.uri} (collection {args.collection!r})")
        output = claim_output(args.output, TREC_RUN, args.overwrite)
        queries = read_impact_queries(args.topics)
        started = time.perf_counter()
        if args.hybrid:
            prepared = hybrid_queries(collection, queries, args.hybrid, args.dense_store)
            started = time.perf_counter()
            run = collection.hybrid(prepared, args.hits, args.depth, args.rrf_k)
        else:
            run = collection.search(queries, args.hits)
        elapsed = time.perf_counter() - started
    finally:
        collection.close()
    output.write_lines(run_lines(run, args.tag))
    print(f"searched {collection.documents:,} documents for {len(queries)} queries in {elapsed:.2f}s "
          f"({1000 * elapsed / len(queries):.2f} ms/query{', hybrid' if args.hybrid else ''}) into {args.output}",
          file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
