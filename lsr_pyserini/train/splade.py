"""SPLADE fine-tuning: contrastive loss (in-batch + hard negatives), optional MarginMSE against a
teacher, and FLOPS regularisers on both sides with a quadratic warm-up of their weights."""
from __future__ import annotations

import argparse

import torch

from ..core.devices import moved
from ..core.hf import load_masked_lm, load_tokenizer, write_family
from ..core.options import non_negative_float, non_negative_int, positive_int
from ..core.presets import resolve_model
from ..encoders.splade import VOCAB_SLICE, run_to_head, take_rows
from .base import register
from .data import Batch
from .losses import contrastive_loss, flops, quadratic_warmup, with_margin_mse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--doc-max-length", type=positive_int, default=256, help="document tokens (default: 256)")
    parser.add_argument("--query-max-length", type=positive_int, default=64, help="query tokens (default: 64)")
    parser.add_argument("--lambda-d", type=non_negative_float, default=1e-3,
                        help="FLOPS weight, documents (default: 1e-3)")
    parser.add_argument("--lambda-q", type=non_negative_float, default=1e-3,
                        help="FLOPS weight, queries (default: 1e-3)")
    parser.add_argument("--flops-warmup-steps", type=non_negative_int, default=100,
                        help="steps of quadratic warm-up of the FLOPS weights (default: 100)")
    parser.add_argument("--margin-mse-weight", type=non_negative_float, default=1.0,
                        help="weight of MarginMSE when --teacher is given (default: 1)")


class SpladeFamily(torch.nn.Module):
    device_ready = True  # moves its inputs to the model's device (train/loop.py refuses others off the CPU)

    def __init__(self, base: str, args):
        super().__init__()
        path = resolve_model(base)
        self.tokenizer = load_tokenizer(path)
        self.model = load_masked_lm(path)
        self.head = self.model.get_output_embeddings()
        # rows past the tokenizer's vocabulary (padded embedding matrices) name no term, as in the encoder
        self.terms = min(self.head.weight.shape[0], len(self.tokenizer))
        self.args = args

    @property
    def head_bias(self) -> torch.Tensor:
        bias = getattr(self.head, "bias", None)
        return bias[: self.terms] if bias is not None else torch.zeros(self.terms, device=self.head.weight.device)

    def represent(self, texts: list[str], max_length: int) -> torch.Tensor:
        """B x |V| max-pooled log(1 + ReLU(logits)), differentiable, without B x L x |V| tensors.

        Max pooling sends the gradient of each term to the one position holding its maximum, and
        ReLU none to a term whose maximum is <= 0. So the maxima and their positions are found
        without gradient, one vocabulary slice at a time (as the encoder does), and only the
        winning logit of each active term is recomputed with gradient: the same values and the same
        gradients as pooling the full logits (ties aside), at a fraction of the time and memory."""
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        device = self.head.weight.device
        encoded = moved(encoded, device)
        hidden = run_to_head(self.model, encoded)  # B x L x H, with gradient
        weight, bias = self.head.weight[: self.terms], self.head_bias
        padding = ~encoded["attention_mask"].bool().unsqueeze(-1)
        batch, terms = hidden.shape[0], weight.shape[0]
        maxima = torch.empty(batch, terms, device=device)
        positions = torch.empty(batch, terms, dtype=torch.long, device=device)
        with torch.no_grad():
            states = hidden.detach()
            for start in range(0, terms, VOCAB_SLICE):
                logits = (states @ weight[start:start + VOCAB_SLICE].T).masked_fill_(padding, float("-inf"))
                maxima[:, start:start + VOCAB_SLICE], positions[:, start:start + VOCAB_SLICE] = logits.max(dim=1)
            rows, ids = torch.nonzero(maxima + bias > 0, as_tuple=True)
        at = rows * hidden.shape[1] + positions[rows, ids]  # each winning position in the B*L states
        winning = (take_rows(hidden.flatten(0, 1), at) * take_rows(weight, ids)).sum(-1) + take_rows(bias, ids)
        return torch.zeros(batch, terms, dtype=winning.dtype, device=device).index_put((rows, ids), torch.log1p(torch.relu(winning)))

    def loss(self, batch: Batch, step: int):
        queries = self.represent(batch.queries, self.args.query_max_length)
        documents = self.represent(batch.documents, self.args.doc_max_length)
        scores = queries @ documents.T
        ranking = contrastive_loss(scores, batch.group_size)
        logs = {"rank": float(ranking.detach())}
        loss = with_margin_mse(ranking, logs, scores, batch.teacher, batch.group_size, self.args.margin_mse_weight)
        lambda_d = quadratic_warmup(self.args.lambda_d, step, self.args.flops_warmup_steps)
        lambda_q = quadratic_warmup(self.args.lambda_q, step, self.args.flops_warmup_steps)
        loss = loss + lambda_d * flops(documents) + lambda_q * flops(queries)
        logs["doc_nnz"] = float((documents > 0).sum(1).float().mean())
        return loss, logs

    def save(self, folder) -> None:
        self.model.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        write_family(folder, "splade", pooling="max")


@register("splade", add_arguments, reads_teacher=True)
def build(base: str, args) -> SpladeFamily:
    """SPLADE: fine-tune a masked-LM SPLADE checkpoint (contrastive + FLOPS, optional MarginMSE)."""
    return SpladeFamily(base, args)

