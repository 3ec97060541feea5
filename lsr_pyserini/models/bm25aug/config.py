"""Augmented BM25 queries' settings, declared once (saved with every checkpoint)."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import QUERY_MAX_LENGTH, SPARSE_COMMON

AUGMENT = Setting("augment", True, "learned augmentation a(q) (no: the ablation a = 0)", flag_name="--augmentation")
WEIGHTING = Setting("weighting", True, "learned re-weighting w(q) (no: the ablation w = 1)")
SCHEMA = family(Schema("bm25aug", SPARSE_COMMON + (AUGMENT, WEIGHTING, QUERY_MAX_LENGTH)))
