"""Compiled kernels (numba), in one place: whether they run and how they are compiled.

A kernel is a plain Python function of numpy arrays and numbers; `compiled(function)` returns it
compiled by numba (cached on disk, the GIL released), or None where numba is missing or
`LSR_PYSERINI_NUMBA=0`, so that the caller runs its numpy code instead. Every kernel here must give
its numpy twin's numbers bit for bit: the tests compare them.

numba leaves LLVM's SLP vectoriser off by default (`NUMBA_SLP_VECTORIZE`); the kernels are written
for it (straight-line float32 lanes that it packs into vector instructions, with no change of the
order of any addition and no fused multiply-add), so `compiled` turns it on while its kernels
compile: measured 1.5x on the SSR kernel (docs/benchmarks.md, re-ranking kernels).

`lowest_bit(x)` is for kernels: plain Python here, one `tzcnt` instruction once compiled.
`half_to_float()` is the float32 value of every float16 bit pattern: numba has no float16 type on
the CPU, so kernels read float16 arrays as their uint16 bits and look the value up (exact).
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from functools import lru_cache

_COMPILING = threading.Lock()


def enabled() -> bool:
    """Whether compiled kernels run: numba importable and not switched off by LSR_PYSERINI_NUMBA=0."""
    return _numba() is not None


@lru_cache(maxsize=1)
def half_to_float():
    import numpy as np

    return np.arange(1 << 16, dtype=np.uint16).view(np.float16).astype(np.float32)


def lowest_bit(x):
    """The position of the lowest set bit of the integer x > 0."""
    return (int(x) & -int(x)).bit_length() - 1


@lru_cache(maxsize=None)
def _numba():
    if os.environ.get("LSR_PYSERINI_NUMBA", "1") == "0":
        return None
    try:
        import numba
        from numba.cpython.unsafe.numbers import trailing_zeros
        from numba.extending import overload
    except ImportError:
        return None

    @overload(lowest_bit)
    def _lowest_bit(x):  # noqa: ARG001 (numba passes the argument's type)
        return lambda x: trailing_zeros(x)

    return numba


@contextmanager
def _slp_vectorization():
    from numba.core import config

    with _COMPILING:
        before = config.SLP_VECTORIZE
        config.SLP_VECTORIZE = 1
        try:
            yield
        finally:
            config.SLP_VECTORIZE = before


class Kernel:
    """A numba dispatcher whose compilations (one per new argument types, on first call or from the
    disk cache) run with the SLP vectoriser on."""

    def __init__(self, dispatcher):
        self.dispatcher = dispatcher
        self.known: set = set()

    def __call__(self, *args):
        types = tuple(self.dispatcher.typeof_pyval(a) for a in args)
        if types not in self.known:
            with _slp_vectorization():
                self.dispatcher.compile(types)
            self.known.add(types)
        return self.dispatcher(*args)


@lru_cache(maxsize=None)
def compiled(function) -> Kernel | None:
    """`function` compiled with numba (nopython, no bounds checks, GIL released, cached on disk),
    or None where compiled kernels are off (`enabled`)."""
    numba = _numba()
    if numba is None:
        return None
    return Kernel(numba.njit(nogil=True, boundscheck=False, cache=True)(function))
