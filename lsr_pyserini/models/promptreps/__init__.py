"""PromptReps: a chat LLM's next-token logits (sparse) and last hidden state (dense).

One package: config.py, encoder.py, reranker.py."""
from . import config, encoder, reranker  # noqa: F401  (each registers what it offers)
