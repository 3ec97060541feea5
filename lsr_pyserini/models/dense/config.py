"""Dense encoders' settings, declared once (`encode dense`, dense stores, dense re-ranking)."""
from __future__ import annotations

from ...core.declarations import Schema, Setting
from ...core.options import positive_int
from ..registry import family
from ..shared_settings import BATCH_SIZE, MODEL, QUANTIZE

POOLINGS = ("cls", "mean")
SCHEMA = family(Schema("dense", (
    MODEL,
    Setting("pooling_mode", None, "cls or mean pooling; none = the sentence-transformers config's, else cls",
            choices=POOLINGS, nullable=True),
    Setting("normalize", None, "L2-normalise vectors: true, false, or none = yes when the sentence-transformers "
                               "folder has a Normalize module", choices=(True, False), nullable=True),
    Setting("max_length", None, "tokens kept per text; none = the model's max_seq_length, else min(positions, 512)",
            positive_int, nullable=True),
    Setting("query_prefix", None, "text put before each query, e.g. 'query: '; none = the sentence-transformers "
                                  "folder's query prompt, else none", nullable=True),
    Setting("doc_prefix", None, "text put before each document, e.g. 'passage: '; none = the sentence-transformers "
                                "folder's document prompt, else none", nullable=True),
    QUANTIZE, BATCH_SIZE)))
