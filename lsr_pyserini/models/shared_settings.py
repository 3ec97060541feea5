"""The settings several families share, declared once: each family's `config.py` picks the ones it
reads (changing a default with `Setting.but` where the family's differs) and adds its own."""
from __future__ import annotations

from ..core.declarations import Setting
from ..core.options import non_negative_float, non_negative_int, positive_float, positive_int, probability
from ..kernels import QUANTIZE_CHOICES
from ..kernels.wordpiece_bm25 import DEFAULT_B, DEFAULT_K1

MODEL = Setting("model", None, "checkpoint folder, hub id or python-package:PKG/DIR")
IMPACT_SCALE = Setting("impact_scale", 100, "integer impact = round(weight x impact_scale)", positive_float)
QUERY_IMPACT_SCALE = Setting("query_impact_scale", None, "queries' integer impact = round(weight x "
                             "query_impact_scale); none = impact_scale", positive_float, nullable=True)
BATCH_SIZE = Setting("batch_size", 32, "texts per forward pass when encoding documents", positive_int)
DOC_MAX_LENGTH = Setting("doc_max_length", 256, "tokens kept per document", positive_int)
QUERY_MAX_LENGTH = Setting("query_max_length", 64, "tokens kept per query", positive_int)
DOC_TOP_K = Setting("doc_top_k", None, "keep only the k largest weights per document; none = all", positive_int,
                    nullable=True)
QUERY_TOP_K = Setting("query_top_k", None, "keep only the k largest weights per query; none = all", positive_int,
                      nullable=True)
QUANTIZE = Setting("quantize", "none", "int8: dynamic int8 inference on the CPU (docs/quantization.md); "
                   "none = float32", choices=QUANTIZE_CHOICES)

# what every sparse encoder family reads: the model, the writer's scale and the batch size
SPARSE_COMMON = (MODEL, IMPACT_SCALE, QUERY_IMPACT_SCALE, BATCH_SIZE)

# -- training settings several training families share ------------------------------------------
LAMBDA_D = Setting("lambda_d", 1e-3, "FLOPS weight, documents", non_negative_float)
LAMBDA_Q = Setting("lambda_q", 1e-3, "FLOPS weight, queries", non_negative_float)
FLOPS_WARMUP = Setting("flops_warmup_steps", 100, "steps of quadratic warm-up of the FLOPS weights", non_negative_int)
FLOPS = (LAMBDA_D, LAMBDA_Q, FLOPS_WARMUP)
MARGIN_MSE_WEIGHT = Setting("margin_mse_weight", 1.0, "weight of MarginMSE when --teacher is given", non_negative_float)
K1 = Setting("k1", DEFAULT_K1, "BM25 k1, as searched", non_negative_float)
B = Setting("b", DEFAULT_B, "BM25 b, as searched", probability)
