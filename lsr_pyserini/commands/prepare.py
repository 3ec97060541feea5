"""Convert a corpus or queries to what Pyserini's BM25 tools read, with no model involved.

    python -m lsr_pyserini.prepare corpus  --input CORPUS  --output DIR    (JsonCollection shards)
    python -m lsr_pyserini.prepare queries --input QUERIES --output FILE.tsv [--sample N --seed S]
    python -m lsr_pyserini.prepare subset  --input CORPUS  --queries Q.tsv --qrels QRELS --documents N --output FILE.jsonl

`subset` makes a smaller collection for quick experiments and CI: every document judged for the
given queries, filled up to N documents with others drawn at random (seeded), in corpus order.

CORPUS and QUERIES are read exactly as `lsr_pyserini.encode` reads them (title and text joined by
one space), so a BM25 baseline sees the same text as the learned sparse encoders; a titled
document's record keeps its title alone too (`title`), which the search service shows apart.
"""
from __future__ import annotations

import argparse
import json
import random
import sys

from ..core.cli import QUIET_HELP, progress_bar, quiet_messages, run_main, warn
from ..core.errors import InputError
from ..core.options import positive_int, random_seed
from ..core.outputs import JSON_LINES, QUERY_FILE, claim_output
from ..core.readers import CorpusCheck, input_identity, read_corpus, read_qrels, read_queries
from ..core.writer import DEFAULT_SHARD_SIZE, SHARD_FOLDER, ShardWriter, write_corpus_shards


def prepare_corpus(args) -> None:
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
        return [doc.record() for doc in shard]

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
    if args.sample is not None:
        chosen = set(random.Random(args.seed).sample(range(len(queries)), min(args.sample, len(queries))))
        queries = [q for i, q in enumerate(queries) if i in chosen]
    lines = [f"{q.id}\t{' '.join(q.text.split())}\n" for q in queries]
    output.write_lines(lines)
    print(f"wrote {len(queries)} queries into {args.output}", file=sys.stderr)


def prepare_subset(args) -> None:
    output = claim_output(args.output, JSON_LINES, args.overwrite)
    query_ids = {q.id for source in args.queries for q in read_queries(source)}
    if not query_ids:
        raise InputError("--queries: no queries")
    judged = {docid for source in args.qrels for qid, docs in read_qrels(source).items()
              if qid in query_ids for docid in docs}
    ids = [doc.id for doc in read_corpus(args.input)]
    missing = judged - set(ids)
    if missing:
        warn(f"{len(missing)} judged documents are not in {args.input}")
    judged &= set(ids)
    if args.documents < len(judged):
        raise InputError(f"--documents {args.documents} is fewer than the {len(judged)} documents judged "
                         f"for these queries")
    others = [docid for docid in ids if docid not in judged]
    kept = judged | set(random.Random(args.seed).sample(others, min(args.documents - len(judged), len(others))))
    lines = (json.dumps({"_id": doc.id, "text": doc.text}, ensure_ascii=False) + "\n"
             for doc in read_corpus(args.input) if doc.id in kept)
    output.write_lines(lines)
    print(f"wrote {len(kept)} documents ({len(judged)} judged for {len(query_ids)} queries) into {args.output}",
          file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.prepare", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="side", required=True)
    corpus = sub.add_parser("corpus", help="write Pyserini JsonCollection shards")
    corpus.add_argument("--input", required=True, help="JSONL/JSONL.GZ file, BEIR folder or ir_datasets id")
    corpus.add_argument("--output", required=True, help="folder for the shards (DIR.manifest.json beside it)")
    corpus.add_argument("--shard-size", type=positive_int, default=DEFAULT_SHARD_SIZE,
                        help=f"documents per shard (default: {DEFAULT_SHARD_SIZE})")
    corpus.add_argument("--overwrite", action="store_true",
                        help="discard existing shards of this tool (default: resume those with the same settings)")
    corpus.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    queries = sub.add_parser("queries", help="write a qid<TAB>text TSV")
    queries.add_argument("--input", required=True, help="qid<TAB>text TSV file or ir_datasets id")
    queries.add_argument("--output", required=True, help="TSV file to write")
    queries.add_argument("--overwrite", action="store_true", help="replace an existing query file (default: refuse)")
    queries.add_argument("--sample", type=positive_int, default=None,
                         help="keep this many queries drawn at random, in file order (default: all)")
    queries.add_argument("--seed", type=random_seed, default=0, help="seed of --sample (default: 0)")
    subset = sub.add_parser("subset", help="write a smaller corpus: judged documents plus random others")
    subset.add_argument("--input", required=True, help="JSONL/JSONL.GZ file, BEIR folder or ir_datasets id")
    subset.add_argument("--queries", required=True, action="append",
                        help="TSV queries whose judged documents are kept (repeatable)")
    subset.add_argument("--qrels", required=True, action="append", help="TREC qrels (repeatable)")
    subset.add_argument("--documents", type=positive_int, required=True,
                        help="documents in the subset, judged ones included")
    subset.add_argument("--seed", type=random_seed, default=0, help="seed of the random fill (default: 0)")
    subset.add_argument("--output", required=True,
                        help="JSONL file to write ({_id, text}: the text as every encoder reads it)")
    subset.add_argument("--overwrite", action="store_true", help="replace an existing JSONL file (default: refuse)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_messages(getattr(args, "quiet", False))
    {"corpus": prepare_corpus, "queries": prepare_queries, "subset": prepare_subset}[args.side](args)


if __name__ == "__main__":
    run_main(main)
