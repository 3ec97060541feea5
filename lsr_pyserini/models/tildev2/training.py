"""TILDEv2 training: contrastive loss over exact-match scores (the positive against its group's
BM25 hard negatives and, as the original code does, the other queries' documents in the batch),
plus MarginMSE against a teacher's scores when `--teacher` is given.

`--bm25-prior-weight W` adds W x the mean squared difference between each passage token's weight
and that token's BM25 weight in the passage (idf x saturated tf over the tokenizer's pieces of the
training corpus, computed as Lucene does: `wordpiece_bm25`). With tokenizer-only queries TILDEv2
scores sum_i w(d, q_i), so weights equal to BM25's make it score exactly WordPiece BM25: the prior
anchors a small model, fine-tuned on a few hundred queries, to BM25's weighting (the IDF of a whole
vocabulary, which the ranking losses alone teach slowly) while the ranking losses move it.
`--bm25-init N` sets the head (`tok_proj`) to the least-squares fit of those BM25 weights
on the base model's hidden states over the first N training passages, so training starts near
BM25's ranking instead of from a random head.
"""
from __future__ import annotations

import logging
from itertools import islice

import torch

from ...core.devices import moved
from ...core.hf import load_tokenizer, write_family
from ...core.options import non_negative_float, non_negative_int
from ...core.presets import resolve_model
from ...core.readers import InputError, read_corpus
from ...kernels.wordpiece_bm25 import CorpusVectors, bm25_check
from .encoder import TildeV2Model, passage_positions
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..shared_settings import B, K1, MARGIN_MSE_WEIGHT
from ..base import Batch
from ..losses import contrastive_loss, with_margin_mse

log = logging.getLogger(__name__)


TRAINING = Schema("tildev2 training", (
    Setting("no_in_batch", False, "score each query against its own group only (pure localised contrastive "
                                  "estimation)"),
    MARGIN_MSE_WEIGHT,
    Setting("bm25_prior_weight", 0.0, "weight of the squared distance of each passage token's weight to its BM25 "
                                      "weight (0 = off)", non_negative_float),
    Setting("bm25_init", 0, "fit a fresh head to the BM25 weights of the first N training passages by least squares "
                            "before training (0 = off)", non_negative_int),
    K1.but(help="BM25 k1 of the prior"), B.but(help="BM25 b of the prior")))

def exact_match_scores(query_ids: torch.Tensor, query_mask: torch.Tensor, doc_ids: torch.Tensor,
                       doc_weights: torch.Tensor) -> torch.Tensor:
    """Q x D: sum over query tokens of the largest weight of the same token in the document."""
    match = query_ids[:, :, None, None] == doc_ids[None, None, :, :]  # Q x Lq x D x Ld
    best = (match * doc_weights[None, None]).amax(dim=-1)  # Q x Lq x D
    return (best * query_mask[:, :, None]).sum(dim=1)


def bm25_prior(weights: torch.Tensor, input_ids: torch.Tensor, keep: torch.Tensor,
               bm25: torch.Tensor) -> torch.Tensor:
    """Mean over kept positions of (weight - BM25 weight of the position's token in its passage)^2;
    ``bm25`` is the batch's B x |V| matrix of the passages' BM25 vectors."""
    target = bm25.gather(1, input_ids)
    return ((weights - target) ** 2 * keep).sum() / keep.sum().clamp(min=1)


