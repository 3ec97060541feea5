"""The sparse encoder interface, with the optional dense side some families compute in the same pass.

An encoder maps a batch of texts to a batch of non-negative `{term: weight}` vectors, one side
(documents or queries) at a time. Quantising and writing files is not its job (`core/writer.py`).

A family whose forward pass also yields document-side data for a re-ranker (PromptReps' and
BGE-M3's dense vectors, SparseEmbed's term embeddings) declares it here: `has_dense_side`,
`encode_documents_with_dense` (one `(sparse vector, dense part)` pair per text) and
`open_dense_store` (the store writer those parts go to; a shard's records are
`(docids, [dense part, ...])`). `encode corpus --dense-store` and the Python API use only this.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, Callable

from ..core.errors import InputError

SparseVector = dict[str, float]


class SparseEncoder(ABC):
    """Maps a batch of texts to a batch of non-negative `{term: weight}` vectors."""

    has_dense_side = False

    @abstractmethod
    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        """Document-side vectors, one per text, in the same order."""

    @abstractmethod
    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        """Query-side vectors, one per text, in the same order."""

    def describe(self) -> dict:
        """Settings that determine the output, recorded in manifests (JSON-serialisable)."""
        return {}

    # -- the optional dense side -------------------------------------------------------------
    def encode_documents_with_dense(self, texts: list[str]) -> list[tuple[SparseVector, Any]]:
        """(sparse vector, dense part) per document from one forward pass."""
        raise self._no_dense_side()

    def open_dense_store(self, path: str, settings: dict, overwrite: bool = False):
        """The store writer for `encode_documents_with_dense`'s dense parts."""
        raise self._no_dense_side()

    def _no_dense_side(self) -> InputError:
        return InputError(f"encoder {self.describe().get('family')!r} has no dense side; build a store for a "
                          f"dense model with `encode dense`")


class DenseVectorSide:
    """Mixin for encoders whose dense side is a vector per document (plus optional per-document
    arrays), written to a dense store (faiss); `self.dense` is the side's own encoder, whose
    `describe()` the store records so that re-rankers rebuild the query encoder from it."""

    has_dense_side = True

    def open_dense_store(self, path: str, settings: dict, overwrite: bool = False):
        from ..stores.dense import DenseStoreWriter

        return DenseStoreWriter(path, {"encoder": self.dense.describe(), **settings}, overwrite=overwrite)


# the registry of families (filled by each family module; read through encoders/__init__.py)
FAMILIES: dict[str, Callable[..., SparseEncoder]] = {}


def register(family: str):
    """Register a builder (an encoder class or a function) called with the preset's encoder settings
    as keyword arguments; the keywords it declares are the settings the family reads."""
    def decorator(builder):
        FAMILIES[family] = builder
        return builder

    return decorator
