"""SPLADE fine-tuning: contrastive loss (in-batch + hard negatives), optional MarginMSE against a
teacher, and FLOPS regularisers on both sides with a quadratic warm-up of their weights.

Inference-free queries (`query_mode: tokenizer`) are trained too: a query is the tokenizer's distinct
tokens (as the encoder makes it: no special tokens, cut at query_max_length), each weighted by
ReLU of its entry in a table of one weight per vocabulary entry, a parameter learned with the
document encoder at its own learning rate (`query_weights_lr`). It starts from the base's table
(or `initial_query_weights`, e.g. the corpus's IDF from `adapt`; else 1 for every token) and is saved
as the checkpoint's `query_weights.json` and as sentence-transformers' SparseStaticEmbedding weight."""
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
from .config import QUERY_WEIGHTS_LR, SCHEMA
from .encoder import read_query_weights
from .model import SpladeModel

TRAINING = Schema("splade training", FLOPS + (MARGIN_MSE_WEIGHT, QUERY_WEIGHTS_LR))
LEARNED_QUERY_WEIGHTS = "query_weights.json"  # the trained table, a file of the checkpoint folder


class SpladeFamily(torch.nn.Module):
    device_ready = True  # moves its inputs to the model's device (train/loop.py refuses others off the CPU)

    def __init__(self, base: str, args, initial_query_weights: dict[str, float] | None = None):
        super().__init__()
        config = getattr(args, "model_config", None) or SCHEMA.complete(
            {name: getattr(args, name) for name in SCHEMA.names if name != "model" and hasattr(args, name)},
            "training arguments")
        self.base_path = resolve_model(base)
        self.splade = SpladeModel(self.base_path, config)
        self.tokenizer, self.terms = self.splade.tokenizer, self.splade.terms
        self.model = self.splade.mlm  # its parameters are this module's (checkpoints name them model.*)
        self.args = args
        self.inference_free = config["query_mode"] == "tokenizer"
        if self.inference_free:
            table = initial_query_weights if initial_query_weights is not None else \
                read_query_weights(self.base_path, config["query_weights"])
            self.query_weights = torch.nn.Parameter(self._table_tensor(table))

    def _table_tensor(self, table: dict[str, float] | None) -> torch.Tensor:
        """One weight per vocabulary entry: the table's (tokens absent from it 0), or 1 with no table."""
        if table is None:
            return torch.ones(self.terms)
        weights = torch.zeros(self.terms)
        vocabulary = self.tokenizer.get_vocab()
        for token, value in table.items():
            index = vocabulary.get(token)
            if index is not None and index < self.terms:
                weights[index] = float(value)
        return weights

    def decided_settings(self) -> dict:
        """Inference-free queries: the config names the learned table the checkpoint holds."""
        return {"query_weights": LEARNED_QUERY_WEIGHTS} if self.inference_free else {}

    def parameter_groups(self, lr: float) -> list[dict]:
        """The transformer at `lr`; the inference-free query table at its own rate, without decay."""
        groups = [{"params": [p for p in self.model.parameters() if p.requires_grad]}]
        if self.inference_free:
            # no weight decay: it would shrink the weight of every token, those of no training query too
            groups.append({"params": [self.query_weights], "lr": float(self.args.query_weights_lr),
                           "weight_decay": 0.0})
        return groups

    def tokenizer_queries(self, texts: list[str]) -> torch.Tensor:
        """B x |V| inference-free query vectors: each distinct token of a query (no special tokens, cut at
        query_max_length, as models/splade/encoder.py makes them) at ReLU of its table weight."""
        rows, ids = [], []
        for row, text in enumerate(texts):
            tokens = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                    max_length=self.splade.max_length["queries"])["input_ids"]
            distinct = [token for token in dict.fromkeys(tokens) if token < self.terms]
            rows += [row] * len(distinct)
            ids += distinct
        device = self.query_weights.device
        rows, ids = torch.tensor(rows, dtype=torch.long, device=device), torch.tensor(ids, dtype=torch.long,
                                                                                       device=device)
        return torch.zeros(len(texts), self.terms, device=device).index_put(
            (rows, ids), torch.relu(self.query_weights[ids]))

    def learned_query_weights(self) -> dict[str, float]:
        """The table as the encoder reads it: {token: weight} for each weight above 0."""
        weights = torch.relu(self.query_weights.detach()).cpu()
        kept = torch.nonzero(weights > 0, as_tuple=True)[0].tolist()
        tokens = self.tokenizer.convert_ids_to_tokens(kept)
        return {token: float(weights[index]) for token, index in zip(tokens, kept)}

    def loss(self, batch: Batch, step: int, extra=None):
        """`extra`: scores added to the model's before the losses (B x B*G; `adapt` gives its BM25 side's, so
        that the model learns inside the sum)."""
        queries = self.tokenizer_queries(batch.queries) if self.inference_free else \
            self.splade.represent(batch.queries, "queries")
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
        opens it; models/st_layout.py); inference-free queries the learned table (query_weights.json, and
        the SparseStaticEmbedding's weight), an exact-match side the base's corpus statistics (the adapted
        model's, `adapt` writes them first). Unequal top k per side (sentence-transformers holds one)
        warns instead of failing a finished run."""
        config = self.splade.config
        weights = None
        if self.inference_free:
            weights = self.learned_query_weights()
            config = {**config, **self.decided_settings()}
            self.splade.config = config  # the saved layout names the learned table
        self.splade.save(folder, weights, strict=False)
        stats = Path(self.base_path) / EXACT_STATS_FILE
        if config["exact_match"] == "bm25" and stats.is_file() and not (Path(folder) / EXACT_STATS_FILE).exists():
            shutil.copyfile(stats, Path(folder) / EXACT_STATS_FILE)  # fine-tuning an adapted model keeps its corpus's


@trainer("splade", TRAINING, reads_teacher=True,
         model_settings=("doc_max_length", "query_max_length", "pooling", "query_mode", "query_weights"))
def build(base: str, args) -> SpladeFamily:
    """SPLADE: fine-tune a masked-LM SPLADE checkpoint (contrastive + FLOPS, optional MarginMSE)."""
    return SpladeFamily(base, args)
