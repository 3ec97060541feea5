"""TILDEv2's settings, declared once: queries are the tokenizer's token counts (impact 1 each)."""
from __future__ import annotations

from ...core.declarations import Schema
from ..registry import family
from ..shared_settings import DOC_MAX_LENGTH, QUANTIZE, QUERY_IMPACT_SCALE, QUERY_MAX_LENGTH, SPARSE_COMMON

SCHEMA = family(Schema("tildev2", SPARSE_COMMON + (DOC_MAX_LENGTH, QUERY_MAX_LENGTH, QUANTIZE)).extended(
    "tildev2", replace=[DOC_MAX_LENGTH.but(default=512, help="passage tokens, expansion included"),
                        QUERY_IMPACT_SCALE.but(default=1, help="queries' integer impact = round(token count x scale)")]))
