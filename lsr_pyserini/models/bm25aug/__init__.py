"""Augmented BM25 queries: learned expansion a(q) and re-weighting w(q) of BM25's query.

One package: config.py, model.py, training.py."""
from . import config, model, training  # noqa: F401  (each registers what it offers)
