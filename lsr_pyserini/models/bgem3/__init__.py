"""BGE-M3: one body, dense, sparse and ColBERT heads.

One package: config.py, encoder.py, reranker.py, training.py."""
from . import config, encoder, reranker, training  # noqa: F401  (each registers what it offers)
