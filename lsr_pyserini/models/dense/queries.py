"""The dense query side: query vectors for a dense store, encoded as its documents were (its
manifest records the encoder), for the dense engine and the dense re-rankers."""
from __future__ import annotations

from ...core.errors import InputError
from ...core.length_order import encode_in_length_order
from ...core.options import checked, positive_int
from ...core.topics import VECTOR  # noqa: F401  (what this query side makes)
from .encoder import build_dense_encoder

# of a store's family's declared settings, those a query side may set (the others are the documents':
# pooling_mode, normalize, prefixes, ... are read from the store's manifest)
QUERY_SETTINGS = ("model", "batch_size", "chat_template")


def query_settings(family: str, settings: dict) -> dict:
    """`settings` (Searcher's `encoder_options` for a dense store) checked against the declarations of
    the store's encoder `family`: each one declared and one a query side may set; InputError in one
    line otherwise."""
    from ..registry import schema_of

    schema = schema_of(family)
    allowed = [name for name in QUERY_SETTINGS if name in schema]
    for name in settings:
        if name not in allowed:
            fixed = "a setting of the store's documents" if name in schema else f"not a setting of the {family} family"
            raise InputError(f"encoder_options: {name!r} is {fixed}; a {family} store's query side takes "
                             f"{', '.join(allowed)}")
    return schema.checked(settings, "encoder_options")


class DenseQueries:
    """Query vectors for a dense store, encoded as its documents were (in batches of `batch_size`,
    in length order, as `search_dense` and the dense re-ranker encode them)."""

    makes = VECTOR

    def __init__(self, store: str, model: str | None = None, batch_size: int = 32, chat_template: str | None = None):
        import threading

        from ...stores.dense import DenseStore

        self.store = store if isinstance(store, DenseStore) else DenseStore(store)
        self.batch_size = checked("batch_size", batch_size, positive_int)
        self.overrides = {"model": model}
        if self.store.encoder_settings.get("family") == "promptreps":
            self.overrides["chat_template"] = chat_template
        self._encoder, self._lock = None, threading.Lock()

    @classmethod
    def from_settings(cls, store: str, settings: dict) -> "DenseQueries":
        """The query side of `store` with `settings` (of its family's declared settings, those a query
        side may set: `query_settings`)."""
        from ...stores.dense import DenseStore

        opened = DenseStore(store)
        given = query_settings(opened.encoder_settings.get("family"), settings)
        return cls(opened, **{k: v for k, v in given.items() if v is not None})

    @property
    def encoder(self):
        with self._lock:  # built once, on first use, whichever thread asks first
            if self._encoder is None:

                self._encoder = build_dense_encoder(self.store.encoder_settings, self.overrides)
            return self._encoder

    def queries(self, qids: list[str], texts: list[str]) -> list:
        return encode_in_length_order(self.encoder.encode_queries, list(texts), self.batch_size)


