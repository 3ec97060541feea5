"""SparseEmbed's settings, declared once (the embedding dimension H' is the checkpoint's heads')."""
from __future__ import annotations

from ...core.options import positive_int
from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import (BATCH_SIZE, DOC_MAX_LENGTH, DOC_TOP_K, QUANTIZE, QUERY_MAX_LENGTH, QUERY_TOP_K,
                        SPARSE_COMMON)

DIMENSIONS = (16, 32, 64)
DEFAULT_DIM = 32  # new heads' dimension when neither --dim nor the base's heads say
DIM = Setting("dim", None, f"H', the term embeddings' dimension (the heads'); none = the checkpoint's heads', a base "
                           f"without heads {DEFAULT_DIM}; a checkpoint whose heads have another is refused",
              positive_int, choices=DIMENSIONS, nullable=True)
SCHEMA = family(Schema("sparseembed", SPARSE_COMMON + (DOC_MAX_LENGTH, QUERY_MAX_LENGTH, DOC_TOP_K, QUERY_TOP_K,
                                                       QUANTIZE, DIM)).extended("sparseembed", replace=[
    DOC_TOP_K.but(default=256, nullable=False, help="activated terms per document"),
    QUERY_TOP_K.but(default=64, nullable=False, help="activated terms per query"), BATCH_SIZE.but(default=8)]))
