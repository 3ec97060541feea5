"""SPLADE (v1 sum / v2 max pooling, inference-free queries).

One package: config.py, encoder.py, training.py."""
from . import config, encoder, training  # noqa: F401  (each registers what it offers)
