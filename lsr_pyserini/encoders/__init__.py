"""Sparse encoders: text in, `{term: float weight >= 0}` out, one side (documents or queries) at a time.

Quantising to integer impacts and writing files is not an encoder's job (`core/writer.py`). Each
family registers its encoder builder (`models/registry.py`); `build_encoder` calls it with a
config `models/resolve.resolve_settings` checked against the family's schema.
"""
from __future__ import annotations

from ..core.presets import CHECKSUM_KEY
from ..models.base import SparseEncoder
from ..models.registry import ENCODERS, SCHEMAS, load_families, schema_of

# Settings the writer and the encoding loop read, not the encoder itself.
WRITER_KEYS = ("name", "family", "impact_scale", "query_impact_scale", "batch_size")


def families_reading(setting: str) -> list[str]:
    """The families whose schema declares this setting."""
    load_families()
    return [family for family, schema in SCHEMAS.items() if family in ENCODERS and setting in schema]


def families_with_dense_side() -> list[str]:
    """The families whose encoder also writes a dense store (`encode corpus --dense-store`)."""
    load_families()
    return [family for family, builder in ENCODERS.items() if getattr(builder, "has_dense_side", False)]


def build_encoder(settings: dict) -> SparseEncoder:
    """An encoder from a resolved config (the `family` key picks the builder). The settings are
    checked once, by the encoder against its family's schema (an unknown key or a bad value: one line)."""
    schema = schema_of(settings.get("family"))
    own = {k: v for k, v in settings.items() if k not in (*WRITER_KEYS, CHECKSUM_KEY)}  # digests: checked already
    return ENCODERS[schema.family](**own)


__all__ = ["SparseEncoder", "build_encoder", "families_reading", "families_with_dense_side", "WRITER_KEYS"]
