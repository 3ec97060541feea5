"""PromptReps' settings, declared once."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import BATCH_SIZE, DOC_MAX_LENGTH, DOC_TOP_K, QUERY_MAX_LENGTH, QUERY_TOP_K, SPARSE_COMMON

DTYPES = ("auto", "float32", "bfloat16", "float16")
SCHEMA = family(Schema("promptreps", SPARSE_COMMON + (
    DOC_MAX_LENGTH, QUERY_MAX_LENGTH, DOC_TOP_K, QUERY_TOP_K,
    Setting("chat_template", None, "Jinja chat template (a file or the text), for a tokenizer that has none; "
                                   "none = the tokenizer's", nullable=True),
    Setting("dtype", "auto", "the LLM's dtype; auto = bfloat16 where the hardware computes it natively",
            choices=DTYPES),
    Setting("device", "auto", "where the LLM runs (auto|cpu|cuda|cuda:N|mps); --device overrides it"),
)).extended("promptreps", replace=[DOC_MAX_LENGTH.but(default=512), DOC_TOP_K.but(default=128),
                                   QUERY_TOP_K.but(default=128), BATCH_SIZE.but(default=16)]))
