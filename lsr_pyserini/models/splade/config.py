"""SPLADE's settings, declared once: presets override them, checkpoints record them, `encode` and
`train splade` take them as flags."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ...core.options import non_negative_float, positive_float
from ..exact_match import EXACT_STATS_FILE, MODES
from ..shared_settings import B, DOC_MAX_LENGTH, DOC_TOP_K, K1, QUANTIZE, QUERY_MAX_LENGTH, QUERY_TOP_K, SPARSE_COMMON

POOLING = Setting("pooling", "max", "pooling over positions of log(1 + ReLU(logits)): max (SPLADE v2/++) or sum (v1)",
                  choices=("max", "sum"))
QUERY_MODE = Setting("query_mode", "model", "model: queries run through the model; tokenizer: inference-free "
                     "queries, the tokenizer's tokens weighted by query_weights", choices=("model", "tokenizer"))
QUERY_WEIGHTS = Setting("query_weights", None, "JSON {term: weight} table for query_mode tokenizer, a file of the "
                        "model folder or a path; none = weight 1", nullable=True)
EXACT_MATCH = Setting("exact_match", "none", f"bm25: BM25 over the tokenizer's tokens folded into the impacts "
                      f"(terms of their own; corpus statistics {EXACT_STATS_FILE} in the model folder, written by "
                      f"`adapt`): one index, one query, the sum of both scores (models/exact_match.py)", choices=MODES)
EXACT_MATCH_WEIGHT = Setting("exact_match_weight", 2.0, "weight of the BM25 score beside the model's when "
                             "exact_match is bm25: a query-side weight per term occurrence, so it changes at query time "
                             "without encoding the corpus again",
                             non_negative_float)
# a training setting (models/splade/training.py), here so that commands declare it without importing torch
QUERY_WEIGHTS_LR = Setting("query_weights_lr", 0.01, "AdamW learning rate of the inference-free query weight table "
                           "(query_mode tokenizer; the transformer keeps --lr)", positive_float)
POOLINGS, QUERY_MODES = POOLING.choices, QUERY_MODE.choices

SCHEMA = family(Schema("splade", SPARSE_COMMON + (POOLING, DOC_MAX_LENGTH, QUERY_MAX_LENGTH, DOC_TOP_K, QUERY_TOP_K,
                                                  QUERY_MODE, QUERY_WEIGHTS, QUANTIZE, EXACT_MATCH,
                                                  EXACT_MATCH_WEIGHT, K1, B)))
