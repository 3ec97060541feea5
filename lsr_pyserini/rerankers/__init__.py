"""Re-rankers: new scores for the candidates a first-stage (Lucene) run returned.

A re-ranker is built from a store path and options and reads document-side data only from that
store, written at encoding time (dense vectors in faiss, ...): no document is encoded at query
time. Each family registers a builder in `RERANKERS` under the name `--reranker` takes.
"""
from __future__ import annotations

from typing import Callable

from .base import Reranker

RERANKERS: dict[str, Callable[[str, dict], Reranker]] = {}


def register(name: str):
    def decorator(builder):
        RERANKERS[name] = builder
        return builder

    return decorator


def _load_families() -> None:
    from . import bgem3, dense, promptreps, sparseembed, ssr, tilde  # noqa: F401  (register their names)


def available_rerankers() -> list[str]:
    _load_families()
    return sorted(RERANKERS)


def build_reranker(name: str, store: str, options: dict) -> Reranker:
    from ..data import InputError

    _load_families()
    if name not in RERANKERS:
        raise InputError(f"unknown reranker {name!r} (known: {', '.join(sorted(RERANKERS))})")
    return RERANKERS[name](store, options)


__all__ = ["Reranker", "build_reranker", "available_rerankers", "register", "RERANKERS"]
