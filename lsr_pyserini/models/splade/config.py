"""SPLADE's settings, declared once: presets override them, checkpoints record them, `encode` and
`train splade` take them as flags."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import DOC_MAX_LENGTH, DOC_TOP_K, QUANTIZE, QUERY_MAX_LENGTH, QUERY_TOP_K, SPARSE_COMMON

POOLING = Setting("pooling", "max", "pooling over positions of log(1 + ReLU(logits)): max (SPLADE v2/++) or sum (v1)",
                  choices=("max", "sum"))
QUERY_MODE = Setting("query_mode", "model", "model: queries run through the model; tokenizer: inference-free "
                     "queries, the tokenizer's tokens weighted by query_weights", choices=("model", "tokenizer"))
QUERY_WEIGHTS = Setting("query_weights", None, "JSON {term: weight} table for query_mode tokenizer, a file of the "
                        "model folder or a path; none = weight 1", nullable=True)
POOLINGS, QUERY_MODES = POOLING.choices, QUERY_MODE.choices

SCHEMA = family(Schema("splade", SPARSE_COMMON + (POOLING, DOC_MAX_LENGTH, QUERY_MAX_LENGTH, DOC_TOP_K, QUERY_TOP_K,
                                                  QUERY_MODE, QUERY_WEIGHTS, QUANTIZE)))
