"""Dense re-ranking: inner product of the query vector with document vectors from a dense store.

The store (``python -m lsr_pyserini.encode dense``) records how its documents were encoded; the
query encoder is rebuilt from that record, so queries and documents always match (``--model``
only relocates the checkpoint).
"""
from __future__ import annotations

import logging

import numpy as np

from ...core.errors import InputError
from .queries import DenseQueries
from ..base import Option
from ..registry import reranker as register
from ..base import Reranker

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 32
CHAT_TEMPLATE = Option("--chat-template", "Jinja chat template for a PromptReps tokenizer without one "
                       "(default: the store's)", str, "FILE")


class DenseReranker(Reranker):
    family: str | None = None  # the encoder family the store must hold (None: any)

    def __init__(self, store: str, options: dict):
        model = options.get("model")
        # the query side the dense engine uses too: the store, and its encoder built once on first use
        # (bad runs fail before a model is loaded), whichever thread asks first
        self.queries = DenseQueries(store, model, int(options.get("batch_size") or DEFAULT_BATCH_SIZE),
                                    options.get("chat_template"))
        self.store = self.queries.store
        settings = self.store.encoder_settings
        if self.family and settings.get("family") != self.family:
            raise InputError(f"{store}: store was encoded by {settings.get('family')!r}, not {self.family!r} "
                             f"(build it with the matching encoder)")
        if model and model != settings.get("model"):
            log.warning(f"queries are encoded with {model!r}; the store's documents were encoded with "
                        f"{settings.get('model')!r} (it must be the same model)")
        self.options = options
        self.batch_size = self.queries.batch_size

    @property
    def encoder(self):
        return self.queries.encoder

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        rows = self.queries.queries([], texts)
        return np.stack(rows) if rows else np.zeros((0, self.store.index.d), dtype=np.float32)

    def score(self, query_ids, query_texts, candidates):
        vectors = self.encode_queries(query_texts)
        return [self.store.scores(vector, docs).tolist() for vector, docs in zip(vectors, candidates)]

    def describe(self) -> dict:
        return {"store": str(self.store.path), "encoder": self.store.encoder_settings}


@register("dense", options=(CHAT_TEMPLATE,))
def build(store: str, options: dict) -> DenseReranker:
    return DenseReranker(store, options)
