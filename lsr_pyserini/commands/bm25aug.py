"""WordPiece BM25 indexes and learned augmented BM25 queries (arXiv 2305.14087).

    python -m lsr_pyserini.bm25aug index   --model MODEL --input CORPUS --index INDEX [--scoring bm25|bow]
    python -m lsr_pyserini.bm25aug queries --model MODEL --index INDEX --input QUERIES --output FILE.tsv

`index` writes the corpus as space-joined WordPiece tokens of MODEL's tokenizer (INDEX.docs/,
JsonCollection shards, resumable), indexes them with `pyserini.index.lucene --pretokenized`
(whitespace analysis: no stemming, no stop words) and records the tokenizer in
INDEX/lsr_tokenizer.json. With `--scoring bow` (the "no BM25" ablation) every present token gets
impact 1 in an impact index instead.

`queries` refuses an index built with another tokenizer, runs the model on each query and writes
`qid<TAB>tokens`, each token repeated round(boost x --boost-scale) times, boost = w(q)*(bow(q)+a(q)).
Pyserini's bag-of-words query generator turns n repetitions of a term into one clause with boost
n, and Lucene's BM25 score of a clause is linear in its boost, so

    python -m pyserini.search.lucene --index INDEX --topics FILE.tsv --bm25 --pretokenized ...

scores exactly the model's formula (times --boost-scale, up to rounding). For a `--scoring bow`
index search with `--impact --pretokenized` instead. `--no-augmentation --no-weighting` with any
checkpoint of the same tokenizer gives plain WordPiece BM25 queries.
"""
from __future__ import annotations

import argparse
import subprocess
import sys

from ..core.cli import QUIET_HELP, fail, progress_bar, quiet_libraries, run_main, set_threads, warn
from ..core.devices import activate, add_device_args
from ..core.errors import InputError
from ..core.hf import load_tokenizer
from ..core.options import positive_float, positive_int
from ..core.outputs import LUCENE_INDEX, QUERY_FILE, claim_output
from ..core.presets import model_path
from ..core.readers import checked_corpus, input_identity, read_corpus, read_queries
from ..kernels.wordpiece_bm25 import DEFAULT_B, DEFAULT_K1, pretokenize, write_tokenizer_record
from ..core.writer import SHARD_FOLDER, ShardWriter, write_corpus_shards
from ..models.bm25aug.model import LUCENE_MAX_CLAUSES, AugmentedQueries


def build_index(args) -> None:
    index = claim_output(args.index, LUCENE_INDEX, args.overwrite)
    docs_dir = index.path.with_name(index.path.name + ".docs")
    claim_output(docs_dir, SHARD_FOLDER, args.overwrite, resumable=True)
    path = model_path(args.model)
    tokenizer = load_tokenizer(path)
    check = checked_corpus(args.input)
    settings = {"format": "JsonVectorCollection" if args.scoring == "bow" else "JsonCollection",
                "tokenizer": path, "scoring": args.scoring, "shard_size": args.shard_size, **input_identity(args.input)}
    writer = ShardWriter(str(docs_dir), settings, overwrite=args.overwrite)
    progress = progress_bar(check.count, args.quiet, "doc")

    def to_records(shard):
        tokens = pretokenize(tokenizer, [doc.text for doc in shard])
        progress.update(len(shard))
        if args.scoring == "bow":
            return [{"id": doc.id, "contents": "", "vector": {t: 1 for t in toks}} for doc, toks in zip(shard, tokens)]
        return [{"id": doc.id, "contents": " ".join(toks)} for doc, toks in zip(shard, tokens)]

    write_corpus_shards(read_corpus(args.input), writer, args.shard_size, to_records, progress, check.count,
                        str(docs_dir))
    progress.close()
    writer.finish({"documents_written": writer.totals()[0]})
    collection = "JsonVectorCollection" if args.scoring == "bow" else "JsonCollection"
    index.drop_scratch(".building")  # what a killed run left
    building = index.path.with_name(index.path.name + ".building")  # the Lucene wrapper builds it, then we rename
    command = [sys.executable, "-m", "lsr_pyserini.lucene", "index", "--collection", collection,
               "--input", str(docs_dir), "--index", str(building), "--generator", "DefaultLuceneDocumentGenerator",
               "--pretokenized", "--threads", str(args.threads)]
    if args.scoring == "bow":
        command.append("--impact")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0 or not building.is_dir():
        tail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no output"]
        fail(f"Lucene indexing of {docs_dir} failed: {tail[0]}")
    write_tokenizer_record(building, tokenizer, args.model, args.scoring)
    index.replace_with(building)
    print(f"indexed {check.count} documents as WordPiece tokens of {args.model} into {index.path} "
          f"({args.scoring})", file=sys.stderr)


