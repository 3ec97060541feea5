"""Augmented BM25 queries' settings, declared once (saved with every checkpoint)."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import B, K1, QUERY_MAX_LENGTH, SPARSE_COMMON

AUGMENT = Setting("augment", True, "learned augmentation a(q) (no: the ablation a = 0)", flag_name="--augmentation")
WEIGHTING = Setting("weighting", True, "learned re-weighting w(q) (no: the ablation w = 1)")
SCORING = Setting("scoring", "bm25", "how the index the model serves scores documents: bm25, or bow (the no-BM25 "
                   "ablation: f(d) = 1 for present tokens, v = 1); the index must be a `bm25aug index --scoring` "
                   "one of the same", choices=("bm25", "bow"))
# scoring, k1 and b are the index's the model was trained for: `bm25aug queries` refuses an index of other
# scoring and searches (Searcher, `search --bm25`) take the model's k1 and b
MODEL_SETTINGS = ("augment", "weighting", "query_max_length", "scoring", "k1", "b")  # what QueryAugmenter holds
SCHEMA = family(Schema("bm25aug", SPARSE_COMMON + (AUGMENT, WEIGHTING, QUERY_MAX_LENGTH, SCORING,
                                                  K1.but(help="BM25 k1 the model was trained (and is searched) with"),
                                                  B.but(help="BM25 b the model was trained (and is searched) with"))))
