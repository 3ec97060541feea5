"""The `dense` engine: exact inner-product search of every document vector in a dense store
(faiss `IndexFlatIP`, `encode dense` or `encode corpus --dense-store`). Queries are float32
vectors, encoded as the store's manifest says its documents were (`models/dense/encoder.py`)."""
from __future__ import annotations

import numpy as np

from ...core.hits import Run, run_precision
from ..base import VECTOR, Engine, recognised_folder, register


class DenseEngine(Engine):
    name = "dense"
    query_kind = VECTOR
    run_tag = "dense"
    scores = "dense"
    recognition_order = 40
    index_description = "a dense store (a faiss index and its manifest)"

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        from ...stores.dense import DENSE_STORE

        return recognised_folder(index, DENSE_STORE)

    def __init__(self, index: str):
        from ...stores.dense import DenseStore

        self.path = str(index)
        self.store = DenseStore(index)
        self.documents = int(self.store.index.ntotal)

    def search(self, qids: list[str], queries: list[np.ndarray], k: int, threads: int = 1) -> Run:
        if not queries:
            return {}
        results = self.store.search(np.stack(queries), k)
        return {qid: [(docid, run_precision(score)) for docid, score in ranking] for qid, ranking in zip(qids, results)}

    def describe(self) -> dict:
        return {"engine": self.name, "store": self.path, "documents": self.documents}


@register("dense", DenseEngine)
def build(index: str) -> DenseEngine:
    return DenseEngine(index)
