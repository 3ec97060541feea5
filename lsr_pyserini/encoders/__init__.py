"""Sparse encoders: text in, `{term: float weight >= 0}` out, one side (documents or queries) at a time.

Quantising to integer impacts and writing files is not an encoder's job (see `writer.py`).
Each model family registers a builder in `FAMILIES`, called with the preset's settings.
"""
from __future__ import annotations

from typing import Callable

from .base import SparseEncoder

FAMILIES: dict[str, Callable[..., SparseEncoder]] = {}


def register(family: str):
    def decorator(builder):
        FAMILIES[family] = builder
        return builder

    return decorator


def build_encoder(settings: dict) -> SparseEncoder:
    """An encoder from preset settings (the `family` key picks the builder)."""
    from ..data import InputError
    from . import bgem3, bm25aug, promptreps, sparseembed, splade, ssr, tildev2  # noqa: F401  (each registers its family)

    family = settings.get("family")
    if family not in FAMILIES:
        raise InputError(f"unknown encoder family {family!r} (known: {', '.join(sorted(FAMILIES))})")
    return FAMILIES[family](settings)


__all__ = ["SparseEncoder", "build_encoder", "register", "FAMILIES"]
