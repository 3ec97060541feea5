"""Engines: encoded queries in, a `Run` out (see `base.py` for the interface).

    lucene    Lucene impact index (Anserini's SimpleImpactSearcher)           queries: {term: int}
    bm25      Lucene BM25 (plain, or augmented-BM25 boosts, pretokenized)     queries: text / {term: boost}
    sharded   several Lucene impact indexes, merged into one index's run      queries: {term: int}
    seismic   Seismic index of the same shards (the `[seismic]` extra)        queries: {term: int}
    dense     exact inner product over a dense store (faiss)                  queries: float32 vectors
    milvus    a Milvus collection of the same shards (the `[milvus]` extra)   queries: {term: int}
    pisa      a PISA index of the same shards (the `[pisa]` extra)            queries: {term: int}
"""
from __future__ import annotations

import inspect

from ..core.errors import InputError
from .base import ENGINE_CLASSES, ENGINES, IMPACTS, TEXT, VECTOR, Engine, register


def _load_engines() -> None:
    """Import every engine module (each registers its engines; this order is the one listed)."""
    from . import lucene, sharded, seismic, dense, milvus, pisa  # noqa: F401,I001


def available_engines() -> list[str]:
    _load_engines()
    return list(ENGINES)


def engine_options_of(name: str) -> list[str]:
    """The options (keyword arguments) engine `name` reads."""
    _load_engines()
    parameters = list(inspect.signature(ENGINES[name]).parameters.values())[1:]  # after the index
    return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def check_engine(name: str, options: dict) -> None:
    """InputError for an unknown engine or an option it does not read (before anything is opened)."""
    _load_engines()
    if name not in ENGINES:
        raise InputError(f"engine {name!r}: expected one of {', '.join(ENGINES)}")
    known = engine_options_of(name)
    unknown = sorted(set(options) - set(known))
    if unknown:
        raise InputError(f"engine {name!r} has no option {unknown[0]!r} "
                         f"(options: {', '.join(known) or 'none'})")


def engine_class(name: str) -> type[Engine]:
    """The class of engine `name`: what it takes (query kind, several indexes, ...) is declared there."""
    check_engine(name, {})
    return ENGINE_CLASSES[name]


def build_engine(name: str, index, options: dict | None = None) -> Engine:
    """The engine `name` over `index` (a path; a list of paths for `sharded`)."""
    options = dict(options or {})
    check_engine(name, options)
    return ENGINES[name](index, **options)


__all__ = ["Engine", "ENGINES", "IMPACTS", "TEXT", "VECTOR", "available_engines",
           "build_engine", "check_engine", "engine_class", "engine_options_of", "register"]
