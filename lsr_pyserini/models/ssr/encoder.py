"""SSR: token embeddings of a backbone, coded by TopK sparse autoencoders, neurons as pseudo-terms.

The model is an SSR model folder (`python -m lsr_pyserini.ssr fit`, see lsr_pyserini/ssr/). Queries
are the usual path (`encode queries --encoder ssr --model DIR`); documents normally go through
`python -m lsr_pyserini.ssr index`, which codes a token store once and also writes the code store
for exact re-ranking. `encode corpus` works too (same pseudo-terms, no code store).
"""
from __future__ import annotations

from ...core.errors import InputError
from .codes import SSRCoder, codes, document_terms, query_terms
from ..registry import encoder as register
from .config import RETRIEVAL, SCHEMA
from ..base import SparseEncoder, SparseVector


@register("ssr")
class SSREncoder(SparseEncoder):
    def __init__(self, model: str | None = None, **settings):
        """`settings`: the family's (config.py); the retrieval settings not given are the model folder's."""
        config = SCHEMA.complete({"model": model, **settings}, "ssr encoder")
        if not model:
            raise InputError("ssr: no SSR model folder: train one with `python -m lsr_pyserini.ssr fit` "
                             "and pass it with --model")
        from ...core.presets import resolve_model

        self.model_reference = model
        self.coder = SSRCoder(resolve_model(model), config["backbone"])
        self.coder.model = self.coder.model.with_settings(**{k: config[k] for k in RETRIEVAL.names})

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        model = self.coder.model
        return [document_terms(model, codes(model.token_sae, tokens), codes(model.cls_sae, pooled[None, :]))
                for pooled, tokens in self.coder.embed(texts, "documents")]

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        return [query_terms(self.coder.model, tokens, pooled) for pooled, tokens in self.coder.embed(texts, "queries")]

    def describe(self) -> dict:
        model = self.coder.model
        return {"family": "ssr", "model": self.model_reference, "backbone": model.backbone,
                "token_sae": model.token_sae.describe(), "cls_sae": model.cls_sae.describe(), **model.settings}

