"""Single-query fast paths (one query per forward pass, as `encode queries`, `Searcher` and
Pyserini's searchers run them), used only where they give the same numbers:

* `TracedForward`: a model's forward up to some tensor, run through a TorchScript trace instead of
  Python module calls. A 2-layer BERT spends most of a short query in Python (about 50 module
  calls, config lookups, mask building); the trace runs the same ATen kernels without them. The
  trace is recorded on the first query; the first `CHECKS` queries of other lengths are also run
  eagerly and compared bit for bit, and any difference (or a failed trace) turns the trace off for
  good, so the eager numbers are what it returns.
* `BlasProjection`: `max over positions of positions @ W.T`, the vocabulary projection of a query,
  through numpy's OpenBLAS on a row-major `W.T` on AMD CPUs, where it measured 1.7x faster than
  torch's MKL sgemm for 20 positions x 128 -> 30,522 (docs/benchmarks.md, query encoding).
  `LSR_PYSERINI_PROJECTION=torch|numpy|auto` overrides the choice. It also serves an int8
  encoder's single queries on CPUs without int8 dot-product instructions (`int8_dot_products`),
  where it measured faster than the int8 filter, whose exact rescoring gives these same impacts.

Both run on the CPU in float32 only; the callers fall back to their eager code elsewhere.
"""
from __future__ import annotations

import os
import warnings
from functools import lru_cache

import numpy as np
import torch

from .environment import cpuinfo_field

CHECKS = 4  # queries of new lengths compared with the eager forward before the trace is trusted
PROJECTION_CHOICES = ("auto", "torch", "numpy")


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


class BlasProjection:
    """max over rows of `positions @ weight.T` (positions x hidden -> |V|) with numpy's BLAS,
    on as many BLAS threads as torch uses."""

    def __init__(self, weight: torch.Tensor):
        self.weight_t = np.ascontiguousarray(weight.detach().cpu().float().numpy().T)  # hidden x |V|

    def max_logits(self, positions: torch.Tensor) -> torch.Tensor:
        with _blas_threads(torch.get_num_threads()):
            logits = positions.detach().cpu().float().numpy() @ self.weight_t
        return torch.from_numpy(logits.max(axis=0))


def use_blas_projection() -> bool:
    """Whether the query projection goes through numpy's OpenBLAS (see the module's description)."""
    choice = os.environ.get("LSR_PYSERINI_PROJECTION", "auto")
    if choice not in PROJECTION_CHOICES:
        from .errors import InputError

        raise InputError(f"LSR_PYSERINI_PROJECTION={choice!r}: expected one of {', '.join(PROJECTION_CHOICES)}")
    if choice != "auto":
        return choice == "numpy" and _blas_controller() is not None
    return cpuinfo_field("vendor_id") == "AuthenticAMD" and _blas_controller() is not None


def int8_dot_products() -> bool:
    """Whether the CPU multiplies int8 in dot-product instructions (AVX-512 VNNI, AVX-VNNI, AMX).
    Without them, a single query's int8 vocabulary filter was slower than the float32 OpenBLAS
    projection on two AVX2 EPYCs (10.2 against 8.8 ms, 17.1 against 13.7); with them, faster on a
    Xeon (3.5 against 4.7 ms; docs/benchmarks.md, query encoding)."""
    return bool(set(cpuinfo_field("flags").split()) & {"avx512_vnni", "avx_vnni", "amx_int8"})


@lru_cache(maxsize=1)
def _blas_controller():
    """threadpoolctl's controller of numpy's OpenBLAS, or None (no threadpoolctl, another BLAS)."""
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    for library in ThreadpoolController().select(user_api="blas").lib_controllers:
        if library.internal_api == "openblas" and "numpy" in library.filepath:
            return library
    return None


class _blas_threads:
    """Set numpy's OpenBLAS to `threads` threads for a block, then back (a few ctypes calls)."""

    def __init__(self, threads: int):
        self.threads = max(int(threads), 1)

    def __enter__(self):
        self.library = _blas_controller()
        if self.library is not None:
            self.before = self.library.get_num_threads()
            if self.before != self.threads:
                self.library.set_num_threads(self.threads)

    def __exit__(self, *_):
        if self.library is not None and self.before != self.threads:
            self.library.set_num_threads(self.before)
