"""Pyserini's own impact search, as a baseline: the `pyserini` engine (engine.py), Pyserini's
`LuceneImpactSearcher` with Pyserini's own SPLADE query encoder, text in, on a Lucene impact index."""
from .engine import PyseriniImpactEngine  # noqa: F401  (registers the engine)
