"""BM25 query augmentation training (arXiv 2305.14087): contrastive loss over the positive, its
BM25 hard negatives and the batch's other documents, with the BM25 scores of the rewritten query,
plus lambda * sum_t sqrt(h_t) * a(q)_t (h_t: share of documents holding token t).

Documents are never encoded: f(d) and v come from the training corpus tokenised with the model's
tokenizer, exactly as `bm25aug index` tokenises it and Lucene scores it (`wordpiece_bm25`).
Paper settings: AdamW with --lr 3e-4 --lambda-aug 0.1, or --lr 3e-5 --lambda-aug 0.025.
"""
from __future__ import annotations


import numpy as np
import torch

from ...core.options import non_negative_float
from ...core.presets import resolve_model
from ...kernels.wordpiece_bm25 import CorpusVectors, bm25_check
from .model import QueryAugmenter
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..base import Batch
from ..losses import contrastive_loss


TRAINING = Schema("bm25aug training", (
    Setting("lambda_aug", 0.1, "weight of the augmentation penalty (paper: 0.1 or 0.025)", non_negative_float),
    Setting("no_bm25", False, "ablation: bag-of-words scoring (f(d) = 1 for present tokens, v = 1), the same as "
                              "--scoring bow; serve on a `bm25aug index --scoring bow` index"),
    Setting("uniform_penalty", False, "ablation: penalty sum_t a(q)_t (h_t = 1)")))

class BM25AugFamily(torch.nn.Module):
    device_ready = True  # the documents' BM25 vectors are moved to the encoder's device (train/loop.py)

    def __init__(self, base: str, args):
        super().__init__()
        bm25_check(args.k1, args.b)
        self.args = args
        scoring = "bow" if args.no_bm25 else args.scoring
        self.model = QueryAugmenter.load(resolve_model(base), augment=args.augment, weighting=args.weighting,
                                         query_max_length=args.query_max_length, scoring=scoring, k1=args.k1, b=args.b)
        self.documents = CorpusVectors(args.corpus, self.model.tokenizer, args.k1, args.b, scoring == "bm25")
        fraction = self.documents.statistics.document_fraction()
        penalty = np.ones_like(fraction) if args.uniform_penalty else np.sqrt(fraction)
        self.register_buffer("penalty", torch.from_numpy(penalty).float(), persistent=False)

    def loss(self, batch: Batch, step: int):
        boosts, bow, augmentation = self.model(batch.queries)
        scores = boosts @ self.documents.matrix(batch.document_ids).to(boosts.device).T
        ranking = contrastive_loss(scores, batch.group_size)
        penalty = (augmentation * self.penalty).sum(1).mean()
        logs = {"rank": float(ranking.detach()), "aug_nnz": float((augmentation > 0.005).sum(1).float().mean())}
        return ranking + self.args.lambda_aug * penalty, logs

    def decided_settings(self) -> dict:
        """--no-bm25 trains for bag-of-words scoring: recorded as the model's `scoring`."""
        return {"scoring": self.model.scoring}

    def save(self, folder) -> None:
        self.model.save(folder)  # the training options are in lsr_training.json


@trainer("bm25aug", TRAINING, model_settings=("query_max_length", "augment", "weighting", "scoring", "k1", "b"))
def build(base: str, args) -> BM25AugFamily:
    """BM25 query augmentation: a BERT-family encoder re-weights and augments BM25 queries."""
    return BM25AugFamily(base, args)

