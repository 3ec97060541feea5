"""Dense encoders (sentence-transformers / Hugging Face), their stores' query side and re-ranking.

One package: config.py, encoder.py, reranker.py."""
from . import config, encoder, reranker  # noqa: F401  (each registers what it offers)
