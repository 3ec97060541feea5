"""Engines: encoded queries in, a `Run` out (see `base.py` for the interface). One folder each, holding
its engine class, its index build and store, and its command line (`python -m lsr_pyserini.NAME`):

    lucene/   lucene  Lucene impact index (Anserini's SimpleImpactSearcher)         queries: {term: int}
              bm25    Lucene BM25 (plain, or augmented-BM25 boosts, pretokenized)   queries: text / {term: boost}
    sharded/  sharded several Lucene impact indexes, merged into one index's run    queries: {term: int}
    seismic/  seismic a Seismic index of the same shards (the `[seismic]` extra)    queries: {term: int}
    dense/    dense   exact inner product over a dense store (faiss)                queries: float32 vectors
    milvus/   milvus  a Milvus collection of the same shards (the `[milvus]` extra) queries: {term: int}
    pisa/     pisa    a PISA index of the same shards (the `[pisa]` extra)          queries: {term: int}
    bmp/      bmp     a BMP index of the same shards (Block-Max Pruning; `bmp`)    queries: {term: int}
    pyserini_impact/
              pyserini Pyserini's LuceneImpactSearcher + its SPLADE query encoder  queries: text

An engine of your own is a package named in `LSR_PYSERINI_ENGINES` (module names, comma-separated):
importing it registers its engines, after the toolkit's (docs/architecture.md, "Add an engine").
What each engine is (what it recognises, whether it is exact, how its index is built) is declared on
its class; nothing here or in the commands keeps a table by engine name.
"""
from __future__ import annotations

import importlib
import inspect
import os

from ..core.errors import InputError
from ..core.topics import IMPACTS, TEXT, VECTOR
from .base import ENGINE_CLASSES, ENGINES, Engine, register

BUILT_IN = ("lucene", "sharded", "seismic", "dense", "milvus", "pisa", "bmp", "pyserini_impact")  # folders, in listing order
PLUGINS = "LSR_PYSERINI_ENGINES"
_loaded: set[str] = set()


def _load_engines() -> None:
    """Import every engine package (each registers its engines), the toolkit's first, then those
    named in LSR_PYSERINI_ENGINES; a name that does not import is refused in one line."""
    wanted = [f"{__name__}.{name}" for name in BUILT_IN]
    wanted += [name.strip() for name in os.environ.get(PLUGINS, "").split(",") if name.strip()]
    for module in wanted:
        if module in _loaded:
            continue
        try:
            importlib.import_module(module)
        except ModuleNotFoundError as error:
            if module.startswith(f"{__name__}.") or error.name != module.split(".")[0]:
                raise
            raise InputError(f"{PLUGINS}: no module {module!r} to import engines from") from None
        _loaded.add(module)


def _listing_order(name: str) -> tuple[int, int]:
    """The toolkit's engines in the order of their folders (whichever was imported first), then the
    engines of other packages in the order they registered."""
    parts = ENGINE_CLASSES[name].__module__.split(".")
    folder = parts[2] if parts[:2] == [__name__.split(".")[0], "engines"] and len(parts) > 2 else None
    return (BUILT_IN.index(folder) if folder in BUILT_IN else len(BUILT_IN), list(ENGINES).index(name))


def available_engines() -> list[str]:
    _load_engines()
    return sorted(ENGINES, key=_listing_order)


def engine_classes() -> dict[str, type[Engine]]:
    """{name: class} of every engine, in listing order."""
    return {name: ENGINE_CLASSES[name] for name in available_engines()}


def engine_options_of(name: str) -> list[str]:
    """The options (keyword arguments) engine `name` reads."""
    _load_engines()
    parameters = list(inspect.signature(ENGINES[name]).parameters.values())[1:]  # after the index
    return [p.name for p in parameters if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def check_engine(name: str, options: dict) -> None:
    """InputError for an unknown engine or an option it does not read (before anything is opened)."""
    _load_engines()
    if name not in ENGINES:
        raise InputError(f"engine {name!r}: expected one of {', '.join(available_engines())}")
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


def recognising_engine(index, family: str | None) -> str | None:
    """The first engine, in `recognition_order`, that recognises `index` as its own (None: none does)."""
    classes = engine_classes()
    for name in sorted(classes, key=lambda name: classes[name].recognition_order):
        if classes[name].recognises(index, family):
            return name
    return None


def index_descriptions() -> list[str]:
    """What each engine's index is, in recognition order (for a folder none of them recognises)."""
    classes = engine_classes()
    ordered = sorted(classes.values(), key=lambda cls: cls.recognition_order)
    return list(dict.fromkeys(cls.index_description for cls in ordered if cls.index_description))


__all__ = ["Engine", "ENGINES", "IMPACTS", "TEXT", "VECTOR", "available_engines", "build_engine", "check_engine",
           "engine_class", "engine_classes", "engine_options_of", "index_descriptions", "recognising_engine",
           "register"]