@torch.no_grad()
def fit_head_to_bm25(model: TildeV2Model, tokenizer, passages: list[tuple[str, str]], bm25: CorpusVectors,
                     max_length: int, batch_size: int = 16, ridge: float = 1e-2) -> float:
    """Set the head to the ridge least-squares fit of BM25 weights on the hidden states of the
    (docid, text) passages' non-special tokens; returns the fit's R^2 on those positions."""
    special = torch.tensor(tokenizer.all_special_ids)
    device = model.tok_proj.weight.device  # the hidden states come from the model's device; the sums run in
    size = model.tok_proj.in_features + 1  # float64 on the CPU (MPS has no float64)
    gram, moment = torch.zeros(size, size, dtype=torch.float64), torch.zeros(size, dtype=torch.float64)
    count, total, total_sq = 0, 0.0, 0.0
    was_training = model.training
    model.eval()
    for start in range(0, len(passages), batch_size):
        chunk = passages[start:start + batch_size]
        encoded = tokenizer([text for _, text in chunk], padding=True, truncation=True, max_length=max_length,
                            return_tensors="pt")
        keep = passage_positions(encoded, special)
        hidden = model.bert(**moved(encoded, device)).last_hidden_state.cpu()[keep].double()
        features = torch.cat([hidden, torch.ones(len(hidden), 1, dtype=hidden.dtype)], dim=1)
        target = bm25.matrix([docid for docid, _ in chunk]).gather(1, encoded["input_ids"])[keep].double()
        gram += features.T @ features
        moment += features.T @ target
        count, total, total_sq = count + len(target), total + float(target.sum()), total_sq + float((target ** 2).sum())
    model.train(was_training)
    if count == 0:
        raise InputError("--bm25-init: the passages have no token to fit the head on")
    solution = torch.linalg.solve(gram + ridge * torch.eye(size, dtype=gram.dtype), moment)
    model.tok_proj.weight.copy_(solution[:-1].float()[None])
    model.tok_proj.bias.copy_(solution[-1:].float())
    residual = total_sq - 2 * float(solution @ moment) + float(solution @ gram @ solution)
    variance = total_sq - total ** 2 / count
    return 1.0 - residual / variance if variance > 0 else 0.0


class TildeV2Family(torch.nn.Module):
    device_ready = True  # batches, special ids and BM25 vectors on the model's device (train/loop.py)

    def __init__(self, base: str, args):
        super().__init__()
        path = resolve_model(base)
        self.tokenizer = load_tokenizer(path)
        self.model = TildeV2Model.from_pretrained(path, require_head=False)
        self.register_buffer("special", torch.tensor(self.tokenizer.all_special_ids), persistent=False)
        self.args = args
        self.bm25 = None
        if args.bm25_prior_weight > 0 or args.bm25_init > 0:
            bm25_check(args.k1, args.b)
            self.bm25 = CorpusVectors(args.corpus, self.tokenizer, args.k1, args.b, bm25=True)
        if args.bm25_init > 0:
            passages = [(d.id, d.text) for d in islice(read_corpus(args.corpus), args.bm25_init)]
            r2 = fit_head_to_bm25(self.model, self.tokenizer, passages, self.bm25, args.doc_max_length)
            log.info(f"head fitted to the BM25 weights of {len(passages)} passages: R^2 {r2:.3f}")

    def tokenize(self, texts: list[str], **options) -> dict[str, torch.Tensor]:
        """A tokenizer batch on the model's device."""
        encoded = self.tokenizer(texts, padding=True, truncation=True, return_tensors="pt", **options)
        return moved(encoded, self.special.device)

    def loss(self, batch: Batch, step: int):
        docs = self.tokenize(batch.documents, max_length=self.args.doc_max_length)
        weights = self.model.token_weights(docs)
        doc_keep = passage_positions(docs, self.special)
        weights = weights * doc_keep
        queries = self.tokenize(batch.queries, add_special_tokens=False, max_length=self.args.query_max_length)
        scores = exact_match_scores(queries["input_ids"], queries["attention_mask"].float(),
                                    docs["input_ids"], weights)
        loss = contrastive_loss(scores, batch.group_size, in_batch=not self.args.no_in_batch)
        logs = {"rank": float(loss.detach()), "doc_nnz": float((weights > 0).sum(1).float().mean())}
        if self.args.bm25_prior_weight > 0:
            bm25 = self.bm25.matrix(batch.document_ids).to(weights.device)
            prior = bm25_prior(weights, docs["input_ids"], doc_keep, bm25)
            logs["prior"] = float(prior.detach())
            loss = loss + self.args.bm25_prior_weight * prior
        return with_margin_mse(loss, logs, scores, batch.teacher, batch.group_size, self.args.margin_mse_weight), logs

    def save(self, folder) -> None:
        self.model.save(folder)
        self.tokenizer.save_pretrained(folder)
        write_family(folder, "tildev2")


@trainer("tildev2", TRAINING, reads_teacher=True, model_settings=("doc_max_length", "query_max_length"))
def build(base: str, args) -> TildeV2Family:
    """TILDEv2: BERT + ReLU linear head, one weight per passage token; tokenizer-only queries."""
    return TildeV2Family(base, args)
