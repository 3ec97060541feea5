"""Single-query fast paths (one query per forward pass, as `encode queries`, `Searcher` and
Pyserini's searchers run them), used only where they give the same numbers:

* `TracedForward`: a model's forward up to some tensor, run through a TorchScript trace instead of
  Python module calls. A 2-layer BERT spends most of a short query in Python (about 50 module
  calls, config lookups, mask building); the trace runs the same ATen kernels without them. The
  trace is recorded on the first query; the first `CHECKS` queries of other lengths are also run
  eagerly and compared bit for bit, and any difference (or a failed trace) turns the trace off for
  good, so the eager numbers are what it returns.
* `PackedProjection`: `max over positions of positions @ W.T`, the vocabulary projection of a
  query, through oneDNN with `W` reordered once into its blocked layout. torch's own product packs
  the 15.6 MB of a 30,522 x 128 `W` again on every call; without that, a 23-position query's
  projection took 5.3 ms instead of 8.0 on a Zen 1 EPYC (numpy's OpenBLAS, the fast path before
  it: 7.3; docs/benchmarks.md, query encoding). Its maxima are compared with the eager ones on
  the first query of each length, which it then serves only if they were equal bit for bit. It
  also serves an int8 encoder's single queries on CPUs without int8 dot-product instructions
  (`int8_dot_products`), where it is faster than the int8 filter, whose exact rescoring gives
  these same impacts. `LSR_PYSERINI_PROJECTION=torch` turns it off.

Both run on the CPU in float32 only; the callers fall back to their eager code elsewhere.
"""
from __future__ import annotations

import os
import warnings

import torch

from ..core.environment import cpuinfo_field

CHECKS = 4  # queries of new lengths compared with the eager forward before the trace is trusted
PROJECTION_CHOICES = ("auto", "torch")


class TracedForward:
    """`eager(encoded)` of one unpadded text, run as a trace of `forward(input_ids)` once checked.

    `encoded` is a tokenizer's batch of one (`input_ids`, optionally an all-ones `attention_mask`
    and all-zero `token_type_ids`, which are the model's defaults); anything else runs `eager`."""

    def __init__(self, forward, eager, model: torch.nn.Module):
        self.forward, self.eager, self.model = forward, eager, model
        self.trace = None
        self.enabled = os.environ.get("LSR_PYSERINI_TRACE", "1") != "0"
        self.checked: set[int] = set()

    def __call__(self, encoded) -> torch.Tensor:
        input_ids = encoded["input_ids"]
        if not (self.enabled and _defaults_only(encoded)):
            return self.eager(encoded)
        if self.trace is None:
            try:
                with warnings.catch_warnings(), _quiet_transformers():
                    warnings.simplefilter("ignore")  # TracerWarnings about shapes turned into constants
                    self.trace = torch.jit.trace(_Module(self.forward, self.model), (input_ids,),
                                                 check_trace=False)
            except Exception:  # an architecture the tracer cannot follow: stay eager
                self.enabled = False
                return self.eager(encoded)
        length = int(input_ids.shape[-1])
        if len(self.checked) < CHECKS and length not in self.checked:
            expected = self.eager(encoded)
            try:
                traced = self.trace(input_ids)
            except Exception:
                traced = None
            if traced is None or not torch.equal(traced, expected):
                self.enabled = False
            self.checked.add(length)
            return expected
        return self.trace(input_ids)


class _quiet_transformers:
    """transformers' logging at error level for a block (tracing re-reads the config, which warns)."""

    def __enter__(self):
        try:
            from transformers.utils import logging
        except ImportError:
            self.logging = None
            return
        self.logging, self.before = logging, logging.get_verbosity()
        logging.set_verbosity_error()

    def __exit__(self, *_):
        if self.logging is not None:
            self.logging.set_verbosity(self.before)


def _defaults_only(encoded) -> bool:
    """A batch of one whose other inputs are the values the model assumes when they are left out."""
    if set(encoded) - {"input_ids", "attention_mask", "token_type_ids"} or encoded["input_ids"].shape[0] != 1:
        return False
    mask, types = encoded.get("attention_mask"), encoded.get("token_type_ids")
    return (mask is None or bool(mask.all())) and (types is None or not bool(types.any()))


class _Module(torch.nn.Module):
    """`forward` as a module owning `model`, so that the trace takes its weights as parameters."""

    def __init__(self, forward, model: torch.nn.Module):
        super().__init__()
        self.model = model
        self.forward_function = forward

    def forward(self, input_ids):
        return self.forward_function(input_ids)


class PackedProjection:
    """`eager(positions)`, the max over rows of `positions @ weight.T` (positions x hidden -> |V|),
    computed by oneDNN on a copy of `weight` reordered once, on torch's threads.

    Whether the two give the same bits depends on the shape and the thread count (which kernel,
    how the sums are split), not on the values: the first query of each (length, threads) runs
    both, and that length runs the packed product from then on only if they were equal (measured
    on a Zen 1 EPYC with hidden 128: never for 1-3 positions, nor for 5-7 and 9-11 with 2 threads;
    with hidden 384, for no length). When the first `CHECKS` of them all differ, the packed copy is
    dropped and every query runs eagerly."""

    def __init__(self, weight: torch.Tensor, eager):
        self.eager = eager
        try:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().cpu().float().contiguous(), None)
        except Exception:  # a torch without these oneDNN operators: every query runs eagerly
            self.packed = None
        self.verdicts: dict[tuple[int, int], bool] = {}  # (length, threads) -> same bits as eager

    def logits(self, positions: torch.Tensor) -> torch.Tensor:
        return torch.ops.mkldnn._linear_pointwise(positions.float().contiguous(), self.packed, None, "none", [], "")

    def __call__(self, positions: torch.Tensor) -> torch.Tensor:
        key = (int(positions.shape[0]), torch.get_num_threads())
        verdict = self.verdicts.get(key)
        if verdict:
            return self.logits(positions).amax(0)
        expected = self.eager(positions)
        if verdict is None and self.packed is not None:
            try:
                self.verdicts[key] = torch.equal(self.logits(positions).amax(0), expected)
            except Exception:  # a torch whose oneDNN operators differ: this length stays eager
                self.verdicts[key] = False
            if len(self.verdicts) == CHECKS and not any(self.verdicts.values()):
                self.packed = None  # never the same bits here: eager from now on
        return expected


def use_packed_projection() -> bool:
    """Whether single queries project through `PackedProjection` (see the module's description)."""
    choice = os.environ.get("LSR_PYSERINI_PROJECTION", "auto")
    if choice not in PROJECTION_CHOICES:
        from ..core.errors import InputError

        raise InputError(f"LSR_PYSERINI_PROJECTION={choice!r}: expected one of {', '.join(PROJECTION_CHOICES)}")
    return choice == "auto" and torch.backends.mkldnn.is_available()


def int8_dot_products() -> bool:
    """Whether the CPU multiplies int8 in dot-product instructions (AVX-512 VNNI, AVX-VNNI, AMX).
    Without them, a single query's int8 vocabulary filter was slower than the float32 fast
    projection (then numpy's OpenBLAS) on two AVX2 EPYCs (10.2 against 8.8 ms, 17.1 against 13.7);
    with them, faster than torch's float32 product on a Xeon (3.5 against 4.7 ms;
    docs/benchmarks.md, query encoding)."""
    return bool(set(cpuinfo_field("flags").split()) & {"avx512_vnni", "avx_vnni", "amx_int8"})
