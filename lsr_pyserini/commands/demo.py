"""Offline demo: encode, index, search and evaluate the sample passages shipped with the package.

    python -m lsr_pyserini.demo [--work DIR] [--query QID]

Runs the reproduction `lsr_pyserini/sample/sample-splade-tiny.yaml` (BM25 and SPLADE-tiny) on the
bundled sample collection with no network access, prints the metrics table, then each run's top 3
hits (docid, score, first 80 characters) for one sample query, and last the metrics as JSON.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from ..core.cli import note, run_main
from ..core.errors import InputError
from ..core.readers import read_corpus, read_queries, read_run
from .regress.run import load_regression, regress, report, substitute

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample"
REGRESSION = SAMPLE_DIR / "sample-splade-tiny.yaml"
DEFAULT_QUERY = "q6"  # "medicine that lowers blood fats": no word in common with its answer
SHOWN_HITS, SHOWN_CHARACTERS = 3, 80


def top_hits(work: Path, query_id: str) -> str:
    """Each run's top hits for one sample query, as text."""
    texts = {doc.id: doc.text for doc in read_corpus(str(SAMPLE_DIR / "corpus.jsonl"))}
    queries = {query.id: query.text for query in read_queries(str(SAMPLE_DIR / "queries.test.tsv"))}
    if query_id not in queries:
        raise InputError(f"--query {query_id!r} is not a sample query (known: {', '.join(queries)})")
    spec = load_regression(str(REGRESSION))
    lines = [f"top {SHOWN_HITS} hits for {query_id}: {queries[query_id]!r}"]
    for name, path in spec["runs"].items():
        ranking = read_run(substitute(path, {"work": str(work), "data": str(SAMPLE_DIR), "threads": "1"}))
        lines.append(f"  {name}")
        for rank, (docid, score) in enumerate(ranking.get(query_id, [])[:SHOWN_HITS], start=1):
            lines.append(f"    {rank}. {docid:<8} {score:>12.4f}  {texts[docid][:SHOWN_CHARACTERS]}")
        retrieved = len(ranking.get(query_id, []))
        if not retrieved:
            lines.append("    (nothing retrieved)")
        elif retrieved < SHOWN_HITS:  # "top 3 hits" over fewer: say why
            lines.append(f"    (only {retrieved} retrieved: no other passage shares a term with the query)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--work", type=Path, help="keep the encoded files, indexes and runs in this folder "
                                                  "(default: a temporary folder, removed)")
    parser.add_argument("--query", default=DEFAULT_QUERY, help=f"sample query whose hits are shown (default: {DEFAULT_QUERY})")
    args = parser.parse_args(argv)
    work = args.work.resolve() if args.work else Path(tempfile.mkdtemp(prefix="lsr-demo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        measured, misses = regress(str(REGRESSION), SAMPLE_DIR.parent, work, threads=1, note=note, show=print)
        print()
        print(top_hits(work, args.query))
    except BaseException:
        if not args.work:  # its logs are what a failure's message points to: kept
            note(f"the demo's folder is kept for its logs: {work}")
        raise
    if not args.work:
        shutil.rmtree(work, ignore_errors=True)
    sys.exit(report(measured, misses, note=note, show=print))


if __name__ == "__main__":
    run_main(main)
