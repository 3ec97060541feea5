"""The dense query side: query vectors for a dense store, encoded as its documents were (its
manifest records the encoder), for the dense engine and the dense re-rankers."""
from __future__ import annotations

from ...core.length_order import encode_in_length_order
from ...core.options import checked, positive_int
from ...core.topics import VECTOR  # noqa: F401  (what this query side makes)
from .encoder import build_dense_encoder



class DenseQueries:
    """Query vectors for a dense store, encoded as its documents were (in batches of `batch_size`,
    in length order, as `search_dense` and the dense re-ranker encode them)."""

    makes = VECTOR

    def __init__(self, store: str, model: str | None = None, batch_size: int = 32, chat_template: str | None = None):
        import threading

        from ...stores.dense import DenseStore

        self.store = DenseStore(store)
        self.batch_size = checked("batch_size", batch_size, positive_int)
        self.overrides = {"model": model}
        if self.store.encoder_settings.get("family") == "promptreps":
            self.overrides["chat_template"] = chat_template
        self._encoder, self._lock = None, threading.Lock()

    @property
    def encoder(self):
        with self._lock:  # built once, on first use, whichever thread asks first
            if self._encoder is None:

                self._encoder = build_dense_encoder(self.store.encoder_settings, self.overrides)
            return self._encoder

    def queries(self, qids: list[str], texts: list[str]) -> list:
        return encode_in_length_order(self.encoder.encode_queries, list(texts), self.batch_size)


