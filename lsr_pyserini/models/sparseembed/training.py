"""SparseEmbed training: MarginMSE on the embedding score plus lambda_w (0.1) x MarginMSE on the
sparse score against a teacher, plus FLOPS regularisers on both sides with a quadratic warm-up.
Without --teacher the labels alone train it: the contrastive loss (in-batch + hard negatives) on
both scores, with the same weights. With a teacher, --contrastive-weight C adds C x that
contrastive loss to each score's MarginMSE (the margins of one hard negative say nothing about
the easy candidates a re-ranker of the top 1000 also sees)."""
from __future__ import annotations

from pathlib import Path

import torch

from ...core.options import non_negative_float, positive_float
from ...core.presets import resolve_model
from .config import DEFAULT_DIM
from .encoder import HEADS_FILE, SparseEmbedModel, embedding_scores
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..shared_settings import FLOPS
from ..base import Batch
from ..losses import contrastive_loss, flops, margin_mse, quadratic_warmup


TRAINING = Schema("sparseembed training", (
    Setting("head_lr", 1e-3, "learning rate of the new embedding heads (--lr is the encoder's)", positive_float),
    Setting("lambda_w", 0.1, "weight of the sparse score's loss against the embedding score's", non_negative_float),
    Setting("contrastive_weight", 0.0, "with --teacher: weight of the contrastive loss (in-batch + hard negatives) "
                                       "added to each score's MarginMSE (0 = MarginMSE alone)", non_negative_float),
    Setting("freeze_encoder", False, "train the embedding heads only: the base's terms, weights and contexts stay "
                                     "fixed, are computed once per text (dropout off) and reused, so later epochs "
                                     "cost little"),
    Setting("fresh_heads", False, "start from new, seeded heads even when the base has some (e.g. another --dim)"),
) + FLOPS)

def top_k_vectors(weights: torch.Tensor, ids: torch.Tensor, vocabulary: int) -> torch.Tensor:
    """The top-k sparse vectors as B x |V| (zero outside each text's chosen terms), for FLOPS."""
    dense = torch.zeros(weights.shape[0], vocabulary, dtype=weights.dtype, device=weights.device)
    return dense.scatter(1, ids, weights)


class SparseEmbedFamily(torch.nn.Module):
    # the encoder moves its batches (models/sparseembed/encoder.py); the teacher's scores, the FLOPS vectors and a
    # frozen encoder's cached selections are on the heads' device too (train/loop.py)
    device_ready = True

    def __init__(self, base: str, args):
        super().__init__()
        path = resolve_model(base)
        fresh = bool(getattr(args, "fresh_heads", False))
        dim = args.dim or (None if (Path(path) / HEADS_FILE).is_file() and not fresh else DEFAULT_DIM)
        self.model = SparseEmbedModel(path, dim=dim, seed=args.seed, fresh_heads=fresh)
        self.args = args
        self.frozen = bool(getattr(args, "freeze_encoder", False))
        self._selected: dict[tuple[str, str], tuple] = {}  # (side, text) -> frozen selection
        if self.frozen:
            self.model.mlm.requires_grad_(False)

    def train(self, mode: bool = True):
        super().train(mode)
        if self.frozen:
            self.model.mlm.eval()  # a frozen encoder's selections are computed once: no dropout
        return self

    def _represent(self, texts: list[str], side: str, max_length: int, top_k: int):
        if not self.frozen:
            return self.model.represent(texts, side, max_length, top_k)
        new = [t for t in dict.fromkeys(texts) if (side, t) not in self._selected]
        if new:
            with torch.no_grad():
                selected = self.model.select(new, max_length, top_k)
            for row, text in enumerate(new):
                self._selected[(side, text)] = tuple(part[row] for part in selected)
        weights, ids, active, context = (torch.stack(parts) for parts in
                                         zip(*(self._selected[(side, t)] for t in texts)))
        return weights, ids, active, self.model.embed(context, active, side)

    def loss(self, batch: Batch, step: int):
        a = self.args
        q_weights, q_ids, q_active, q_emb = self._represent(batch.queries, "queries", a.query_max_length, a.query_top_k)
        d_weights, d_ids, d_active, d_emb = self._represent(batch.documents, "documents", a.doc_max_length, a.doc_top_k)
        dense = embedding_scores(q_ids, q_emb, d_ids, d_emb)
        sparse = embedding_scores(q_ids, q_weights.unsqueeze(-1), d_ids, d_weights.unsqueeze(-1))  # w^Q . w^D
        if batch.teacher is not None:
            teacher = torch.tensor(batch.teacher, device=dense.device)
            main = margin_mse(dense, teacher, batch.group_size)
            auxiliary = margin_mse(sparse, teacher, batch.group_size)
            if a.contrastive_weight:
                main = main + a.contrastive_weight * contrastive_loss(dense, batch.group_size)
                auxiliary = auxiliary + a.contrastive_weight * contrastive_loss(sparse, batch.group_size)
        else:
            main = contrastive_loss(dense, batch.group_size)
            auxiliary = contrastive_loss(sparse, batch.group_size)
        lambda_d = quadratic_warmup(a.lambda_d, step, a.flops_warmup_steps)
        lambda_q = quadratic_warmup(a.lambda_q, step, a.flops_warmup_steps)
        terms = self.model.terms
        loss = (main + a.lambda_w * auxiliary + lambda_d * flops(top_k_vectors(d_weights, d_ids, terms))
                + lambda_q * flops(top_k_vectors(q_weights, q_ids, terms)))
        logs = {"emb": float(main.detach()), "sparse": float(auxiliary.detach()),
                "doc_terms": float(d_active.sum(1).float().mean())}
        return loss, logs

    def parameter_groups(self, lr: float) -> list[dict]:
        """The encoder at --lr, the freshly initialised heads at --head-lr."""
        heads = list(self.model.heads.parameters())
        body = [p for p in self.model.parameters() if p.requires_grad and all(p is not h for h in heads)]
        return ([{"params": body, "lr": lr}] if body else []) + [{"params": heads, "lr": self.args.head_lr}]

    def decided_settings(self) -> dict:
        """The heads' dimension (the base's heads' when --dim is not given): recorded with the checkpoint."""
        return {"dim": self.model.dim}

    def save(self, folder) -> None:
        self.model.save(folder)


@trainer("sparseembed", TRAINING, reads_teacher=True,
         model_settings=("doc_max_length", "query_max_length", "doc_top_k", "query_top_k", "dim"))
def build(base: str, args) -> SparseEmbedFamily:
    """SparseEmbed: SPLADE terms with contextual term embeddings (MarginMSE or contrastive + FLOPS)."""
    return SparseEmbedFamily(base, args)

