"""BGE-M3's sparse head as the sparse encoder `encode` uses, and its dense side for dense stores
(`BgeM3Model.represent` under inference mode)."""
from __future__ import annotations

import numpy as np

from ..base import DenseVectorSide, SparseEncoder, SparseVector
from ..registry import dense_side
from ..registry import encoder as register
from .config import SCHEMA
from .model import BgeM3Model


# -- the sparse encoder the `encode` command uses ------------------------------------------------
@register("bgem3")
class BgeM3Encoder(DenseVectorSide, SparseEncoder):
    """BGE-M3's sparse head as a `SparseEncoder` (the dense and ColBERT heads are not computed)."""

    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "bgem3 encoder")
        self.top_k = {"documents": config["doc_top_k"], "queries": config["query_top_k"]}
        self.model = BgeM3Model(model, doc_max_length=config["doc_max_length"],
                                query_max_length=config["query_max_length"], body=config["body"])

    def _encode(self, texts: list[str], side: str) -> list[SparseVector]:
        return self._prune(self.model.encode(texts, side, heads=("sparse",)).sparse, side)

    def _prune(self, vectors: list[SparseVector], side: str) -> list[SparseVector]:
        top_k = self.top_k[side]
        if top_k:
            vectors = [dict(sorted(v.items(), key=lambda kv: -kv[1])[: int(top_k)]) for v in vectors]
        return vectors

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        return self._encode(texts, "documents")

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        return self._encode(texts, "queries")

    def encode_documents_with_dense(self, texts: list[str]) -> list[tuple]:
        """Per document, from one forward pass (`encode corpus --dense-store`): the (top-k) sparse
        vector for Lucene, the dense vector, and what the `bgem3` re-ranker reads from the store:
        the ColBERT vectors (float16) and the whole sparse head as vocabulary ids and weights."""
        output, by_id = self.model.encode_for_store(texts, "documents")
        sparse = self._prune(output.sparse, "documents")
        return [(vector, (dense.numpy(), {
                    "colbert": colbert.numpy().astype(np.float16),
                    "sparse_ids": np.fromiter(weights.keys(), dtype=np.int32, count=len(weights)),
                    "sparse_weights": np.fromiter(weights.values(), dtype=np.float32, count=len(weights))}))
                for vector, dense, colbert, weights in zip(sparse, output.dense, output.colbert, by_id)]

    @property
    def dense(self) -> "BgeM3Dense":
        return BgeM3Dense(self.model)

    def describe(self) -> dict:
        return {"family": "bgem3", **self.model.describe(),
                "doc_top_k": self.top_k["documents"], "query_top_k": self.top_k["queries"],
                **self.model.placement.identity()}


class BgeM3Dense:
    """BGE-M3's dense side as the dense store and `search_dense` / `rerank` use it."""

    def __init__(self, model: BgeM3Model):
        self.model = model

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, "queries", heads=("dense",)).dense.numpy()

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, "documents", heads=("dense",)).dense.numpy()

    def describe(self) -> dict:
        model = self.model.describe()
        return {"family": "bgem3", "model": model["model"], "doc_max_length": model["doc_max_length"],
                "query_max_length": model["query_max_length"]}


@dense_side("bgem3")
def dense_encoder(settings: dict) -> BgeM3Dense:
    """The dense side a store's manifest describes (`lsr_pyserini.encoders.dense.build_dense_encoder`)."""
    return BgeM3Dense(BgeM3Model(settings["model"], doc_max_length=settings.get("doc_max_length"),
                                 query_max_length=settings.get("query_max_length")))

