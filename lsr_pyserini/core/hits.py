"""The one shape of search results, shared by engines, re-rankers, fusion, the API and the commands.

- `Ranking`: one query's `[(docid, score), ...]`, best first.
- `Run`: `{qid: Ranking}`, what every engine returns, what `read_run` reads and `run_lines` writes.
- `Hit`: one result as the Python API hands it out, with the first-stage score when a re-ranker
  produced `score`, and, when asked for, the terms that matched (`TermMatch`).
"""
from __future__ import annotations

from dataclasses import dataclass

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]


def run_precision(score: float) -> float:
    """A score as a TREC run file holds it (`%.6f`), so that a run searched in this process and one
    read back from its file re-rank and fuse identically."""
    return float(f"{score:.6f}")


@dataclass(frozen=True)
class TermMatch:
    """Why a document matched, one term at a time: `contribution` is this term's part of the score
    (query weight x document weight for impact engines; Lucene's own term score for BM25)."""

    term: str
    query_weight: float
    document_weight: float
    contribution: float


@dataclass(frozen=True)
class Hit:
    docid: str
    score: float
    first_stage_score: float | None = None  # set when a re-ranker produced `score`
    terms: tuple[TermMatch, ...] | None = None  # with explain=True: the matching terms, largest first
    explained: str | None = None  # what `terms` explain: "score", or "first_stage" for a re-ranked hit
