"""Dense text encoders: transformer encoders (CLS or mean pooling) mapping texts to float32 rows.

:class:`TransformerDenseEncoder` serves any sentence-transformers or Hugging Face encoder (pooling
and normalisation are read from a sentence-transformers folder when present);
:func:`build_dense_encoder` rebuilds the query encoder a dense store's manifest describes
(transformer, PromptReps or BGE-M3), so queries always match the stored documents. The store
itself lives in `lsr_pyserini/stores/dense.py`.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...core.errors import InputError
from ...core.hf import sentence_transformers_defaults
from ...core.records import current_record, current_settings
from ...kernels.int8 import describe as describe_quantize

from ..registry import DENSE_SIDES, dense_side, load_families
from .config import POOLINGS



class TransformerDenseEncoder:
    """Texts -> L2-normalised (optional) CLS or mean-pooled last hidden states, float32."""

    def __init__(self, model: str, **settings):
        from transformers import AutoModel

        from ...core.devices import current
        from ...core.hf import load_tokenizer, model_error, quiet_loading
        from ...core.presets import resolve_model
        from ...kernels.int8 import quantize_linears
        from .config import SCHEMA

        settings = current_settings("dense", settings)  # `pooling=` of before is `pooling_mode`
        config = SCHEMA.complete({"model": model, **settings}, "dense encoder")
        pooling_mode, normalize, max_length = config["pooling_mode"], config["normalize"], config["max_length"]
        query_prefix, doc_prefix, quantize = config["query_prefix"], config["doc_prefix"], config["quantize"]

        self.model_reference = model
        self.path = resolve_model(model)
        defaults = sentence_transformers_defaults(self.path) if Path(self.path).is_dir() else {}
        self.pooling_mode = pooling_mode or defaults.get("pooling_mode", "cls")
        if self.pooling_mode not in POOLINGS:
            raise InputError(f"pooling_mode {self.pooling_mode!r} is not one of {', '.join(POOLINGS)}")
        self.normalize = bool(defaults.get("normalize", False) if normalize is None else normalize)
        weights = defaults.get("transformer_path", self.path)
        self.tokenizer = load_tokenizer(weights)
        self.placement = current()  # the device and dtype the model runs on (core/devices.py)
        try:
            with quiet_loading():  # no loading bar from the library (core/hf.py)
                self.model = self.placement.to(AutoModel.from_pretrained(weights)).eval()
        except Exception as err:
            raise model_error(self.path, err) from None
        self.quantize = quantize
        if self.quantize == "int8":  # every Linear of the transformer: dynamic int8 (kernels/int8.py)
            quantize_linears(self.model.float())
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = int(max_length or defaults.get("max_length") or min(limit, 512))
        # None: the folder's prompts (a store's manifest records the prefixes used, "" included)
        self.prefixes = {"queries": defaults.get("query_prefix") or "" if query_prefix is None else query_prefix,
                         "documents": defaults.get("doc_prefix") or "" if doc_prefix is None else doc_prefix}
        self.dim = int(self.model.config.hidden_size)
        # one query per forward pass on the CPU in float32 (or int8): a checked trace (kernels/fastpath.py)
        from ...kernels.fastpath import TracedForward

        self._traced = TracedForward(lambda ids: self.model(input_ids=ids).last_hidden_state,
                                     lambda encoded: self.model(**encoded).last_hidden_state, self.model) \
            if self.placement.on_cpu and not self.placement.half else None

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        import torch

        prefix = self.prefixes[side]
        encoded = self.tokenizer([prefix + t for t in texts], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
        encoded = self.placement.to(encoded)
        with torch.inference_mode(), self.placement.autocast():
            if side == "queries" and len(texts) == 1 and self._traced is not None:
                hidden = self._traced(encoded).float()
            else:
                hidden = self.model(**encoded).last_hidden_state.float()
        if self.pooling_mode == "cls":
            vectors = hidden[:, 0]
        else:
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=-1)
        return vectors.cpu().numpy().astype(np.float32, copy=False)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, "documents")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, "queries")

    def describe(self) -> dict:
        return {"family": "dense", "model": self.model_reference, "pooling_mode": self.pooling_mode,
                "normalize": self.normalize, "max_length": self.max_length,
                "query_prefix": self.prefixes["queries"], "doc_prefix": self.prefixes["documents"],
                **self.placement.identity(), **describe_quantize(self.quantize, "every Linear of the transformer")}


def build_dense_encoder(settings: dict, overrides: dict | None = None):
    """The encoder a store's manifest describes; ``overrides`` (e.g. ``model``: another location of
    the same checkpoint) replace its settings where not None."""
    settings = {**settings, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    for recorded_only in ("quantize_backend", "quantize_scope"):  # a store's int8 record: `quantize` rebuilds it
        settings.pop(recorded_only, None)
    settings = current_record(settings)  # a manifest of before: family "transformer", dense "pooling"
    family = settings.pop("family", None)
    if family != "promptreps":  # the documents' dtype; queries run in the current placement's
        settings.pop("dtype", None)
    load_families()  # each family registers its dense side (models/registry.py)
    if family not in DENSE_SIDES:
        raise InputError(f"unknown dense encoder family {family!r} (known: {', '.join(sorted(DENSE_SIDES))})")
    return DENSE_SIDES[family](settings)


@dense_side("dense")
def dense_family_side(settings: dict) -> "TransformerDenseEncoder":
    return TransformerDenseEncoder(**settings)
