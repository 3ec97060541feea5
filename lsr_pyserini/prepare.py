"""Convert a corpus or queries to what Pyserini's BM25 tools read, with no model involved.

    python -m lsr_pyserini.prepare corpus  --input CORPUS  --output DIR    (JsonCollection shards)
    python -m lsr_pyserini.prepare queries --input QUERIES --output FILE.tsv

CORPUS and QUERIES are read exactly as `lsr_pyserini.encode` reads them (title and text joined by
one space), so a BM25 baseline sees the same text as the learned sparse encoders.
"""
from __future__ import annotations

import argparse
import sys

from .core.cli import progress_bar, run_main, warn
from .core.errors import InputError
from .core.outputs import QUERY_FILE, claim_output
from .core.readers import CorpusCheck, input_identity, read_corpus, read_queries
from .core.writer import DEFAULT_SHARD_SIZE, SHARD_FOLDER, ShardWriter, write_corpus_shards


def prepare_corpus(args) -> None:
    if args.shard_size <= 0:
        raise InputError(f"shard-size must be positive, got {args.shard_size}")
    claim_output(args.output, SHARD_FOLDER, args.overwrite, resumable=True)  # before the corpus is read
    check = CorpusCheck(args.input).run()
    if check.count == 0:
        raise InputError(f"{args.input}: corpus has no documents")
    if check.empty:
        warn(f"{check.empty} of {check.count} documents have empty text")
    settings = {"format": "JsonCollection", "shard_size": args.shard_size, "documents": check.count,
                **input_identity(args.input)}
    writer = ShardWriter(args.output, settings, overwrite=args.overwrite)
    progress = progress_bar(check.count, args.quiet, "doc")

    def to_records(shard):
        progress.update(len(shard))
        return [{"id": doc.id, "contents": doc.text} for doc in shard]

    write_corpus_shards(read_corpus(args.input), writer, args.shard_size, to_records, progress, check.count,
                        args.output)
    progress.close()
    documents, _ = writer.totals()
    writer.finish({"documents_written": documents, "empty_documents": check.empty})
    print(f"wrote {documents} documents into {args.output}", file=sys.stderr)


def prepare_queries(args) -> None:
    output = claim_output(args.output, QUERY_FILE, args.overwrite)
    queries = list(read_queries(args.input))
    if not queries:
        raise InputError(f"{args.input}: no queries")
    lines = [f"{q.id}\t{' '.join(q.text.split())}\n" for q in queries]
    output.write_lines(lines)
    print(f"wrote {len(queries)} queries into {args.output}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="side", required=True)
    corpus = sub.add_parser("corpus", help="write Pyserini JsonCollection shards")
    corpus.add_argument("--input", required=True, help="JSONL/JSONL.GZ file, BEIR folder or ir_datasets id")
    corpus.add_argument("--output", required=True, help="folder for the shards (DIR.manifest.json beside it)")
    corpus.add_argument("--shard-size", type=int, default=DEFAULT_SHARD_SIZE,
                        help=f"documents per shard (default: {DEFAULT_SHARD_SIZE})")
    corpus.add_argument("--overwrite", action="store_true",
                        help="discard existing shards of this tool (default: resume those with the same settings)")
    corpus.add_argument("--quiet", action="store_true", help="no progress bar")
    queries = sub.add_parser("queries", help="write a qid<TAB>text TSV")
    queries.add_argument("--input", required=True, help="qid<TAB>text TSV file or ir_datasets id")
    queries.add_argument("--output", required=True, help="TSV file to write")
    queries.add_argument("--overwrite", action="store_true", help="replace an existing query file (default: refuse)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    (prepare_corpus if args.side == "corpus" else prepare_queries)(args)


if __name__ == "__main__":
    run_main(main)
