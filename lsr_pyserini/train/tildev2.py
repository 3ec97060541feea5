"""TILDEv2 training: contrastive loss over exact-match scores (the positive against its group's
BM25 hard negatives and, as the original code does, the other queries' documents in the batch),
plus MarginMSE against a teacher's scores when `--teacher` is given."""
from __future__ import annotations

import argparse

import torch

from ..encoders.base import load_tokenizer, write_family
from ..encoders.tildev2 import TildeV2Model
from ..presets import resolve_model
from . import register
from .data import Batch
from .losses import contrastive_loss, with_margin_mse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--doc-max-length", type=int, default=512, help="passage tokens, expansion included (default: 512)")
    parser.add_argument("--query-max-length", type=int, default=64, help="query tokens (default: 64)")
    parser.add_argument("--no-in-batch", action="store_true",
                        help="score each query against its own group only (pure localised contrastive estimation)")
    parser.add_argument("--margin-mse-weight", type=float, default=1.0,
                        help="weight of MarginMSE when --teacher is given (default: 1)")


def exact_match_scores(query_ids: torch.Tensor, query_mask: torch.Tensor, doc_ids: torch.Tensor,
                       doc_weights: torch.Tensor) -> torch.Tensor:
    """Q x D: sum over query tokens of the largest weight of the same token in the document."""
    match = query_ids[:, :, None, None] == doc_ids[None, None, :, :]  # Q x Lq x D x Ld
    best = (match * doc_weights[None, None]).amax(dim=-1)  # Q x Lq x D
    return (best * query_mask[:, :, None]).sum(dim=1)


class TildeV2Family(torch.nn.Module):
    def __init__(self, base: str, args):
        super().__init__()
        path = resolve_model(base)
        self.tokenizer = load_tokenizer(path)
        self.model = TildeV2Model.from_pretrained(path, require_head=False)
        self.special = torch.tensor(self.tokenizer.all_special_ids)
        self.args = args

    def loss(self, batch: Batch, step: int):
        docs = self.tokenizer(batch.documents, padding=True, truncation=True,
                              max_length=self.args.doc_max_length, return_tensors="pt")
        weights = self.model.token_weights(docs)
        doc_keep = docs["attention_mask"].bool() & ~torch.isin(docs["input_ids"], self.special)
        weights = weights * doc_keep
        queries = self.tokenizer(batch.queries, padding=True, truncation=True, add_special_tokens=False,
                                 max_length=self.args.query_max_length, return_tensors="pt")
        scores = exact_match_scores(queries["input_ids"], queries["attention_mask"].float(),
                                    docs["input_ids"], weights)
        loss = contrastive_loss(scores, batch.group_size, in_batch=not self.args.no_in_batch)
        logs = {"rank": float(loss.detach()), "doc_nnz": float((weights > 0).sum(1).float().mean())}
        return with_margin_mse(loss, logs, scores, batch.teacher, batch.group_size, self.args.margin_mse_weight), logs

    def save(self, folder) -> None:
        self.model.save(folder)
        self.tokenizer.save_pretrained(folder)
        write_family(folder, "tildev2")


@register("tildev2", add_arguments)
def build(base: str, args) -> TildeV2Family:
    """TILDEv2: BERT + ReLU linear head, one weight per passage token; tokenizer-only queries."""
    return TildeV2Family(base, args)

