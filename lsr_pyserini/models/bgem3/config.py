"""BGE-M3's settings, declared once, with the weights that combine its three heads' scores."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ..registry import family
from ..shared_settings import (BATCH_SIZE, DOC_MAX_LENGTH, DOC_TOP_K, IMPACT_SCALE, QUERY_MAX_LENGTH, QUERY_TOP_K,
                        SPARSE_COMMON)

HEADS = ("dense", "sparse", "colbert")
# The paper's (and FlagEmbedding's) weight of the sparse score beside the dense one, 1 : 0.3, in the
# hybrid score and in training's ensemble score (which adds the ColBERT score with weight 1).
SPARSE_WEIGHT = 0.3
HYBRID_WEIGHTS: dict[str, float] = {"dense": 1.0, "sparse": SPARSE_WEIGHT, "colbert": 0.0}  # ColBERT off by default
ENSEMBLE_WEIGHTS: dict[str, float] = {"dense": 1.0, "sparse": SPARSE_WEIGHT, "colbert": 1.0}

BODY = Setting("body", None, "the architecture of the transformer body (its config.json's model_type, e.g. bert) the "
                             "checkpoint was trained on, recorded by `train bgem3`: a checkpoint whose body is "
                             "another is refused; none = any BGE-M3 body", nullable=True)
SCHEMA = family(Schema("bgem3", SPARSE_COMMON + (DOC_MAX_LENGTH, QUERY_MAX_LENGTH, DOC_TOP_K, QUERY_TOP_K,
                                                 BODY)).extended(
    "bgem3", replace=[
        # BGE-M3 sparse weights lie in about 0-0.35 (SPLADE's in 0-3): x1000 puts them on the same ~0-300 integer
        # range as Anserini's SPLADE++ impacts (x100); x100 would drop every weight under 0.005
        IMPACT_SCALE.but(default=1000, help="integer impact = round(weight x impact_scale); BGE-M3's sparse weights "
                                            "lie in 0-0.35, so x1000 (x100 drops every weight under 0.005)"),
        DOC_MAX_LENGTH.but(default=512), BATCH_SIZE.but(default=16)]))
