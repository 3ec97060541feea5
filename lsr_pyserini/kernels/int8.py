"""Dynamic int8 inference on CPU (`encode ... --quantize int8`), applied to a model after loading.

Two tools, both PyTorch's dynamic int8 kernels (fbgemm/onednn on x86: int8 weights quantised once,
per output channel; activations quantised per call from their range):

* `quantize_linears(module)`: every `nn.Linear` of a module replaced by its dynamic int8 version
  (dense encoders, TILDEv2's encoder). Approximate: outputs move by the quantisation error.
* `Int8Projection`: the vocabulary projection of SPLADE-like models (hidden -> |V|, most of a small
  model's FLOPs), used as a *filter*: int8 logits give each term's maximum over positions up to a
  proven error bound; only the terms whose bound can reach the threshold (weight > 0, or the top
  k) are projected again in float32. The result equals the float32 projection (up to summation
  order) at a fraction of the float32 cost, because a document activates a few hundred of 30,522
  terms. Measured on SciFact in docs/quantization.md, which also explains why the transformer
  layers of a SPLADE model stay float32 (any one of them in int8 already moves most impacts).

`torch.ao.quantization` is deprecated upstream but is what torch 2.13's CPU wheel ships; its
warnings are silenced here. The settings a manifest records are `describe()`.
"""
from __future__ import annotations

import warnings

import torch

from ..core.errors import InputError

from . import QUANTIZE_CHOICES  # its values, declared without torch
SLICE = 4096  # vocabulary rows per int8 projection call (the float32 path's VOCAB_SLICE)


def checked_quantize(value: str | None) -> str:
    value = value or "none"
    if value not in QUANTIZE_CHOICES:
        raise InputError(f"quantize {value!r} is not one of {', '.join(QUANTIZE_CHOICES)}")
    return value


def backend(engine: str | None = None) -> str:
    return f"torch-{torch.__version__.split('+')[0]}-{engine or torch.backends.quantized.engine}"


def describe(value: str, scope: str, engine: str | None = None) -> dict:
    """What a manifest records: nothing for float32 (older manifests stay valid), else the scheme."""
    return {} if value == "none" else {"quantize": value, "quantize_backend": backend(engine), "quantize_scope": scope}


# oneDNN's int8 kernels were ~2x float32 on the projection's shape (rows x 128 -> 4096) on an AVX2
# EPYC, fbgemm's ~1.3x; the packed weights carry their engine, so calls need no global switch.
PROJECTION_ENGINE = "onednn"


def projection_engine() -> str:
    engines = torch.backends.quantized.supported_engines
    return PROJECTION_ENGINE if PROJECTION_ENGINE in engines else torch.backends.quantized.engine


def _dynamic_linear(linear: torch.nn.Linear, engine: str | None = None):
    from torch.ao.nn.quantized.dynamic import Linear as DynamicLinear
    from torch.ao.quantization import per_channel_dynamic_qconfig

    previous = torch.backends.quantized.engine
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            torch.backends.quantized.engine = engine or previous
            linear.qconfig = per_channel_dynamic_qconfig
            return DynamicLinear.from_float(linear)
        finally:
            torch.backends.quantized.engine = previous


def quantize_linears(module: torch.nn.Module, skip=()) -> torch.nn.Module:
    """Replace every nn.Linear below `module` (except those in `skip`) by a dynamic int8 one, in place."""
    skipped = {id(m) for m in skip}
    for name, child in list(module.named_children()):
        if isinstance(child, torch.nn.Linear) and id(child) not in skipped:
            setattr(module, name, _dynamic_linear(child))
        else:
            quantize_linears(child, skip)
    return module


class Int8Projection:
    """Rows x |V| logits `hidden @ weight.T` in int8, with a per-term bound on their error, and the
    exact float32 maximum over rows for the terms that can pass a threshold."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor | None = None):
        weight = weight.detach().float().contiguous()
        self.weight = weight
        self.bias = torch.zeros(weight.shape[0]) if bias is None else bias.detach().float()
        self.slices = []
        for start in range(0, weight.shape[0], SLICE):
            linear = torch.nn.Linear(weight.shape[1], min(SLICE, weight.shape[0] - start), bias=False)
            linear.weight.data = weight[start:start + SLICE].clone()
            self.slices.append(_dynamic_linear(linear, projection_engine()))
        # |w_i - q(w_i)| <= s_i / 2 per component, s_i = max|w_i| / 127 (symmetric, per channel)
        self.weight_step = weight.abs().amax(1) / 127.0
        self.weight_l1 = weight.abs().sum(1) + weight.shape[1] * self.weight_step / 2

    def approximate_max(self, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(max over rows of the int8 logits, per-term bound on |that - the float32 max|), |V| each."""
        rows = rows.float().contiguous()
        approx = torch.cat([linear(rows).amax(0) for linear in self.slices])
        # |x - q(x)| <= s_x / 2, s_x = range / 127 (7-bit activations on x86; 8-bit only tightens it)
        input_step = (rows.max().clamp(min=0) - rows.min().clamp(max=0)) / 127.0
        bound = input_step / 2 * self.weight_l1 + self.weight_step / 2 * rows.abs().sum(1).max()
        return approx, bound * 1.25 + 1e-4  # slack for float32 rounding inside the kernels

    def exact_max(self, rows: torch.Tensor, terms: torch.Tensor) -> torch.Tensor:
        """The float32 max over rows of the logits of `terms` (bias not added)."""
        return (rows.float() @ self.weight[terms].T).amax(0)

    def max_logits(self, rows: torch.Tensor, threshold: float = 0.0) -> tuple[torch.Tensor, torch.Tensor]:
        """(terms, their exact float32 max logit + bias) for every term whose max logit + bias may
        exceed `threshold`; every other term's is proven <= threshold."""
        approx, bound = self.approximate_max(rows)
        terms = torch.nonzero(approx + self.bias + bound > threshold, as_tuple=True)[0]
        return terms, self.exact_max(rows, terms) + self.bias[terms]

    def top_max_logits(self, rows: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
        """(terms, exact max logit + bias) of the k terms with the largest max logit + bias."""
        approx, bound = self.approximate_max(rows)
        score = approx + self.bias
        k = min(int(k), score.numel())
        kth_low = torch.topk(score - bound, k).values[-1]
        terms = torch.nonzero(score + bound >= kth_low, as_tuple=True)[0]
        exact = self.exact_max(rows, terms) + self.bias[terms]
        best = torch.topk(exact, min(k, exact.numel())).indices
        return terms[best], exact[best]
