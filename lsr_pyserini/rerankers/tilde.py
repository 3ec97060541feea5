"""TILDE-QL re-ranking: sum over the query's terms of log P(q_i | d), read from the TILDE store
written at expansion time (`expand --store`), optionally interpolated with the document
likelihood TILDE-DL (mean over the passage's terms of log P(d_i | q), one query forward pass):
score = alpha * QL + (1 - alpha) * DL, alpha = 1 by default (`--alpha`)."""
from __future__ import annotations

import numpy as np

from ..core.options import probability
from ..encoders.tilde import TildeModel
from ..stores.tilde import TildeStore
from . import Option, register
from .base import Reranker


class TildeReranker(Reranker):
    def __init__(self, store: str, options: dict):
        self.store = TildeStore(store)
        self.alpha = float(options.get("alpha") if options.get("alpha") is not None else 1.0)
        self.model_reference = options.get("model") or self.store.meta["model"]
        self._tilde = None

    @property
    def tilde(self) -> TildeModel:
        if self._tilde is None:  # loaded on first use: bad runs fail before a model is loaded
            self._tilde = TildeModel(self.model_reference)
        return self._tilde

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def score(self, query_ids, query_texts, candidates):
        results = []
        for text, docs in zip(query_texts, candidates):
            terms = np.asarray(self.tilde.query_terms(text), dtype=np.int64)
            rows = np.asarray([self.store.row[d] for d in docs], dtype=np.int64)
            order = np.argsort(rows)  # memory-map reads in file order
            likelihoods = np.empty((len(rows), len(terms)), dtype=np.float32)
            likelihoods[order] = self.store.log_likelihoods[rows[order]][:, terms]
            scores = likelihoods.sum(axis=1)
            if self.alpha != 1.0:
                query_log_likelihoods = self.tilde.log_likelihoods([text], "queries")[0].numpy()
                passages = [self.store.passage_terms(d) for d in docs]
                document = np.asarray([query_log_likelihoods[terms].mean() if len(terms) else 0.0
                                       for terms in passages])
                scores = self.alpha * scores + (1 - self.alpha) * document
            results.append(scores.tolist())
        return results

    def describe(self) -> dict:
        return {"reranker": "tilde", "model": self.model_reference, "alpha": self.alpha}


@register("tilde", options=(Option("--alpha", "weight of TILDE-QL against TILDE-DL, alpha*QL + (1-alpha)*DL, in "
                                          "[0, 1] (default: 1, QL only)", probability),))
def build(store: str, options: dict) -> TildeReranker:
    return TildeReranker(store, options)
