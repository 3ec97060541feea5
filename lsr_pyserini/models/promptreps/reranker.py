"""PromptReps as a re-ranker: the LLM's dense vector for the query (one prompt, one forward pass)
against the document vectors that `encode corpus --encoder promptreps --dense-store` stored."""
from __future__ import annotations

from ..registry import reranker as register
from ..dense.reranker import CHAT_TEMPLATE, DenseReranker


class PromptRepsReranker(DenseReranker):
    family = "promptreps"


@register("promptreps", options=(CHAT_TEMPLATE,))
def build(store: str, options: dict) -> PromptRepsReranker:
    return PromptRepsReranker(store, options)
