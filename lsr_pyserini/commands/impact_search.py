"""The search half every `ENGINE search` over an index of the `encode corpus` shards shares (PISA,
Seismic, BMP): the topics checked against the documents' encoder, the impact queries read, the run
claimed, searched and timed, written, and one line said."""
from __future__ import annotations

import sys
import time
from typing import Callable

from ..core.hits import Run
from ..core.outputs import TREC_RUN, claim_output
from ..core.topics import IMPACTS, check_topics
from ..core.writer import run_lines
from ..stores.vectors import read_impact_queries


def search_into_run(args, encoder: dict | None, documents: int, search: Callable[[list], Run], detail: str = "") -> None:
    """`args`: the flags of `core.cli.add_impact_search_arguments`; `search(queries) -> Run` with
    queries as [(qid, {term: impact})]; `detail` is added to the closing line."""
    check_topics(args.topics, encoder, IMPACTS, args.unrecorded_topics, index=args.index)
    queries = read_impact_queries(args.topics)
    output = claim_output(args.output, TREC_RUN, args.overwrite)
    started = time.perf_counter()
    run = search(queries)
    elapsed = time.perf_counter() - started
    output.write_lines(run_lines(run, args.tag))
    print(f"searched {documents:,} documents for {len(queries)} queries in {elapsed:.2f}s "
          f"({1000 * elapsed / max(len(queries), 1):.2f} ms/query, {args.threads} thread(s){detail}) "
          f"into {args.output}", file=sys.stderr)
