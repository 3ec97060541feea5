"""The engine interface and its registry.

An engine answers encoded queries with a `Run` (core/hits.py): `search(qids, queries, k, threads)`.
What a query is depends on the engine (`query_kind`):

- `IMPACTS`: `{term: int}`, the integer impacts `encode queries` writes (Lucene impact, sharded,
  Seismic);
- `TEXT`: a query string analysed by the index's analyzer, or with `pretokenized` a `{term: int}`
  bag of boosts (augmented BM25 queries) searched with whitespace analysis (Lucene BM25);
- `VECTOR`: a float32 query vector (dense).

An engine also gives a document's text where its index or its source keeps it (`doc`), and the
terms that made a document match (`explain`). Engines do no query encoding: the query side
(`encoders/query.py`) and the API put the two together.

A new engine is one file in `engines/` with a builder registered under its name, `@register(NAME)`,
listed in `engines/__init__.py`'s `_load_engines`; the builder's keyword arguments are the
`engine_options` (and `--engine-option` keys) it reads.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import InputError
from ..core.hits import Run, TermMatch

IMPACTS, TEXT, VECTOR = "impacts", "text", "vector"
ENGINES: dict[str, Callable[..., "Engine"]] = {}


def register(name: str):
    """Register an engine builder `(index, **options) -> Engine` under `name`."""
    def decorator(builder):
        ENGINES[name] = builder
        return builder

    return decorator


class Engine(ABC):
    name: str = ""
    query_kind: str = IMPACTS

    @abstractmethod
    def search(self, qids: list[str], queries: list, k: int, threads: int = 1) -> Run:
        """Each query's top k (docid, score), scores at a TREC run's precision; every qid is a key."""

    def explain(self, query, docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        """The matching terms of each document for one query, largest contribution first."""
        raise InputError(f"engine {self.name!r} has no term explanations")

    def doc(self, docid: str) -> str | None:
        """The document's text; None when the collection has no such document."""
        raise InputError(f"engine {self.name!r} keeps no document text")

    def docs(self, docids: list[str]) -> list[str | None]:
        """Several documents' texts at once (an engine may fetch them in one step)."""
        return [self.doc(docid) for docid in docids]

    def describe(self) -> dict:
        return {"engine": self.name}

    def check_encoder(self, settings: dict) -> None:
        """InputError when the query encoder's `settings` cannot be the documents' (an engine that
        records the documents' encoder checks it; the others trust the caller)."""

    def close(self) -> None:
        pass


def sorted_matches(matches) -> tuple[TermMatch, ...]:
    """Largest contribution first, ties by term, so that explanations are deterministic."""
    return tuple(sorted(matches, key=lambda match: (-match.contribution, match.term)))


class FromInputShards:
    """Texts and explanations from the `encode corpus` shards an engine's index was built from (its
    manifest's `input`), whose impacts are the ones it scores: Seismic, Milvus."""

    path: str
    _shards = None

    def input_folder(self) -> Path:
        raise NotImplementedError

    @property
    def shards(self):
        if self._shards is None:
            folder = self.input_folder()
            if not folder.is_dir():
                raise InputError(f"{self.path}: the shards it was built from ({folder}) are not on this machine; "
                                 f"they hold its documents' text and impacts")
            from ..stores.documents import ShardDocuments

            self._shards = ShardDocuments(folder)
        return self._shards

    def explain_terms(self, terms: dict[str, float], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        """Each document's matches with the query `terms` that were searched: query weight x impact."""
        explained = {}
        for docid in docids:
            vector = self.shards.vector(docid)
            if vector is None:
                raise InputError(f"{self.path}: no document {docid!r}")
            explained[docid] = sorted_matches(
                TermMatch(term, float(weight), float(vector[term]), float(np.float32(weight) * np.float32(vector[term])))
                for term, weight in terms.items() if vector.get(term, 0) > 0)
        return explained

    def doc(self, docid: str) -> str | None:
        return self.shards.text(docid)
