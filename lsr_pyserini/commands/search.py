"""Search any engine with a topics file and write a TREC run: one command over the engines layer.

    python -m lsr_pyserini.search --index PATH[,PATH...] --topics QUERIES.tsv --output RUN [--hits K]
        [--engine lucene|bm25|sharded|seismic|pisa|bmp|dense|milvus] [--encoder NAME | --encoded] [--threads N]
        [--output-format trec|msmarco]

As Pyserini's search: `--output-format msmarco` writes `qid<TAB>docid<TAB>rank` lines instead of
TREC's (so do `rerank` and `fuse`), and `--topics` may name one of Pyserini's topic sets
(`msmarco-passage-dev-subset`, `beir-v1.0.0-scifact-test`, ...) instead of a file: Pyserini's
`get_topics` reads it, from its cache or downloaded once (offline with no cached copy: one line).

The topics are raw query texts (`qid<TAB>text`), encoded on the fly with `--encoder` (impact
engines) or by the dense store's own encoder (`dense`), searched as they are by `bm25`; or, with
`--encoded`, the TSV `encode queries` (or `bm25aug queries`) wrote: each term repeated by its
integer impact (boost). `--engine` defaults to the index's own kind: several comma-separated
indexes are `sharded`, a Seismic index `seismic`, a PISA index `pisa`, a BMP index `bmp`, a dense
store `dense`, a milvus-lite database or a server's address (`http://host:19530`) `milvus` (with
`--engine-option collection=NAME`), a Lucene index `lucene` (impact) or `bm25`: the first engine that
recognises it (engines/base.py), an engine of your own (LSR_PYSERINI_ENGINES) included.

The run lists the queries in the topics file's order (Pyserini's own command sorts numeric query
ids; SciFact's files are in that order already), each with its top --hits; its lines equal those of
`lucene search --impact` / `lucene search --bm25` / `seismic search` / `pisa search` / `bmp search` /
`search_dense` / `milvus search` on the same inputs. The tag defaults to what those commands write
(Anserini, seismic, pisa, bmp, dense, milvus).
"""
from __future__ import annotations

import argparse
import sys
import time

from ..core.cli import QUIET_HELP, progress_bar, quiet_libraries, run_main
from ..core.devices import add_device_args
from ..core.errors import InputError
from ..core.hits import Run
from ..core.options import engine_option, non_negative_float, positive_int
from ..core.outputs import TREC_RUN, claim_output
from ..core.writer import OUTPUT_FORMAT_HELP, OUTPUT_FORMATS, run_lines
from ..core.topics import IMPACTS, TEXT, check_topics
from ..engines import VECTOR, available_engines



