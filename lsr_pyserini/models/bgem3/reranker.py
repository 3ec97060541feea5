"""BGE-M3 hybrid re-ranking: the paper's weighted sum of its dense, sparse and multi-vector scores.

The store is the dense store `encode corpus --encoder bge-m3 --dense-store STORE` writes in the
same forward pass as the Lucene vectors: the normalised [CLS] vectors (faiss), and per document
the ColBERT vectors (float16) and the whole sparse head (vocabulary ids and float weights). Only
the queries are encoded here. score = sum over heads of weight x head score, default dense 1 +
sparse 0.3 (the paper's dense+sparse setting); `--hybrid-weights dense=1,sparse=0.3,colbert=1` is
its all-three setting.
"""
from __future__ import annotations

import numpy as np

from ...core.errors import InputError
from ...core.options import NamedNumbers, non_negative_float
from .config import HEADS, HYBRID_WEIGHTS
from .model import hybrid_score
from ..base import Option
from ..registry import reranker as register
from ..dense.reranker import DenseReranker


HEAD_WEIGHTS = NamedNumbers(HEADS, non_negative_float, "head")  # `--hybrid-weights dense=1,sparse=0.3`


def sparse_dot(ids, weights, starts, ends, lookup, values, out):
    """Compiled kernel: out[d] = the sum over rows p in starts[d]:ends[d], in stored order from 0.0,
    of values[lookup[ids[p]]] x float64(weights[p]) for the ids with lookup >= 0 (ids outside lookup
    match nothing): the additions `np.bincount` makes, in the same order."""
    size = lookup.shape[0]
    for d in range(starts.shape[0]):
        total = 0.0
        for p in range(starts[d], ends[d]):
            i = ids[p]
            if i >= 0 and i < size:
                s = lookup[i]
                if s >= 0:
                    total += values[s] * np.float64(weights[p])
        out[d] = total


def hybrid_weights(given: dict[str, float] | None) -> dict[str, float]:
    """Weights per head from `--hybrid-weights` (parsed by HEAD_WEIGHTS; heads not named get 0);
    None: the paper's."""
    if not given:
        return dict(HYBRID_WEIGHTS)
    weights = {head: float(given.get(head, 0.0)) for head in HEADS}
    if not any(weights.values()):
        raise InputError("--hybrid-weights: all weights are zero")
    return weights


class BgeM3Reranker(DenseReranker):
    family = "bgem3"

    def __init__(self, store: str, options: dict):
        super().__init__(store, options)
        self.weights = hybrid_weights(options.get("hybrid_weights"))
        for head in ("colbert", "sparse"):
            if self.weights[head]:
                self.store.ragged(head if head == "colbert" else "sparse_ids", [])  # fail early if absent

    def encode_heads(self, texts: list[str]) -> list[tuple]:
        """Per query: (dense vector, ColBERT vectors, sparse head {vocabulary id: weight}), one forward pass."""
        output, sparse = self.encoder.model.encode_for_store(texts, "queries")
        return [(output.dense[row].numpy(), output.colbert[row].numpy(), sparse[row]) for row in range(len(texts))]

    def score_encoded(self, query: tuple, docs: list[str]) -> np.ndarray:
        """The weighted sum of the heads' scores of one encoded query's candidates (float64)."""
        dense, colbert, sparse = query
        scores = {}
        if self.weights["dense"]:
            scores["dense"] = self.store.scores(dense, docs)
        if self.weights["sparse"]:
            scores["sparse"] = self._sparse(sparse, docs)
        if self.weights["colbert"]:
            scores["colbert"] = np.asarray(
                [(colbert @ d.astype(np.float32).T).max(1).mean() if len(d) and len(colbert) else 0.0
                 for d in self.store.ragged("colbert", docs)])
        return np.asarray(hybrid_score(scores, self.weights), dtype=np.float64)

    def score(self, query_ids, query_texts, candidates):
        results = []
        for start in range(0, len(query_texts), self.batch_size):
            encoded = self.encode_heads(query_texts[start:start + self.batch_size])
            for query, docs in zip(encoded, candidates[start:start + self.batch_size]):
                results.append(self.score_encoded(query, docs).tolist())
        return results

    def _sparse(self, query: dict[int, float], docs: list[str], compiled: bool = True) -> np.ndarray:
        """Sum over shared vocabulary ids of query weight x document weight: float64 products summed
        in each document's stored order (what a sequential Python sum gives), by the compiled kernel
        `sparse_dot` reading the store in place, or vectorised in numpy (compiled=False, or no
        compiled kernels): the same bits."""
        scores = self._compiled_sparse(query, docs) if compiled else None
        if scores is not None:
            return scores
        ids, lengths = self.store.ragged_concat("sparse_ids", docs)
        weights, _ = self.store.ragged_concat("sparse_weights", docs)
        owner = np.repeat(np.arange(len(docs)), lengths)
        if not query or not len(ids):
            return np.zeros(len(docs), dtype=np.float64)
        keys = np.fromiter(query.keys(), dtype=np.int64, count=len(query))
        order = np.argsort(keys)
        keys, values = keys[order], np.fromiter(query.values(), dtype=np.float64, count=len(query))[order]
        slot = np.minimum(np.searchsorted(keys, ids), len(keys) - 1)
        shared = keys[slot] == ids
        products = values[slot[shared]] * weights[shared].astype(np.float64)
        return np.bincount(owner[shared], weights=products, minlength=len(docs))

    def _compiled_sparse(self, query: dict[int, float], docs: list[str]) -> np.ndarray | None:
        from ...kernels.jit import compiled

        kernel = compiled(sparse_dot)
        ids, starts, ends, weights = self.store.ragged_ranges("sparse_ids", docs, "sparse_weights")
        if kernel is None or weights.dtype not in (np.float32, np.float64) or ids.dtype.kind not in "iu":
            return None
        scores = np.zeros(len(docs), dtype=np.float64)
        if query and len(docs):
            keys = np.fromiter(query.keys(), dtype=np.int64, count=len(query))
            if keys.min() < 0:  # not a vocabulary id: numpy matches it as it is
                return None
            lookup = np.full(int(keys.max()) + 1, -1, dtype=np.int64)
            lookup[keys] = np.arange(len(keys))
            values = np.fromiter(query.values(), dtype=np.float64, count=len(query))
            kernel(np.asarray(ids), np.asarray(weights), starts, ends, lookup, values, scores)
        return scores

    def describe(self) -> dict:
        return {**super().describe(), "hybrid_weights": self.weights}


@register("bgem3", options=(Option("--hybrid-weights", "weights (>= 0) of the dense, sparse and colbert scores, e.g. "
                                   "dense=1,sparse=0.3,colbert=1 (default: the paper's dense=1,sparse=0.3)",
                                   HEAD_WEIGHTS, "HEAD=W,..."),))
def build(store: str, options: dict) -> BgeM3Reranker:
    return BgeM3Reranker(store, options)
