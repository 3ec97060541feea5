"""TILDE re-ranking (Zhuang & Zuccon, SIGIR 2021), as the TILDE code (ielab/TILDE inference.py)
scores a candidate:

    QL = sum over the query's tokens q_i of log P(q_i | d)      (read from the TILDE store)
    DL = mean over all the passage's tokens d_j of log P(d_j | q)  (one query forward pass)
    score = alpha * QL + (1 - alpha) * DL,  alpha = 1 by default (`--alpha`: TILDE-QL alone)

P(t | x) = sigmoid of the MLM head's logit for t at x's first position; tokens are those of
`TildeModel.scored_terms` (stop words, punctuation and special tokens left out, repeats kept). The
store holds log P(t | d) and each passage's tokens, written at expansion time (`expand --store`).
Interpolation with the first stage's scores is the `rerank --interpolate` option shared by all
re-rankers."""
from __future__ import annotations

import numpy as np
import torch

from ...core.errors import InputError
from ...core.options import probability
from .model import TildeModel, query_likelihoods
from ...stores.tilde import PASSAGE_TERMS, TildeStore
from ..base import Option
from ..registry import reranker as register
from ..base import Reranker


class TildeReranker(Reranker):
    def __init__(self, store: str, options: dict):
        self.store = TildeStore(store)
        self.alpha = float(options.get("alpha") if options.get("alpha") is not None else 1.0)
        if not 0.0 <= self.alpha <= 1.0:
            raise InputError(f"--alpha must be in [0, 1], got {self.alpha}")
        if self.alpha != 1.0 and self.store.meta.get("passage_terms") != PASSAGE_TERMS:
            raise InputError(f"{store}: its passage terms stop at 64 tokens (written by an older `expand --store`); "
                             f"rebuild it for TILDE-DL (--alpha below 1)")
        self.model_reference = options.get("model") or self.store.meta["model"]
        self._tilde = None

    @property
    def tilde(self) -> TildeModel:
        if self._tilde is None:  # loaded on first use: bad runs fail before a model is loaded
            self._tilde = TildeModel(self.model_reference)
        return self._tilde

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def query_likelihood(self, text: str, docs: list[str]) -> np.ndarray:
        """QL of each candidate: sum over the query's tokens of the stored log P(q_i | d)."""
        terms, counts = np.unique(np.asarray(self.tilde.scored_terms(text), dtype=np.int64), return_counts=True)
        rows = np.asarray([self.store.row[d] for d in docs], dtype=np.int64)
        order = np.argsort(rows)  # memory-map reads in file order
        likelihoods = np.empty((len(rows), len(terms)), dtype=np.float32)
        likelihoods[order] = self.store.log_likelihoods[rows[order]][:, terms]
        counts = torch.from_numpy(counts.astype(np.float32))[None]
        return query_likelihoods(counts, torch.from_numpy(likelihoods))[0].numpy()

    def document_likelihood(self, text: str, docs: list[str]) -> np.ndarray:
        """DL of each candidate: mean over the passage's stored tokens of log P(d_j | q)."""
        query_log_likelihoods = self.tilde.log_likelihoods([text], "queries")[0].numpy()
        return np.asarray([query_log_likelihoods[terms].mean() if len(terms) else 0.0
                           for terms in map(self.store.passage_terms, docs)], dtype=np.float32)

    def score(self, query_ids, query_texts, candidates):
        results = []
        for text, docs in zip(query_texts, candidates):
            scores = self.query_likelihood(text, docs)
            if self.alpha != 1.0:
                scores = self.alpha * scores + (1 - self.alpha) * self.document_likelihood(text, docs)
            results.append(scores.tolist())
        return results

    def describe(self) -> dict:
        return {"reranker": "tilde", "model": self.model_reference, "alpha": self.alpha}


@register("tilde", options=(Option("--alpha", "weight of TILDE-QL against TILDE-DL, alpha*QL + (1-alpha)*DL, in "
                                          "[0, 1] (default: 1, QL only)", probability),))
def build(store: str, options: dict) -> TildeReranker:
    return TildeReranker(store, options)