def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.search", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--index", required=True,
                        help="index folder (Lucene, Seismic, PISA, BMP, dense store or milvus-lite database), a Milvus server's "
                             "address (http://host:19530), or several Lucene impact indexes "
                             "separated by commas (sharded)")
    parser.add_argument("--engine", choices=available_engines(), help="engine (default: chosen from the index)")
    parser.add_argument("--topics", required=True, help="qid<TAB>text TSV (with --encoded: the TSV of `encode queries`), or a Pyserini "
                             "topics name (e.g. msmarco-passage-dev-subset)")
    parser.add_argument("--output", required=True, help="run to write (atomically): TREC, or MS MARCO with --output-format msmarco")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    parser.add_argument("--hits", type=positive_int, default=1000, help="documents per query (default: 1000)")
    queries = parser.add_mutually_exclusive_group()
    queries.add_argument("--encoder", help="sparse preset or checkpoint that encodes the query texts "
                                           "(impact engines; a bm25aug checkpoint for bm25)")
    queries.add_argument("--encoded", action="store_true",
                         help="the topics are already encoded: terms repeated by their impact (or boost)")
    parser.add_argument("--threads", type=positive_int, default=1,
                        help="queries searched in parallel (the engine's threads: Anserini's, Seismic's, PISA's, BMP's; default: 1)")
    parser.add_argument("--batch-size", type=positive_int, default=64,
                        help="queries encoded and searched per step (default: 64; dense encodes all at once)")
    parser.add_argument("--k1", type=non_negative_float, help="bm25: k1 (default: 0.9, or a bm25aug model's)")
    parser.add_argument("--b", type=non_negative_float, help="bm25: b (default: 0.4, or a bm25aug model's)")
    parser.add_argument("--engine-option", type=engine_option, action="append", default=[], metavar="KEY=VALUE",
                        help="an engine's own option, e.g. query_cut=10 or heap_factor=1.2 (seismic), min_idf=0 "
                             "(lucene, sharded); repeatable")
    parser.add_argument("--output-format", choices=OUTPUT_FORMATS, default="trec", help=OUTPUT_FORMAT_HELP)
    parser.add_argument("--tag", help="run tag (default: Anserini; seismic and dense for those engines)")
    parser.add_argument("--unrecorded-topics", action="store_true",
                        help="with --encoded: search a topics file that `encode queries` did not record and that "
                             "reads as query text (default: refuse it, docs/encoding.md)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    add_device_args(parser, "query encoder")
    return parser


def read_topics(args) -> tuple[list[str], list]:
    """(qids, texts or encoded {term: count} queries) in the file's order."""
    if args.encoded:
        from ..stores.vectors import read_impact_queries

        pairs = read_impact_queries(args.topics)
        return [qid for qid, _ in pairs], [impacts for _, impacts in pairs]
    from ..core.readers import read_queries

    loaded = list(read_queries(args.topics))
    if not loaded:
        raise InputError(f"{args.topics}: no queries")
    return [query.id for query in loaded], [query.text for query in loaded]


def open_search(args):
    """(the engine, a function (qids, queries, k) -> Run) for the arguments, through the API's
    `Searcher`; bad input refused in one line before any model is loaded."""
    from ..api import Searcher

    options = dict(args.engine_option)
    if args.k1 is not None or args.b is not None:
        options.update({k: v for k, v in (("k1", args.k1), ("b", args.b)) if v is not None})
    searcher = Searcher(args.index, encoder=args.encoder, engine=args.engine, engine_options=options,
                        device=args.device, dtype=args.dtype, encoded=args.encoded)

    def search(qids, queries, k) -> Run:
        if args.encoded:
            hits = searcher.search_encoded([""] * len(qids), qids, queries, k=k, threads=args.threads)
        else:
            hits = searcher.batch_search(queries, qids, k=k, threads=args.threads)
        return {qid: [(hit.docid, hit.score) for hit in hits[qid]] for qid in qids}

    return searcher.engine, search


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(args.quiet)
    qids, queries = read_topics(args)
    if args.encoded:  # no model to load: the engine first, so that its documents' encoder is known
        engine, search = open_search(args)
        if engine.query_kind == IMPACTS:
            check_topics(args.topics, engine.document_side(), IMPACTS, args.unrecorded_topics, index=args.index)
        output = claim_output(args.output, TREC_RUN, args.overwrite)
    else:  # the output claimed before the query encoder loads
        check_topics(args.topics, None, TEXT, index=args.index)
        output = claim_output(args.output, TREC_RUN, args.overwrite)
        engine, search = open_search(args)
    name = engine.name
    tag = args.tag or engine.run_tag
    step = len(qids) if engine.query_kind == VECTOR else args.batch_size  # dense: length-ordered batches of the whole file
    run: Run = {}
    started = time.perf_counter()
    with progress_bar(len(qids), args.quiet, "query", desc=f"searching ({name})") as progress:
        for start in range(0, len(qids), step):
            run.update(search(qids[start:start + step], queries[start:start + step], args.hits))
            progress.update(len(qids[start:start + step]))
    elapsed = time.perf_counter() - started
    output.write_lines(run_lines(run, tag, args.output_format))
    print(f"searched {len(qids)} queries with engine {name} in {elapsed:.2f}s "
          f"({1000 * elapsed / len(qids):.2f} ms/query, {args.threads} thread(s)) into {args.output}", file=sys.stderr)


if __name__ == "__main__":
    run_main(main)