def generate_queries(args) -> None:
    output = claim_output(args.output, QUERY_FILE, args.overwrite)
    set_threads(args.threads)
    queries = list(read_queries(args.input))
    if not queries:
        raise InputError(f"{args.input}: no queries")
    augmented = AugmentedQueries(args.model, args.index, args.boost_scale, args.max_boost, args.max_terms,
                                 augment=False if args.no_augmentation else None,
                                 weighting=False if args.no_weighting else None, batch_size=args.batch_size)
    pairs = [(q.id, q.text) for q in queries]
    augmented.check_searchable(pairs, args.input)
    progress = progress_bar(len(queries), args.quiet, "query")
    lines, trimmed = augmented.lines(pairs, progress)
    progress.close()
    if trimmed:
        warn(f"{trimmed} queries had more than {args.max_terms} terms; their lowest boosts were left out")
    output.write_lines(lines)
    tokenizer = augmented.model.tokenizer
    bow_terms = [set(tokenizer.tokenize(q.text)) for q in queries]
    added = [len([t for t in line.split("\t", 1)[1].split() if t not in own]) for line, own in zip(lines, bow_terms)]
    distinct_added = [len({t for t in line.split("\t", 1)[1].split()} - own) for line, own in zip(lines, bow_terms)]
    print(f"wrote {len(lines)} queries into {args.output}; augmented tokens per query: "
          f"{sum(distinct_added) / len(lines):.1f} distinct ({sum(added) / len(lines):.1f} with repeats)",
          file=sys.stderr)
    if augmented.bm25 != (DEFAULT_K1, DEFAULT_B):
        k1, b = augmented.bm25
        warn(f"{args.model} was trained with BM25 k1={k1}, b={b}: search with --bm25 --k1 {k1} --b {b}")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.bm25aug", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    index = sub.add_parser("index", help="build a WordPiece BM25 index that records its tokenizer")
    index.add_argument("--model", default="splade-tiny",
                       help="preset, checkpoint folder or python-package: reference whose tokenizer splits the "
                            "documents (default: splade-tiny; all-MiniLM-L6-v2 has the same vocabulary)")
    index.add_argument("--input", required=True, help="corpus: JSONL(.gz), BEIR folder or ir_datasets id")
    index.add_argument("--index", required=True, help="Lucene index folder to create (INDEX.docs/ holds the tokens)")
    index.add_argument("--scoring", choices=("bm25", "bow"), default="bm25",
                       help="bm25 (default) or bow: binary impacts, the 'no BM25' ablation")
    index.add_argument("--shard-size", type=positive_int, default=10_000, help="documents per shard (default: 10000)")
    index.add_argument("--threads", type=positive_int, default=1, help="Lucene indexing threads (default: 1)")
    index.add_argument("--overwrite", action="store_true",
                       help="replace an existing index and token shards of this tool (default: refuse the index, "
                            "resume the shards)")
    index.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    queries = sub.add_parser("queries", help="generate augmented, re-weighted BM25 queries")
    queries.add_argument("--model", required=True,
                         help="a `train bm25aug` output folder (or, with --no-augmentation --no-weighting, any "
                              "checkpoint or preset: plain WordPiece BM25 queries)")
    queries.add_argument("--index", required=True, help="the WordPiece index the queries will run on (tokenizer checked)")
    queries.add_argument("--input", required=True, help="queries: qid<TAB>text TSV or ir_datasets id")
    queries.add_argument("--output", required=True, help="query TSV for pyserini.search.lucene --bm25 --pretokenized")
    queries.add_argument("--overwrite", action="store_true", help="replace an existing query file (default: refuse)")
    queries.add_argument("--boost-scale", type=positive_float,
                         help="integer boost = round(weight x scale); weights under 0.5/scale are dropped (default: "
                              "the checkpoint's query_impact_scale, else its impact_scale, else 100)")
    queries.add_argument("--max-boost", type=positive_int, default=10_000,
                         help="refuse a term boost above this (the TSV repeats a term boost times; default: 10000)")
    queries.add_argument("--max-terms", type=positive_int, default=LUCENE_MAX_CLAUSES,
                         help=f"keep at most this many distinct terms per query, the largest boosts "
                              f"(Lucene's clause limit; default: {LUCENE_MAX_CLAUSES})")
    queries.add_argument("--no-augmentation", action="store_true", help="ablation: a(q) = 0 (re-weighting only)")
    queries.add_argument("--no-weighting", action="store_true", help="ablation: w(q) = 1 (augmentation only)")
    queries.add_argument("--batch-size", type=positive_int,
                         help="queries per forward pass (default: the checkpoint's batch_size, else 32)")
    queries.add_argument("--threads", type=positive_int, help="torch CPU threads (default: all cores)")
    add_device_args(queries, "query model")
    queries.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(getattr(args, "quiet", False))
    if args.command == "index":
        build_index(args)
    else:
        activate(args.device, args.dtype)  # `index` runs no model: tokenizer only
        generate_queries(args)


if __name__ == "__main__":
    run_main(main)
