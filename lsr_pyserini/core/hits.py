"""The one shape of search results, shared by engines, re-rankers, fusion, the API and the commands.

- `Ranking`: one query's `[(docid, score), ...]`, best first.
- `Run`: `{qid: Ranking}`, what every engine returns, what `read_run` reads and `run_lines` writes.
- `Hit`: one result as the Python API hands it out, with the first-stage score when a re-ranker
  produced `score`, and, when asked for, the terms that matched (`TermMatch`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

Ranking = list[tuple[str, float]]
Run = dict[str, Ranking]


def run_precision(score: float) -> float:
    """A score as a TREC run file holds it (`%.6f`), so that a run searched in this process and one
    read back from its file re-rank and fuse identically."""
    return float(f"{score:.6f}")


def top_k_with_ties(fetch: Callable[[int], Ranking], k: int, most: int, first: Ranking | None = None) -> Ranking:
    """The top k of an engine that returns a given number of hits in any order among ties (Seismic,
    Milvus), ordered as Pyserini orders Lucene's: score descending, ties by docid; only scores > 0.
    `fetch(depth)` returns the engine's top `depth`; `most` is the deepest it goes (its documents,
    or its largest limit); `first` is `fetch(min(k + 1, most))` when the caller has it already.
    When the k-th score ties with the last one fetched, a tied document may lie beyond: the depth
    doubles until the tie ends inside it."""
    depth = min(k + 1, most)
    hits = first if first is not None else fetch(depth)
    while True:
        ranking = sorted((hit for hit in hits if hit[1] > 0), key=lambda hit: (-hit[1], hit[0]))
        if len(ranking) <= k or depth >= most or ranking[k - 1][1] != ranking[-1][1]:
            return ranking[:k]
        depth = min(depth * 2, most)
        hits = fetch(depth)


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
