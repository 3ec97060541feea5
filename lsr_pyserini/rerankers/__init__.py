"""Re-rankers: new scores for the candidates a first-stage (Lucene) run returned.

A re-ranker is built from a store path and options and reads document-side data only from that
store, written at encoding time (dense vectors in faiss, ...): no document is encoded at query
time. Each family registers a builder under the name `--reranker` takes, with the command-line
options it reads (`Option`); `rerank` is the one scoring path the `rerank` command and
`lsr_pyserini.Searcher` share.
"""
from __future__ import annotations

from ..core.errors import InputError
from ..core.fusion import interpolate as interpolate_runs
from ..core.fusion import sort_ranking
from ..core.hits import Run
from ..core.options import checked, refuse_foreign
from ..models.base import Option, Reranker
from ..models.registry import RERANKER_OPTIONS as OPTIONS
from ..models.registry import RERANKERS, load_families

_load_families = load_families


def available_rerankers() -> list[str]:
    _load_families()
    return sorted(RERANKERS)


def add_reranker_options(parser) -> None:
    """Every re-ranker's own options, each flag once, its help naming the re-rankers that read it."""
    _load_families()
    owners: dict[str, tuple[Option, list[str]]] = {}
    for name in sorted(OPTIONS):
        for option in OPTIONS[name]:
            owners.setdefault(option.flag, (option, []))[1].append(name)
    group = parser.add_argument_group("options of one re-ranker")
    for flag, (option, names) in owners.items():
        group.add_argument(flag, type=option.type, metavar=option.metavar,
                           help=f"{', '.join(names)}: {option.help}")


def reranker_options(name: str, values: dict) -> dict:
    """The options re-ranker `name` reads, from `values` (dest -> value, None = not given), each
    through its type; InputError for a bad value or for an option given that belongs to other
    re-rankers only."""
    _load_families()
    every = {option.dest: option for options in OPTIONS.values() for option in options}
    owners: dict[str, list[str]] = {}
    for other, options in OPTIONS.items():
        for option in options:
            owners.setdefault(option.flag, []).append(other)
    refuse_foreign([option.flag for dest, option in every.items() if values.get(dest) is not None], owners, name,
                   ("re-ranker", "re-rankers"))
    own = {}
    for option in OPTIONS.get(name, []):
        value = values.get(option.dest)
        own[option.dest] = None if value is None else checked(option.dest, value, option.type)
    return own


def build_reranker(name: str, store: str, options: dict) -> Reranker:
    _load_families()
    if name not in RERANKERS:
        raise InputError(f"unknown reranker {name!r} (known: {', '.join(sorted(RERANKERS))})")
    return RERANKERS[name](store, options)


def candidates_of(run: Run, hits: int) -> Run:
    """Each query's top ``hits`` (docid, first-stage score), in rank order, without duplicates."""
    top = {}
    for qid, ranking in run.items():
        first_scores: dict[str, float] = {}
        for doc, score in ranking:
            first_scores.setdefault(doc, score)
        top[qid] = sorted(first_scores.items(), key=lambda item: -item[1])[:hits]
    return top


def check_candidates(reranker: Reranker, first_stage: Run, depth: int, source: str, store: str) -> None:
    """InputError when a candidate (of each query's top `depth`) is not in the re-ranker's store,
    checked before any scoring."""
    missing = reranker.missing({doc for ranking in first_stage.values() for doc, _ in ranking})
    if missing:
        raise InputError(f"{source}: document {missing[0]!r} is not in the store {store} "
                         f"({len(missing)} documents of the run's top {depth} are missing; "
                         f"was the store built from the same corpus?)")


def rerank(reranker: Reranker, first_stage: Run, texts: dict[str, str], interpolate: float | None = None,
           fusion: str = "minmax") -> Run:
    """Re-rank each query's candidates: {qid: [(docid, score), ...]} by the re-ranker's score, or by
    `interpolate` x normalised re-ranker score + (1 - `interpolate`) x normalised first-stage score."""
    qids = list(first_stage)
    scores = reranker.score(qids, [texts[q] for q in qids], [[d for d, _ in first_stage[q]] for q in qids])
    reranked = {qid: sort_ranking({doc: s for (doc, _), s in zip(first_stage[qid], row)})
                for qid, row in zip(qids, scores)}
    if interpolate is not None:
        reranked = interpolate_runs(first_stage, reranked, interpolate, method=fusion)
    return reranked


__all__ = ["Reranker", "Option", "build_reranker", "available_rerankers", "add_reranker_options",
           "reranker_options", "candidates_of", "check_candidates", "rerank", "RERANKERS"]
