"""SPLADE fine-tuning: contrastive loss (in-batch + hard negatives), optional MarginMSE against a
teacher, and FLOPS regularisers on both sides with a quadratic warm-up of their weights."""
from __future__ import annotations

import shutil
from pathlib import Path

import torch

from ...core.declarations import Schema
from ...core.presets import resolve_model
from ..base import Batch
from ..exact_match import EXACT_STATS_FILE
from ..losses import contrastive_loss, flops, quadratic_warmup, with_margin_mse
from ..registry import trainer
from ..shared_settings import FLOPS, MARGIN_MSE_WEIGHT
from .config import SCHEMA
from .encoder import read_query_weights
from .model import SpladeModel

TRAINING = Schema("splade training", FLOPS + (MARGIN_MSE_WEIGHT,))


class SpladeFamily(torch.nn.Module):
    device_ready = True  # moves its inputs to the model's device (train/loop.py refuses others off the CPU)

    def __init__(self, base: str, args):
        super().__init__()
        config = getattr(args, "model_config", None) or SCHEMA.complete(
            {name: getattr(args, name) for name in SCHEMA.names if name != "model" and hasattr(args, name)},
            "training arguments")
        self.base_path = resolve_model(base)
        self.splade = SpladeModel(self.base_path, config)
        self.tokenizer, self.terms = self.splade.tokenizer, self.splade.terms
        self.model = self.splade.mlm  # its parameters are this module's (checkpoints name them model.*)
        self.args = args

    def loss(self, batch: Batch, step: int, extra=None):
        """`extra`: scores added to the model's before the losses (B x B*G; `adapt` gives its BM25 side's, so
        that the model learns inside the sum)."""
        queries = self.splade.represent(batch.queries, "queries")
        documents = self.splade.represent(batch.documents, "documents")
        scores = queries @ documents.T
        if extra is not None:
            scores = scores + extra.to(scores.device)
        ranking = contrastive_loss(scores, batch.group_size)
        logs = {"rank": float(ranking.detach())}
        loss = with_margin_mse(ranking, logs, scores, batch.teacher, batch.group_size, self.args.margin_mse_weight)
        lambda_d = quadratic_warmup(self.args.lambda_d, step, self.args.flops_warmup_steps)
        lambda_q = quadratic_warmup(self.args.lambda_q, step, self.args.flops_warmup_steps)
        loss = loss + lambda_d * flops(documents) + lambda_q * flops(queries)
        logs["doc_nnz"] = float((documents > 0).sum(1).float().mean())
        return loss, logs

    def save(self, folder) -> None:
        """A transformers checkpoint in the sentence-transformers layout (`SparseEncoder(folder)`
        opens it; models/st_layout.py); inference-free queries keep the base's term table, an exact-match
        side the base's corpus statistics (the adapted model's, `adapt` writes them first). Unequal top
        k per side (sentence-transformers holds one) warns instead of failing a finished run."""
        config = self.splade.config
        weights = read_query_weights(self.base_path, config["query_weights"]) \
            if config["query_mode"] == "tokenizer" else None
        self.splade.save(folder, weights, strict=False)
        stats = Path(self.base_path) / EXACT_STATS_FILE
        if config["exact_match"] == "bm25" and stats.is_file() and not (Path(folder) / EXACT_STATS_FILE).exists():
            shutil.copyfile(stats, Path(folder) / EXACT_STATS_FILE)  # fine-tuning an adapted model keeps its corpus's


@trainer("splade", TRAINING, reads_teacher=True, model_settings=("doc_max_length", "query_max_length", "pooling"))
def build(base: str, args) -> SpladeFamily:
    """SPLADE: fine-tune a masked-LM SPLADE checkpoint (contrastive + FLOPS, optional MarginMSE)."""
    return SpladeFamily(base, args)
