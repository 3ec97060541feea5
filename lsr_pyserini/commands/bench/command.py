"""Measure engines on your own collection's prefixes: build, bytes, memory, latency, recall, nDCG.

For each engine and prefix: build seconds, bytes on disk, resident memory while searching,
single-thread latency (p50, p99) at each depth, recall of the exact top k, and (with qrels)
nDCG@10 and MRR@10, in one table.

    python -m lsr_pyserini.bench --vectors SHARDS --queries Q.tsv [--qrels QRELS] --work DIR --json OUT.json
        [--engines lucene,pisa,seismic,milvus] [--k 10,1000] [--sizes 10000,30000,100000] [--plot OUT.png]
        [--text-queries RAW.tsv [--encoder ENCODER]]   # the queries' text: bm25, pyserini, end to end

SHARDS is the folder `encode corpus` wrote, Q.tsv the impact queries `encode queries` wrote with the
same encoder. An engine is a name with options after colons: `lucene`, `pisa` (`pisa:algorithm=wand`),
`seismic` (`seismic:query_cut=10:heap_factor=1.2`; build options `n_postings`, `summary_energy`,
`centroid_fraction` and `max_fraction` build an index of their own), `milvus`, `bm25` (Lucene BM25 over the shards'
text, queried with --text-queries), `bmp` (the `[bmp]` extra: `bmp:alpha=0.9`), `pyserini` (Pyserini's own
LuceneImpactSearcher with its own SPLADE query encoder on the lucene index: the --encoder checkpoint,
queried with --text-queries), or any engine that declares how its index is built (engines/base.py: an
engine of your own, named in LSR_PYSERINI_ENGINES, too); the option `queries=N` searches only the
first N queries with that engine (for slow ones).

End to end: with --text-queries and --encoder (the encoder of the shards, e.g. splade-tiny), every
impact engine is measured twice, from the encoded queries and from the queries' text
(`Searcher(index, encoder, engine=...).search(text, k)`: the query encoded inside each timed call,
on the same one thread), beside BM25 from text (its analyzer included) and `pyserini` when listed.
Rows timed from text carry "end_to_end": true in the JSON and "[e2e]" after their name in the
table and the plot.

Sizes are prefixes of the shards in their order (default: the whole collection); each is built once
under --work (a prefix's shards are hard links of the whole shards and one cut shard), with every
index, and the measurements are kept there too: a run interrupted goes on where it stopped, a kept
measurement taken with other --k, queries (or the queries file edited) or query limit is measured again, a
--work made from other shards (or these rewritten) is refused, and --remeasure measures
everything again on indexes already built. Every build is the toolkit's own command, timed
whole (wall seconds, start-up included). Every search runs in its own process, one query at a time on
one thread, after 100 untimed queries; its resident memory is that process's (and its children's:
milvus-lite's server) after the searches. Recall is against the exact run of the first exact engine
listed (Lucene's where it is). As every benchmark here, it prints figures and asserts nothing.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ...core.cli import QUIET_HELP, quiet_messages, run_main
from ...core.errors import InputError
from ...core.options import positive_int
from ...core.topics import IMPACTS, TEXT
from .measure import (Spec, build, claim_work, growth_exponent, index_bytes, index_path, measure, measured_with,
                      parse_numbers, parse_spec, prefix, score, shard_counts, text_prefix, worker)
from .plot import plot, shown_label, table


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.bench", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vectors", required=True, help="folder of JsonVectorCollection shards (`encode corpus`)")
    parser.add_argument("--queries", required=True, help="impact query TSV (`encode queries`, the same encoder)")
    parser.add_argument("--qrels", help="TREC qrels of the queries: nDCG@10 and MRR@10 (default: none)")
    parser.add_argument("--text-queries", help="the queries' text (qid<TAB>text): for the bm25 and pyserini engines, "
                                               "and with --encoder every engine end to end")
    parser.add_argument("--encoder", help="the shards' encoder (preset or checkpoint): with --text-queries, every "
                                          "impact engine is also timed from the queries' text, encoding included, "
                                          "and pyserini loads its checkpoint (default: none)")
    parser.add_argument("--engines", default="lucene,pisa,seismic",
                        help="engines, comma-separated, each NAME[:key=value...] (default: lucene,pisa,seismic)")
    parser.add_argument("--k", default="10,1000", help="depths, comma-separated (default: 10,1000)")
    parser.add_argument("--sizes", help="collection prefixes in documents, comma-separated (default: all of it)")
    parser.add_argument("--work", required=True, help="folder for the prefixes, indexes, runs and measurements")
    parser.add_argument("--json", required=True, help="JSON file to write (every row, the CPU, the growth exponents)")
    parser.add_argument("--plot", help="PNG to write: p50 latency against size, log-log, one panel per depth")
    parser.add_argument("--max-queries", type=positive_int, help="search only the first N queries (default: all)")
    parser.add_argument("--build-timeout", type=positive_int, default=4 * 3600,
                        help="seconds a build may take; beyond, the engine is stopped at that size and the larger "
                             "ones (default: 14400)")
    parser.add_argument("--remeasure", action="store_true", help="measure again where measurements are kept")
    parser.add_argument("--unrecorded-topics", action="store_true",
                        help="measure with a --queries file that `encode queries` did not record and that reads as "
                             "query text (default: refuse it, docs/encoding.md)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP)
    return parser


# -- the command ----------------------------------------------------------------------------------------

def engine_options_of(name: str) -> list[str]:
    from ...engines import engine_options_of as options_of

    return options_of(name)


def with_encoder(specs: list[Spec], encoder: str | None) -> list[Spec]:
    """The specs to measure: each as given (an engine that encodes text itself given `encoder` as its
    checkpoint where it names none), with an encoder each impact engine then again, end to end."""
    measured = []
    for spec in specs:
        if encoder and "encoder" in engine_options_of(spec.name) and "encoder" not in spec.options:
            spec = Spec(spec.label, spec.name, {**spec.options, "encoder": encoder}, spec.queries)
        measured.append(spec)
        if encoder and spec.engine.query_kind == IMPACTS:
            measured.append(Spec(spec.label, spec.name, spec.options, spec.queries, end_to_end=True))
    return measured


def check_options(specs: list[Spec]) -> None:
    """A misspelt option is refused before any build, not found by the search after it."""
    from ...engines import check_engine

    for spec in specs:
        try:
            check_engine(spec.name, spec.search_options)
        except InputError as error:
            built = ", ".join(spec.engine.build_options)
            raise InputError(f"--engines: {spec.label}: {error}" + (f"; build options: {built}" if built else "")) \
                from None


def check_inputs(args, specs: list[Spec], sizes: list[int] | None) -> tuple[dict | None, list, list[int]]:
    """Everything refused before any work: shards (one encoder's, complete), queries (the shards'
    encoder's, as the search commands check them), sizes, bm25's text."""
    from ...core.topics import IMPACTS, TEXT, check_topics
    from ...stores.vectors import check_shards, read_impact_queries

    folder = Path(args.vectors)
    manifest = check_shards(folder)
    counts = shard_counts(folder, manifest)
    total = sum(count for _, count in counts)
    encoder = ((manifest or {}).get("settings") or {}).get("encoder")
    check_topics(args.queries, encoder, IMPACTS, args.unrecorded_topics, index=str(folder))
    read_impact_queries(args.queries)  # a line-numbered error for a file that is not impact queries
    if args.text_queries:
        check_topics(args.text_queries, None, TEXT, index=f"bm25 over {folder}")
    if args.encoder:
        from ...encoders.query import encoder_settings
        from ...engines.base import refuse_other_encoder

        if not args.text_queries:
            raise InputError("--encoder times queries from their text: give --text-queries (qid<TAB>text) too")
        refuse_other_encoder(encoder, encoder_settings(args.encoder), f"--encoder {args.encoder}: {folder}")
    if sizes is None:
        sizes = [total]
    too_large = [size for size in sizes if size > total]
    if too_large:
        raise InputError(f"--sizes: {too_large[0]:,} is larger than the collection ({total:,} documents in {folder})")
    check_options(specs)
    texts = [spec.name for spec in specs if spec.engine.query_kind == TEXT]
    if texts and not args.text_queries:
        raise InputError(f"engine {texts[0]} searches the queries' text: give --text-queries (qid<TAB>text)")
    encoding = [spec.name for spec in specs if "encoder" in engine_options_of(spec.name)]
    if encoding and not args.encoder and not any("encoder" in spec.options for spec in specs):
        raise InputError(f"engine {encoding[0]} encodes the queries' text with a checkpoint: give --encoder")
    for path in filter(None, (args.qrels, args.text_queries)):
        if not Path(path).is_file():
            raise InputError(f"{path}: no such file")
    return manifest, counts, sizes


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--_worker"]:
        worker(argv[1:])
        return
    args = build_parser().parse_args(argv)
    quiet_messages(args.quiet)
    specs = [parse_spec(text) for text in args.engines.split(",") if text.strip()]
    if not specs:
        raise InputError("--engines: name at least one engine")
    ks = parse_numbers(args.k, "k")
    sizes = parse_numbers(args.sizes, "sizes") if args.sizes else None
    manifest, counts, sizes = check_inputs(args, specs, sizes)
    specs = with_encoder(specs, args.encoder)
    from tqdm import tqdm

    from ...core.environment import cpu_kind, cpu_model, environment

    work = Path(args.work)
    folder = Path(args.vectors)
    claim_work(work, folder)
    # recall is measured against the first exact engine of impact scores listed (Lucene's run, by default),
    # searched with the encoded queries
    reference = next((spec for spec in specs if spec.exact and not spec.from_text), None)
    rows: list[dict] = []
    stopped: dict[str, str] = {}  # index key -> why it stopped at a smaller size
    tasks = [(size, spec) for size in sizes for spec in specs]
    with tqdm(tasks, disable=args.quiet, dynamic_ncols=True, unit="measurement") as progress:
        for size, spec in progress:
            progress.set_description(f"{spec.label} at {size:,}")
            row = {"engine": spec.label, "name": spec.name, "options": spec.options, "size": size, "exact": spec.exact,
                   "end_to_end": spec.from_text}
            if spec.index_key in stopped:
                rows.append({**row, "stopped": stopped[spec.index_key]})
                continue
            shards = prefix(folder, manifest, counts, size, work)
            text = text_prefix(shards, work, size) if spec.engine.builds_from_text else None
            index = index_path(work, spec, size)
            built = build(spec, shards, index, text, args.build_timeout)
            if "stopped" in built:
                stopped[spec.index_key] = f"{built['stopped']} at {size:,} documents"
                rows.append({**row, "stopped": stopped[spec.index_key]})
                continue
            runs = work / "runs" / f"{spec.run_label}-{size}"
            result = runs / "figures.json"
            queries = args.text_queries if spec.from_text else args.queries
            encoder = args.encoder if spec.end_to_end else None
            stored = json.loads(result.read_text()) if result.is_file() and not args.remeasure else {}
            if stored.get("measured_with") == measured_with(spec, queries, ks, args.max_queries, encoder):
                figures = stored
            else:
                figures = measure(spec, index, queries, ks, runs, result, args.max_queries, encoder)
            if "stopped" in figures:
                rows.append({**row, "stopped": f"{figures['stopped']} at {size:,} documents"})
                continue
            rows.append({**row, "build_seconds": built["seconds"], "bytes": index_bytes(index), **figures,
                         "runs": str(runs)})
    score(rows, ks, reference, work, args.qrels)
    exponents = {shown_label(row): {} for row in rows}
    for label in exponents:
        for k in ks:
            exponents[label][str(k)] = growth_exponent([(row["size"], row["k"][str(k)]["p50_ms"]) for row in rows
                                                        if shown_label(row) == label and "k" in row])
    output = {"cpu": cpu_model(), "cpu_kind": cpu_kind(), "environment": environment(threads=1),
              "vectors": str(folder.resolve()), "queries": args.queries, "qrels": args.qrels, "ks": ks, "sizes": sizes,
              "reference": reference.label if reference else None, "rows": rows, "growth_exponents": exponents}
    Path(args.json).write_text(json.dumps(output, indent=1) + "\n")
    print(f"CPU: {output['cpu']} ({output['cpu_kind']}); recall against {output['reference']}")
    print(table(rows, ks))
    for label, by_k in exponents.items():
        shown = ", ".join(f"k={k}: {value:.2f}" for k, value in by_k.items() if value is not None)
        if shown:
            print(f"growth exponent of p50 with size, {label}: {shown}")
    if args.plot:
        plot([row for row in rows if "k" in row], ks, args.plot, f"{output['cpu']}; {Path(args.vectors).name}")
        print(f"plot: {args.plot}")
    print(f"JSON: {args.json}")




if __name__ == "__main__":
    run_main(main)
