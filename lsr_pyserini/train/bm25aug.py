"""BM25 query augmentation training (arXiv 2305.14087): contrastive loss over the positive, its
BM25 hard negatives and the batch's other documents, with the BM25 scores of the rewritten query,
plus lambda * sum_t sqrt(h_t) * a(q)_t (h_t: share of documents holding token t).

Documents are never encoded: f(d) and v come from the training corpus tokenised with the model's
tokenizer, exactly as `bm25aug index` tokenises it and Lucene scores it (`wordpiece_bm25`).
Paper settings: AdamW with --lr 3e-4 --lambda-aug 0.1, or --lr 3e-5 --lambda-aug 0.025.
"""
from __future__ import annotations

import argparse

import numpy as np
import torch

from ..core.options import non_negative_float, positive_int, probability
from ..core.presets import resolve_model
from ..core.wordpiece_bm25 import DEFAULT_B, DEFAULT_K1, CorpusVectors, bm25_check
from ..encoders.bm25aug import QueryAugmenter
from .base import register
from .data import Batch
from .losses import contrastive_loss


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--query-max-length", type=positive_int, default=64, help="query tokens (default: 64)")
    parser.add_argument("--lambda-aug", type=non_negative_float, default=0.1,
                        help="weight of the augmentation penalty (default: 0.1; paper: 0.1 or 0.025)")
    parser.add_argument("--k1", type=non_negative_float, default=DEFAULT_K1,
                        help=f"BM25 k1, as searched (default: {DEFAULT_K1})")
    parser.add_argument("--b", type=probability, default=DEFAULT_B, help=f"BM25 b, as searched (default: {DEFAULT_B})")
    parser.add_argument("--no-augmentation", action="store_true", help="ablation: a(q) = 0")
    parser.add_argument("--no-weighting", action="store_true", help="ablation: w(q) = 1")
    parser.add_argument("--no-bm25", action="store_true",
                        help="ablation: bag-of-words scoring (f(d) = 1 for present tokens, v = 1); "
                             "serve on a `bm25aug index --scoring bow` index")
    parser.add_argument("--uniform-penalty", action="store_true", help="ablation: penalty sum_t a(q)_t (h_t = 1)")


class BM25AugFamily(torch.nn.Module):
    device_ready = True  # the documents' BM25 vectors are moved to the encoder's device (train/loop.py)

    def __init__(self, base: str, args):
        super().__init__()
        bm25_check(args.k1, args.b)
        self.args = args
        self.model = QueryAugmenter.load(resolve_model(base), augment=not args.no_augmentation,
                                         weighting=not args.no_weighting, query_max_length=args.query_max_length)
        self.documents = CorpusVectors(args.corpus, self.model.tokenizer, args.k1, args.b, not args.no_bm25)
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

    def save(self, folder) -> None:
        self.model.save(folder, scoring="bow" if self.args.no_bm25 else "bm25", k1=self.args.k1, b=self.args.b,
                        uniform_penalty=self.args.uniform_penalty, lambda_aug=self.args.lambda_aug)


@register("bm25aug", add_arguments)
def build(base: str, args) -> BM25AugFamily:
    """BM25 query augmentation: a BERT-family encoder re-weights and augments BM25 queries."""
    return BM25AugFamily(base, args)

