"""TILDE: token likelihoods for expansion, TILDE-QL re-ranking and BiQDL training.

One package: config.py, model.py, reranker.py, training.py."""
from . import config, model, reranker, training  # noqa: F401  (each registers what it offers)
