"""The one shape of search results, shared by engines, re-rankers, fusion, the API and the commands.

- `Ranking`: one query's `[(docid, score), ...]`, best first.
- `Run`: `{qid: Ranking}`, what every engine returns, what `read_run` reads and `run_lines` writes.
- `Hit`: one result as the Python API hands it out, with the first-stage score when a re-ranker
  produced `score`, and, when asked for, the terms that matched (`TermMatch`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable

import numpy as np

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


# Anserini's ScoreTiesAdjusterReranker, which every Lucene searcher of Anserini runs last
TIE_EPSILON = np.float32(1e-6)
TIE_GAP = np.float32(1e-4)


def adjust_ties(raw: Iterable[float]) -> list[float]:
    """Anserini's ScoreTiesAdjusterReranker on scores in rank order, in float32 as in Java:
    round to 4 decimals, then subtract 1e-6 x c from the c-th score that follows a tie (a score
    within 1e-4 of the adjusted one before it). Where every gap between neighbouring rounded scores
    is 0 or clearly above 1e-4 (impact scores: integers), in one pass of numpy; else one by one."""
    values = np.fromiter(raw, dtype=np.float32)
    if not len(values):
        return []
    rounded = (np.floor(values.astype(np.float64) * 10000.0 + 0.5) / 10000.0).astype(np.float32)  # Math.round
    gaps = rounded[:-1] - rounded[1:]
    if np.all((gaps == 0) | (gaps > TIE_GAP * 2 + np.float32(2e-6 * len(values)))):
        starts = np.flatnonzero(np.concatenate(([True], gaps != 0)))
        run_start = starts[np.searchsorted(starts, np.arange(len(values)), side="right") - 1]
        ties = (np.arange(len(values)) - run_start).astype(np.float32)
        return (rounded - TIE_EPSILON * ties).tolist()
    out: list[np.float32] = []
    ties = 0
    for i, score in enumerate(rounded):
        if i == 0 or (out[-1] - score) > TIE_GAP:
            ties = 0
        else:
            ties += 1
            score = np.float32(score - TIE_EPSILON * np.float32(ties))
        out.append(score)
    return [float(score) for score in out]


def sort_key(docid: str, raw: float) -> tuple:
    """Anserini's order: score descending, then the docid's UTF-8 bytes ascending."""
    return (-raw, docid.encode("utf-8"))
