"""Effectiveness of TREC runs (through trec_eval) and efficiency of impact indexes.

    python -m lsr_pyserini.evaluate --qrels QRELS --run RUN [--run [NAME=]RUN ...] [--csv F] [--json F]
    python -m lsr_pyserini.evaluate --index DIR [--queries QUERIES.tsv] [--json F]
    python -m lsr_pyserini.evaluate [--index DIR] --store STORE [--queries QUERIES.tsv] [--json F]

Effectiveness: nDCG@10, MRR@10, R@100 and R@1000 computed by the trec_eval that ships in
Pyserini's Anserini jar (the numbers `pyserini.eval.trec_eval -c` prints), one row per run, with a
two-sided paired t-test of every run against the first one (per-query values over all judged
queries, a query missing from a run counting 0, as `-c` does).

Efficiency: index size on disk, documents, unique terms, average non-zero terms per document
(sum of document frequencies / documents) and, given the generated query file, per query, and the
expected FLOPS per query-document pair as SPLADE defines it: sum over terms of p_q(t) * p_d(t),
with p_d(t) = df(t) / documents and p_q(t) the fraction of queries that contain t. For a store
(`--store`, any kind: dense, SparseEmbed, token or code, TILDE): its size on disk, its documents
(lines of its docids.txt) and bytes per document; for a SparseEmbed store with --queries also
SparseEmbed's TERMS and FLOPS. `regress` checks these figures (the JSON keys) in a file's
`efficiency` section.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
from pathlib import Path

from ..core.cli import fail, run_main
from ..core.evaluation import (
    METRICS,
    SIGNIFICANCE_LEVEL,
    effectiveness,
    expected_overlap,
    format_table,
    index_statistics,
    marked_significant,
    parse_run_args,
    query_frequencies,
)
from ..core.outputs import CSV_TABLE, JSON_TABLE, claim_output


def store_statistics(store_dir: str, queries_path: str | None) -> dict:
    """Any store: its size on disk and bytes per document. A SparseEmbed store with the generated
    queries also: TERMS, the expected terms a query and a document share (over the store's activated
    document terms), and FLOPS = TERMS x H' (multiply-adds per pair)."""
    from ..stores.base import store_size
    from ..stores.sparseembed import META_FILE, SparseEmbedStore

    size, documents = store_size(store_dir)
    stats = {"store": store_dir, "store_size_bytes": size, "store_documents": documents,
             "store_bytes_per_document": round(size / max(documents, 1), 1)}
    if queries_path and (Path(store_dir) / META_FILE).is_file():
        store = SparseEmbedStore(store_dir)
        queries, query_df = query_frequencies(queries_path)
        terms = expected_overlap(query_df, queries, store.document_frequencies(), len(store.docids))
        stats.update({"dim": store.dim, "terms": round(terms, 4), "sparseembed_flops": round(terms * store.dim, 4),
                      "avg_terms_per_document": round(len(store.terms) / max(len(store.docids), 1), 2)})
    return stats


def claim_tables(args) -> tuple:
    """Claim the --csv and --json outputs (None where not asked for) before anything is computed."""
    return (claim_output(args.csv, CSV_TABLE, args.overwrite) if args.csv else None,
            claim_output(args.json, JSON_TABLE, args.overwrite) if args.json else None)


def write_outputs(rows: list[dict], csv_output, json_output) -> None:
    if csv_output:
        table = io.StringIO(newline="")
        writer = csv.DictWriter(table, fieldnames=list(dict.fromkeys(k for row in rows for k in row)))
        writer.writeheader()
        writer.writerows(rows)
        csv_output.write_lines([table.getvalue()])
    if json_output:
        json_output.write_lines([json.dumps(rows, indent=2) + "\n"])


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.evaluate", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--qrels", help="TREC qrels file (qid 0 docid relevance)")
    parser.add_argument("--run", action="append", default=[], metavar="[NAME=]RUN",
                        help="TREC run file; repeat for several (the first is the significance baseline)")
    parser.add_argument("--index", help="Lucene index folder: report efficiency figures instead")
    parser.add_argument("--queries", help="the generated query TSV: per-query figures and FLOPS of --index, "
                                          "TERMS and FLOPS of a SparseEmbed --store")
    parser.add_argument("--store", help="a store folder (dense, SparseEmbed, token or code, TILDE): its size "
                                        "and bytes per document; see --queries")
    parser.add_argument("--csv", help="also write the table as CSV")
    parser.add_argument("--json", help="also write the table as JSON")
    parser.add_argument("--overwrite", action="store_true",
                        help="replace an existing --csv / --json table (default: refuse)")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    tables = claim_tables(args)
    if args.index or args.store:
        stats = index_statistics(args.index, args.queries) if args.index else {}
        stats.update(store_statistics(args.store, args.queries) if args.store else {})
        width = max(map(len, stats))
        for key, value in stats.items():
            print(f"{key.ljust(width)}  {value}")
        write_outputs([stats], *tables)
        return
    if not args.qrels or not args.run:
        fail("give --qrels and at least one --run (or --index DIR for efficiency figures)")
    rows = effectiveness(args.qrels, parse_run_args(args.run))
    marked = any(marked_significant(row, key) for row in rows for key, _ in METRICS)
    footnote = (f"* p < {SIGNIFICANCE_LEVEL} (two-sided paired t-test against {rows[0]['run']})"
                if marked else "")
    print(format_table(rows, [("run", "run")] + METRICS, footnote))
    write_outputs(rows, *tables)


if __name__ == "__main__":
    run_main(main)
