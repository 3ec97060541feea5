"""Sparse encoders: text in, `{term: float weight >= 0}` out, one side (documents or queries) at a time.

Quantising to integer impacts and writing files is not an encoder's job (`core/writer.py`). Each
model family registers a builder in `FAMILIES`; `build_encoder` calls it with a preset's settings
and refuses a setting the builder does not read, naming it.
"""
from __future__ import annotations

import inspect
from typing import Callable

from ..core.errors import InputError
from ..core.presets import CHECKSUM_KEY
from .base import FAMILIES, SparseEncoder, register

# Preset keys read by the writer, the encoding loop and the preset loader, not by an encoder.
WRITER_KEYS = ("name", "family", "impact_scale", "query_impact_scale", "batch_size", CHECKSUM_KEY)


def _load_families() -> None:
    from . import bgem3, bm25aug, promptreps, sparseembed, splade, ssr, tildev2  # noqa: F401  (each registers its family)


def settings_read_by(family: str) -> list[str]:
    """The preset keys a family's encoder reads (besides WRITER_KEYS)."""
    _load_families()
    parameters = inspect.signature(FAMILIES[family]).parameters
    return [name for name, p in parameters.items() if p.kind in (p.KEYWORD_ONLY, p.POSITIONAL_OR_KEYWORD)]


def families_reading(setting: str) -> list[str]:
    """The families whose encoder reads this setting (all of them for a WRITER_KEYS one)."""
    _load_families()
    return [family for family in FAMILIES if setting in WRITER_KEYS or setting in settings_read_by(family)]


def families_with_dense_side() -> list[str]:
    """The families whose encoder also writes a dense store (`encode corpus --dense-store`)."""
    _load_families()
    return [family for family, builder in FAMILIES.items() if getattr(builder, "has_dense_side", False)]


def build_encoder(settings: dict) -> SparseEncoder:
    """An encoder from preset settings (the `family` key picks the builder)."""
    _load_families()
    family = settings.get("family")
    if family not in FAMILIES:
        raise InputError(f"unknown encoder family {family!r} (known: {', '.join(sorted(FAMILIES))})")
    readable = settings_read_by(family)
    unknown = [key for key in settings if key not in WRITER_KEYS and key not in readable]
    if unknown:
        raise InputError(f"preset {settings.get('name', family)!r}: setting {unknown[0]!r} is not read by the "
                         f"{family} encoder (it reads: {', '.join(sorted(set(readable) | set(WRITER_KEYS)))})")
    return FAMILIES[family](**{k: v for k, v in settings.items() if k not in WRITER_KEYS})


__all__ = ["SparseEncoder", "build_encoder", "register", "settings_read_by", "families_reading",
           "families_with_dense_side", "FAMILIES", "WRITER_KEYS"]
