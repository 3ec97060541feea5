"""The interfaces a family implements: a sparse encoder (with the optional dense side some families
compute in the same pass), a re-ranker with its own options, and the training batch its loss reads.

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
from dataclasses import dataclass, field
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


class Reranker(ABC):
    """Scores candidates from precomputed document-side data held in a store.

    Built as ``Reranker(store_path, options)``; ``options`` holds the command line's settings
    (``model``, ``batch_size``, ...), each optional.
    """

    @abstractmethod
    def missing(self, docids: set[str]) -> list[str]:
        """The given document ids that the store does not hold (checked before any scoring)."""

    @abstractmethod
    def score(self, query_ids: list[str], query_texts: list[str],
              candidates: list[list[str]]) -> list[list[float]]:
        """One score per candidate, higher is better, in the candidates' order."""

    def describe(self) -> dict:
        """What determines the scores (for logs and run tags)."""
        return {}


@dataclass(frozen=True)
class Option:
    """A re-ranker's own command-line option (`--cls-weight` -> options["cls_weight"]); `type` is
    its argparse type (numbers: one of `core.options`), applied to the Python API's value as well."""

    flag: str
    help: str
    type: Callable
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


@dataclass
class Batch:
    """One training step's data (train/data.py makes it): B queries, each with a group of G
    documents, the positive first, then hard negatives."""

    queries: list[str]
    documents: list[str]  # B groups of G: positive first, then hard negatives
    group_size: int
    teacher: list[list[float]] | None = None  # B x G teacher scores, when given
    query_ids: list[str] = field(default_factory=list)
    document_ids: list[str] = field(default_factory=list)
