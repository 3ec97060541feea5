"""Score fusion of ranked lists: per-query normalisation, weighted interpolation and RRF.

A run is ``{qid: [(docid, score), ...]}``, the shape :func:`lsr_pyserini.core.readers.read_run` returns.
Used by ``python -m lsr_pyserini.fuse`` (any number of TREC runs) and by
``python -m lsr_pyserini.rerank --interpolate`` (first-stage scores with re-ranker scores).

- ``minmax``: each query's scores mapped to [0, 1] ((s - min) / (max - min); all equal -> 1).
- ``zscore``: each query's scores mapped to (s - mean) / std (all equal -> 0).
- ``rrf``: reciprocal rank fusion, sum of weight / (k + rank), rank counted from 1 (Cormack et
  al., 2009; k = 60 by default).

Interpolation (``minmax``/``zscore``) sums weight x normalised score over the runs. A document
that a run did not retrieve for a query gets that run's lowest normalised score for the query
(0 for min-max), i.e. it is treated as ranked at the bottom of that run, never above a
retrieved one. A query that some runs lack is fused from the runs that have it.

What the fused run does not depend on (``tests/core/test_properties.py`` checks each):

- the order of the runs, their weights given in the same order: the weighted values are summed
  exactly rounded (``math.fsum``), so the fused scores are equal to the bit;
- for ``minmax`` and ``zscore``, a shift and a positive scaling of one run's scores for a query
  (s -> a x s + b, a > 0): the normalised values are the same up to rounding, and to the bit
  where the transformed scores are exact (e.g. integer scores, integer shifts, power-of-two
  scales);
- for ``rrf``, any strictly increasing map of one run's scores: only each run's order counts
  (documents with equal scores keep the run's order).

Normalised values are finite for finite scores (constant scores, one document and scores near the
float limits included: minmax in [0, 1], zscore within +-sqrt(documents), rrf at most 1 / (k + 1)),
so fused scores are finite for finite weights short of overflowing; ties are broken by docid, so
the output is deterministic.
"""
from __future__ import annotations

import math
from typing import Sequence

from .errors import InputError
from .hits import Run

NORMALISATIONS = ("minmax", "zscore")
METHODS = NORMALISATIONS + ("rrf",)
RRF_K = 60


def _unit_scaled(scores: list[float]) -> list[float]:
    """``scores`` divided by the power of two that brings the largest magnitude into [0.5, 1).

    Dividing by a power of two is exact (but for scores 2^1000 times smaller than the largest),
    so normalised values are unchanged, while differences, sums and squares of the scaled scores
    can no longer overflow (scores near 1e308) or underflow (all scores near 1e-308)."""
    exponent = math.frexp(max(abs(score) for score in scores))[1]
    return [math.ldexp(score, -exponent) for score in scores]


def normalise(ranking: list[tuple[str, float]], method: str) -> dict[str, float]:
    """One query's scores, normalised per ``method`` (``minmax`` or ``zscore``)."""
    if method not in NORMALISATIONS:
        raise InputError(f"unknown normalisation {method!r} (known: {', '.join(NORMALISATIONS)})")
    if not ranking:
        return {}
    scores = _unit_scaled([score for _, score in ranking])
    low, high = min(scores), max(scores)
    if low == high:  # constant scores: checked here, as a computed std need not come out 0
        return {doc: 1.0 if method == "minmax" else 0.0 for doc, _ in ranking}
    # offsets from the minimum do not change when the scores are shifted (where the subtraction is
    # exact), and mean and std of offsets suffer no cancellation from a large common part
    offsets = [score - low for score in scores]
    if method == "minmax":
        return {doc: offset / (high - low) for (doc, _), offset in zip(ranking, offsets)}
    mean = math.fsum(offsets) / len(offsets)
    std = math.sqrt(math.fsum((offset - mean) ** 2 for offset in offsets) / len(offsets))
    return {doc: (offset - mean) / std for (doc, _), offset in zip(ranking, offsets)}


def sort_ranking(scores: dict[str, float], depth: int | None = None) -> list[tuple[str, float]]:
    """Highest score first, ties broken by docid so that output is deterministic."""
    ranking = sorted(scores.items(), key=lambda item: (-item[1], item[0]))
    return ranking[:depth] if depth else ranking


def common_queries(runs: Sequence[Run], names: Sequence[str]) -> tuple[list[str], int]:
    """Queries of all runs in first-seen order, and how many are missing from at least one run.

    Raises InputError when no query is shared by all runs (nothing could be fused)."""
    shared = set(runs[0])
    for run in runs[1:]:
        shared &= set(run)
    if not shared:
        sizes = ", ".join(f"{name} ({len(run)} queries)" for name, run in zip(names, runs))
        raise InputError(f"the runs have no query in common: {sizes}")
    ordered = list(dict.fromkeys(qid for run in runs for qid in run))
    return ordered, len(ordered) - len(shared)


def fuse(runs: Sequence[Run], weights: Sequence[float] | None = None, method: str = "minmax",
         rrf_k: float = RRF_K, depth: int | None = 1000, names: Sequence[str] | None = None) -> Run:
    """Fuse ``runs`` per query; the result keeps the ``depth`` best documents of each query."""
    if method not in METHODS:
        raise InputError(f"unknown fusion method {method!r} (known: {', '.join(METHODS)})")
    if not runs:
        raise InputError("nothing to fuse: no runs given")
    weights = list(weights) if weights is not None else [1.0 / len(runs)] * len(runs)
    if len(weights) != len(runs):
        raise InputError(f"{len(weights)} weights for {len(runs)} runs: give one weight per run")
    if not all(math.isfinite(weight) for weight in weights):
        raise InputError(f"weights must be finite numbers, got {', '.join(map(str, weights))}")
    if method == "rrf" and not 0 <= rrf_k < math.inf:
        raise InputError(f"rrf k must be a finite number >= 0, got {rrf_k}")
    names = list(names) if names is not None else [f"run {i + 1}" for i in range(len(runs))]
    queries, _ = common_queries(runs, names)
    fused: Run = {}
    for qid in queries:
        parts = [(weight, *_contributions(run[qid], method, rrf_k))
                 for run, weight in zip(runs, weights) if run.get(qid)]
        documents = dict.fromkeys(doc for _, values, _ in parts for doc in values)
        totals = {doc: math.fsum(weight * values.get(doc, floor) for weight, values, floor in parts)
                  for doc in documents}
        fused[qid] = sort_ranking(totals, depth)
    return fused


def _contributions(ranking: list[tuple[str, float]], method: str, rrf_k: float) -> tuple[dict[str, float], float]:
    """Each document's value in one run for one query, and the value of a document it lacks."""
    if method == "rrf":
        ordered = sorted(ranking, key=lambda item: -item[1])
        return {doc: 1.0 / (rrf_k + rank) for rank, (doc, _) in enumerate(ordered, start=1)}, 0.0
    values = normalise(ranking, method)
    return values, min(values.values())


def interpolate(first_stage: Run, reranked: Run, weight: float, method: str = "minmax",
                depth: int | None = None) -> Run:
    """``weight`` x normalised re-ranker score + (1 - weight) x normalised first-stage score."""
    if not 0.0 <= weight <= 1.0:
        raise InputError(f"interpolation weight must be in [0, 1], got {weight}")
    return fuse([first_stage, reranked], [1.0 - weight, weight], method=method, depth=depth,
                names=["first stage", "re-ranker"])
