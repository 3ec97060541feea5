"""The multi-vector backbone SSR sparsifies: per-token embeddings of any Hugging Face encoder.

Each text gives its ordinary tokens' embeddings (special tokens and padding left out) and one
single vector for the [CLS] SAE: the model's pooled sentence vector (the sentence-transformers
pooling when the folder has one, e.g. mean for MiniLM, else the [CLS] position). An optional
linear projection (ColBERT's ``linear.weight``, found in the checkpoint) maps hidden states to a
smaller space, and vectors are L2-normalised, so MaxSim of token vectors is a sum of cosines.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ...core.errors import InputError
from ...core.devices import current
from ...core.hf import load_quietly, load_tokenizer, sentence_transformers_defaults
from ...core.presets import resolve_model
from ..shared_settings import QUERY_MAX_LENGTH

PROJECTION_KEY = "linear.weight"


def _projection(path: str) -> torch.Tensor | None:
    """ColBERT-style projection matrix (out x hidden) stored in the checkpoint, or None."""
    weights = Path(path) / "model.safetensors"
    if not weights.is_file():
        return None
    from safetensors import safe_open

    with safe_open(str(weights), framework="pt") as handle:
        return handle.get_tensor(PROJECTION_KEY).float() if PROJECTION_KEY in handle.keys() else None


class TokenEncoder:
    """Texts -> (pooled vector, token matrix) pairs, float32, L2-normalised."""

    def __init__(self, model: str, max_length: int | None = None, query_max_length: int | None = None,
                 pooling: str | None = None, projection: bool = True, **_ignored):
        from transformers import AutoModel

        self.model_reference = model
        self.path = resolve_model(model)
        defaults = sentence_transformers_defaults(self.path) if Path(self.path).is_dir() else {}
        weights = defaults.get("transformer_path", self.path)
        self.tokenizer = load_tokenizer(weights)
        self.placement = current()  # the device and dtype the backbone runs on (core/devices.py)
        self.model = load_quietly(AutoModel, weights, "encoder weights missing").eval()
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = {"documents": int(max_length or defaults.get("max_length") or min(limit, 512)),
                           "queries": int(query_max_length or QUERY_MAX_LENGTH.default)}
        self.pooling = pooling or defaults.get("pooling_mode", "cls")
        if self.pooling not in ("cls", "mean"):
            raise InputError(f"pooling {self.pooling!r} is not one of cls, mean")
        self.projection = _projection(weights) if projection else None
        hidden = int(self.model.config.hidden_size)
        if self.projection is not None and self.projection.shape[1] != hidden:
            raise InputError(f"model {model!r}: projection {tuple(self.projection.shape)} does not fit "
                             f"hidden size {hidden}")
        self.dim = int(self.projection.shape[0]) if self.projection is not None else hidden
        self.special = torch.tensor(sorted(set(self.tokenizer.all_special_ids)))

    def forward(self, texts: list[str], side: str):
        """Padded tensors: pooled (B x d), tokens (B x L x d), keep (B x L bool, ordinary tokens)."""
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                                 return_tensors="pt")
        with self.placement.autocast():  # the backbone only: pooling and projection stay float32
            hidden = self.model(**self.placement.to(encoded)).last_hidden_state.float().cpu()
        mask = encoded["attention_mask"].bool()
        if self.pooling == "cls":
            pooled = hidden[:, 0]
        else:
            weights = mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * weights).sum(1) / weights.sum(1).clamp(min=1.0)
        if self.projection is not None:
            hidden, pooled = hidden @ self.projection.T, pooled @ self.projection.T
        keep = mask & ~torch.isin(encoded["input_ids"], self.special)
        normalize = torch.nn.functional.normalize
        return normalize(pooled, dim=-1), normalize(hidden, dim=-1), keep

    @torch.inference_mode()
    def encode(self, texts: list[str], side: str) -> list[tuple[np.ndarray, np.ndarray]]:
        pooled, tokens, keep = self.forward(texts, side)
        return [(p.numpy(), t[k].numpy()) for p, t, k in zip(pooled, tokens, keep)]

    def describe(self) -> dict:
        return {"model": self.model_reference, "max_length": self.max_length["documents"],
                "query_max_length": self.max_length["queries"], "pooling": self.pooling,
                "projection": self.projection is not None, "dim": self.dim, **self.placement.identity()}
