"""From embeddings to SAE codes to pseudo-terms: the one place documents and queries are coded.

A token's code is the (indices, values) of its K active neurons; a document's pseudo-term vector
keeps, for each neuron active in any of its tokens, the largest activation (`s<n>`), plus the
[CLS] code (`c<n>`) when the model says so. A query's vector sums its tokens' activations per
neuron, each token keeping only the adaptive K (see :func:`sae.adaptive_k`) largest, so Lucene's
impact score sum_n q_n d_n is an upper-bound style first stage for SSR's exact score.
"""
from __future__ import annotations

import numpy as np
import torch

from .sae import SSRModel, adaptive_k

TOKEN_PREFIX, CLS_PREFIX = "s", "c"
CODE_BATCH = 8192


@torch.inference_mode()
def codes(sae, rows: np.ndarray, k: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(indices int64, values float32), len(rows) x k, computed in batches on the SAE's device (float32)."""
    width = min(k or sae.k, sae.k)
    device = sae.W_enc.device
    indices = np.zeros((len(rows), width), dtype=np.int64)
    values = np.zeros((len(rows), width), dtype=np.float32)
    for start in range(0, len(rows), CODE_BATCH):
        batch = torch.from_numpy(np.asarray(rows[start:start + CODE_BATCH], dtype=np.float32))
        i, v = sae.encode(batch if device.type == "cpu" else batch.to(device), width)
        indices[start:start + len(batch)], values[start:start + len(batch)] = i.cpu().numpy(), v.cpu().numpy()
    return indices, values


def pseudo_terms(indices: np.ndarray, values: np.ndarray, prefix: str, reduce: str) -> dict[str, float]:
    """{prefix+neuron: max (reduce='max') or sum ('sum') of its activations}; zero activations dropped."""
    flat_i, flat_v = indices.ravel(), values.ravel()
    keep = flat_v > 0
    flat_i, flat_v = flat_i[keep], flat_v[keep]
    if not len(flat_i):
        return {}
    neurons, inverse = np.unique(flat_i, return_inverse=True)
    totals = np.zeros(len(neurons), dtype=np.float64)
    (np.maximum if reduce == "max" else np.add).at(totals, inverse, flat_v)
    return {f"{prefix}{n}": float(w) for n, w in zip(neurons.tolist(), totals.tolist())}


def document_terms(model: SSRModel, token_codes, cls_codes) -> dict[str, float]:
    vector = pseudo_terms(*token_codes, TOKEN_PREFIX, "max")
    if model.settings["cls_terms"]:
        vector.update(pseudo_terms(*cls_codes, CLS_PREFIX, "max"))
    return vector


def query_terms(model: SSRModel, tokens: np.ndarray, pooled: np.ndarray) -> dict[str, float]:
    k = adaptive_k(model, len(tokens))
    vector = pseudo_terms(*codes(model.token_sae, tokens, k), TOKEN_PREFIX, "sum")
    if model.settings["cls_terms"]:
        vector.update(pseudo_terms(*codes(model.cls_sae, pooled[None, :]), CLS_PREFIX, "sum"))
    return vector


class SSRCoder:
    """An SSR model with its backbone, loaded from the model folder (the backbone on first use)."""

    def __init__(self, path: str, backbone_model: str | None = None):
        from ...core.devices import current

        self.model = SSRModel.load(path)
        self.backbone_model = backbone_model
        self.placement = current()  # where the backbone runs when first used (core/devices.py)
        self._backbone = None

    @property
    def backbone(self):
        if self._backbone is None:
            from ...core.devices import placed
            from ...core.errors import InputError
            from .backbone import TokenEncoder

            settings = dict(self.model.backbone)
            if self.backbone_model:
                settings["model"] = self.backbone_model
            with placed(self.placement):
                self._backbone = TokenEncoder(**settings)
            if self._backbone.dim != self.model.token_sae.input_dim:
                raise InputError(f"SAE input size {self.model.token_sae.input_dim} does not match the backbone "
                                 f"{settings['model']!r} (embedding size {self._backbone.dim})")
        return self._backbone

    def embed(self, texts: list[str], side: str):
        return self.backbone.encode(texts, side)
