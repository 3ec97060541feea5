"""SparseEmbed re-ranking: the query's activated terms and embeddings (one forward pass) against
the candidates' term embeddings read from the memory-mapped SparseEmbed store; the score sums
e^Q . e^D over the terms both sides activated. The query model is the one the store records
(``--model`` relocates it); a store written by another model or H' is refused before scoring."""
from __future__ import annotations

from .encoder import SparseEmbedEncoder
from ...stores.sparseembed import SparseEmbedStore
from ..registry import reranker as register
from ..base import Reranker


class SparseEmbedReranker(Reranker):
    def __init__(self, store: str, options: dict):
        self.store = SparseEmbedStore(store)
        settings = self.store.meta.get("encoder", {})
        # queries as the store's documents were encoded (lengths, cuts, int8 filter or float32); a setting
        # an older store does not record takes the family's default
        self.settings = {"model": options.get("model") or self.store.identity["model"],
                         **{key: settings.get(key) for key in ("query_max_length", "query_top_k", "quantize")}}
        self.batch_size = int(options.get("batch_size") or 32)
        self._encoder = None

    @property
    def encoder(self) -> SparseEmbedEncoder:
        if self._encoder is None:
            encoder = SparseEmbedEncoder(**self.settings)
            self.store.check_model(encoder.identity())
            self._encoder = encoder
        return self._encoder

    def missing(self, docids: set[str]) -> list[str]:
        self.encoder  # noqa: B018  (a store from another model is refused before anything else)
        return self.store.missing(sorted(docids))

    def score(self, query_ids, query_texts, candidates):
        results = []
        for start in range(0, len(query_texts), self.batch_size):
            encoded = self.encoder.terms_and_embeddings(query_texts[start:start + self.batch_size], "queries")
            for (_, terms, embeddings), docs in zip(encoded, candidates[start:start + self.batch_size]):
                results.append(self.store.scores(terms, embeddings, docs).tolist())
        return results

    def describe(self) -> dict:
        return {"reranker": "sparseembed", "store": str(self.store.path), **self.store.identity}


@register("sparseembed")
def build(store: str, options: dict) -> SparseEmbedReranker:
    return SparseEmbedReranker(store, options)
