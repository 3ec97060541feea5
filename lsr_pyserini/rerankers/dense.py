"""Dense re-ranking: inner product of the query vector with document vectors from a dense store.

The store (``python -m lsr_pyserini.encode dense``) records how its documents were encoded; the
query encoder is rebuilt from that record, so queries and documents always match (``--model``
only relocates the checkpoint).
"""
from __future__ import annotations

import logging

import numpy as np

from ..core.batching import encode_in_length_order
from ..core.errors import InputError
from ..encoders.dense import build_dense_encoder
from ..stores.dense import DenseStore
from .base import Option, register
from .base import Reranker

log = logging.getLogger(__name__)

DEFAULT_BATCH_SIZE = 32
CHAT_TEMPLATE = Option("--chat-template", "Jinja chat template for a PromptReps tokenizer without one "
                       "(default: the store's)", str, "FILE")


class DenseReranker(Reranker):
    family: str | None = None  # the encoder family the store must hold (None: any)

    def __init__(self, store: str, options: dict):
        self.store = DenseStore(store)
        settings = self.store.encoder_settings
        if self.family and settings.get("family") != self.family:
            raise InputError(f"{store}: store was encoded by {settings.get('family')!r}, not {self.family!r} "
                             f"(build it with the matching encoder)")
        model = options.get("model")
        if model and model != settings.get("model"):
            log.warning(f"queries are encoded with {model!r}; the store's documents were encoded with "
                        f"{settings.get('model')!r} (it must be the same model)")
        self.options = options
        self.batch_size = int(options.get("batch_size") or DEFAULT_BATCH_SIZE)
        self._encoder = None
        self._overrides = {"model": model}
        if settings.get("family") == "promptreps":
            self._overrides["chat_template"] = options.get("chat_template")

    @property
    def encoder(self):
        if self._encoder is None:  # loaded on first use: bad runs fail before a model is loaded
            self._encoder = build_dense_encoder(self.store.encoder_settings, self._overrides)
        return self._encoder

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        rows = encode_in_length_order(self.encoder.encode_queries, texts, self.batch_size)
        return np.stack(rows) if rows else np.zeros((0, self.store.index.d), dtype=np.float32)

    def score(self, query_ids, query_texts, candidates):
        vectors = self.encode_queries(query_texts)
        return [self.store.scores(vector, docs).tolist() for vector, docs in zip(vectors, candidates)]

    def describe(self) -> dict:
        return {"store": str(self.store.path), "encoder": self.store.encoder_settings}


@register("dense", options=(CHAT_TEMPLATE,))
def build(store: str, options: dict) -> DenseReranker:
    return DenseReranker(store, options)
