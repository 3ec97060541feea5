"""The SPLADE encoder: `SpladeModel.represent` under inference mode, the weights as {term: weight}.

Inference-free queries (`query_mode: tokenizer`) use the tokenizer alone: each distinct token of
the query gets the weight from a per-term table (`query_weights`, e.g. an IDF JSON), or 1.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ...core.errors import InputError
from ...core.hf import model_error
from ...core.presets import resolve_model
from ...kernels.int8 import projection_engine
from ...kernels.int8 import describe as describe_quantize
from ..base import SparseEncoder, SparseVector
from ..exact_match import ExactMatch, merge
from ..registry import encoder as register
from .config import SCHEMA
from .model import SpladeModel


def read_query_weights(model_path: str, source: str | None) -> dict[str, float] | None:
    """The {term: weight} table of inference-free queries: `source` a file of the model folder (or
    of its hub repository) or a path; None when no table is named (every token weighs 1)."""
    if not source:
        return None
    path = Path(source)
    if not path.is_absolute() and (Path(model_path) / source).is_file():
        path = Path(model_path) / source
    elif not path.is_file() and not Path(model_path).exists():
        try:
            from huggingface_hub import hf_hub_download

            path = Path(hf_hub_download(model_path, source))
        except Exception as err:
            raise model_error(f"{model_path}/{source}", err) from None
    try:
        table = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise InputError(f"{path}: cannot read query weights ({err})") from None
    if not isinstance(table, dict):
        raise InputError(f"{path}: query weights must be a JSON object {{term: weight}}")
    return {str(k): float(v) for k, v in table.items()}


@register("splade")
class SpladeEncoder(SparseEncoder):
    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "splade encoder")
        self.config = config
        self.model_reference = model
        self.path = resolve_model(model)
        self.pooling = config["pooling"]
        self.top_k = {"documents": config["doc_top_k"], "queries": config["query_top_k"]}
        self.query_mode = config["query_mode"]
        self.quantize = config["quantize"]
        # documents always need the model, even for inference-free queries; float32 whatever dtype the
        # weights are stored in (core/hf.py)
        self.model = SpladeModel(self.path, config).eval()
        self.model.enable_fast_paths(self.quantize)
        self.tokenizer = self.model.tokenizer
        self.placement = self.model.placement
        self.max_length = self.model.max_length
        self.vocab = self.tokenizer.convert_ids_to_tokens(list(range(self.model.terms)))
        self.query_weights_source = config["query_weights"]
        self.query_weight_table = read_query_weights(self.path, config["query_weights"]) \
            if self.query_mode == "tokenizer" else None
        # BM25 folded into the impacts: the corpus statistics the checkpoint holds (models/exact_match.py)
        self.exact = ExactMatch.load(self.path, config["k1"], config["b"],
                                     config["exact_match_weight"]) if config["exact_match"] == "bm25" else None

    @torch.inference_mode()
    def term_weights(self, texts: list[str], side: str) -> torch.Tensor:
        """Dense batch x |V| SPLADE weights for `texts` (float32)."""
        return self.model.represent(texts, side)

    def _to_vectors(self, dense: torch.Tensor, side: str) -> list[SparseVector]:
        top_k = self.top_k[side]
        vectors = []
        for row in dense:
            if top_k:
                values, ids = torch.topk(row, min(int(top_k), row.numel()))
                keep = values > 0
                values, ids = values[keep], ids[keep]
            else:
                ids = torch.nonzero(row, as_tuple=True)[0]
                values = row[ids]
            vectors.append({self.vocab[i]: w for i, w in zip(ids.tolist(), values.tolist())})
        return vectors

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        vectors = self._to_vectors(self.term_weights(texts, "documents"), "documents")
        return vectors if self.exact is None else merge(vectors, self.exact.documents(texts))

    # -- query side --------------------------------------------------------------------------
    def _tokenizer_vectors(self, texts: list[str]) -> list[SparseVector]:
        vectors = []
        for text in texts:
            ids = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                 max_length=self.max_length["queries"])["input_ids"]
            vector = {}
            for token in dict.fromkeys(self.tokenizer.convert_ids_to_tokens(ids)):
                weight = self.query_weight_table.get(token, 0.0) if self.query_weight_table else 1.0
                if weight > 0:
                    vector[token] = weight
            top_k = self.top_k["queries"]
            if top_k and len(vector) > top_k:
                vector = dict(sorted(vector.items(), key=lambda kv: -kv[1])[: int(top_k)])
            vectors.append(vector)
        return vectors

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        if self.query_mode == "tokenizer":
            vectors = self._tokenizer_vectors(texts)
        else:
            vectors = self._to_vectors(self.term_weights(texts, "queries"), "queries")
        return vectors if self.exact is None else merge(vectors, self.exact.queries(texts))

    def describe(self) -> dict:
        return {
            "family": "splade",
            "model": self.model_reference,
            "model_path": self.path,
            "pooling": self.pooling,
            "doc_max_length": self.max_length["documents"],
            "query_max_length": self.max_length["queries"],
            "doc_top_k": self.top_k["documents"],
            "query_top_k": self.top_k["queries"],
            "query_mode": self.query_mode,
            "query_weights": self.query_weights_source,
            **({"exact_match": "bm25", "exact_match_weight": self.exact.weight, "k1": self.exact.k1,
                "b": self.exact.b} if self.exact is not None else {}),
            **self.placement.identity(),
            **describe_quantize(self.quantize, "vocabulary projection (int8 filter, exact float32 rescoring)",
                                projection_engine()),
        }

