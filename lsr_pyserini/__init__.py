"""lsr-pyserini: learned sparse retrieval encoders, re-rankers and reproductions on Pyserini/Anserini.

The Python API (see docs/api.md):

    load_encoder(name_or_path, **settings)   the sparse encoder `encode` uses
    QueryEncoder(name_or_path, **settings)   .encode(text) -> {term: int}, Pyserini's query-encoder interface
    Searcher(index, encoder=None, reranker=None, store=None, interpolate=None, fusion="minmax")
    start_jvm()                              Java 21 for Pyserini's Lucene classes, before importing them

Names are imported on first use, so `import lsr_pyserini` stays light.
"""

__version__ = "0.2.0"

_EXPORTS = {
    "load_encoder": "api", "encoder_settings": "encoders.query", "QueryEncoder": "encoders.query", "Searcher": "api",
    "Hit": "core.hits", "TermMatch": "core.hits",
    "start_jvm": "core.jvm", "InputError": "core.errors",
}
__all__ = sorted(_EXPORTS)

from . import moved as _moved  # noqa: E402 (the old module paths keep resolving)

_moved.install()


def __getattr__(name: str):
    if name in _EXPORTS:
        import importlib

        return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
    raise AttributeError(f"module 'lsr_pyserini' has no attribute {name!r}")
