"""Lucene: the `lucene` (impact) and `bm25` engines (engine.py) and `python -m lsr_pyserini.lucene`, Pyserini's
index, search and eval tools run with Java 21 and the toolkit's checks (command.py)."""
from .engine import PYSERINI_BM25, Bm25Engine, LuceneImpactEngine  # noqa: F401  (registers both engines)

from ...core.forwarding import forward_to  # noqa: E402

__getattr__ = forward_to(__name__, "engines.lucene.engine")  # names of engines/lucene.py before the engine folders
