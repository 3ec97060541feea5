"""TILDEv2: contextualised exact matching, tokenizer-only queries.

One package: config.py, encoder.py, training.py."""
from . import config, encoder, training  # noqa: F401  (each registers what it offers)
