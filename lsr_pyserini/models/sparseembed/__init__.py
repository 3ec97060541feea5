"""SparseEmbed: SPLADE terms carrying contextual embeddings.

One package: config.py, encoder.py, reranker.py, training.py."""
from . import config, encoder, reranker, training  # noqa: F401  (each registers what it offers)
