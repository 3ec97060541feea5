"""SPLADE's model: log(1 + ReLU(MLM logits)) pooled over a text's positions (max: v2/++, sum: v1).

`SpladeModel.represent(texts, side)` is the one forward pass: training calls it with gradients,
the encoder under inference mode. The model runs up to the input of its output-embedding layer and
projects one vocabulary slice at a time (`kernels/vocabulary.py`); for max pooling the bias, ReLU
and log1p are monotone, so they are applied once per term after the reduction.

- With gradients (training), max pooling finds each term's maximum and its position without
  gradient, then recomputes only the winning logit of each active term with gradient: max pooling
  sends a term's gradient to the one position holding its maximum and ReLU none to a term whose
  maximum is <= 0, so these are the values and gradients of pooling the full logits (ties aside),
  without a B x L x |V| tensor. Sum pooling projects slice by slice with gradient.
- Under inference mode, each text's positions are projected alone (padding dropped), in float32;
  the fast paths (`enable_fast_paths`: a checked trace of the transformer and the packed
  projection for one query on the CPU, the int8 filter) give the same numbers.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ...core.devices import current, moved
from ...core.hf import load_masked_lm, load_tokenizer
from ...kernels.fastpath import PackedProjection, TracedForward, int8_dot_products, use_packed_projection
from ...kernels.int8 import Int8Projection
from ...kernels.vocabulary import HeadStop, take_rows, vocabulary_maxima, vocabulary_sums

SIDES = {"documents": "doc_max_length", "queries": "query_max_length"}


class SpladeModel(torch.nn.Module):
    """A masked-LM checkpoint with its tokenizer and SPLADE settings (`config`: the family's schema)."""

    def __init__(self, path: str, config: dict, family: str = "splade"):
        super().__init__()
        self.tokenizer = load_tokenizer(path)
        self.mlm = load_masked_lm(path, family=family)
        self.placement = current()  # the device and dtype it runs on (core/devices.py)
        self.config = config  # the family's settings (models/splade/config.py), saved beside the weights
        self.pooling = config["pooling"]
        self.max_length = {side: int(config[key]) for side, key in SIDES.items()}
        self.head = self.mlm.get_output_embeddings()
        # rows past the tokenizer's vocabulary (padded embedding matrices) name no term: dropped
        self.terms = min(self.head.weight.shape[0], len(self.tokenizer))
        self.head_inputs = HeadStop(self.mlm)
        self._traced = self._packed = self._int8 = None
        self._use_packed = False

    def head_weight(self) -> torch.Tensor:
        return self.head.weight[: self.terms]

    def head_bias(self) -> torch.Tensor:
        bias = getattr(self.head, "bias", None)
        return bias[: self.terms] if bias is not None else torch.zeros(self.terms, device=self.head.weight.device)

    def tokenize(self, texts: list[str], side: str):
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                                 return_tensors="pt")
        return moved(encoded, self.head.weight.device)

    # -- the forward pass -------------------------------------------------------------------
    def represent(self, texts: list[str], side: str) -> torch.Tensor:
        """B x |V| SPLADE weights of `texts` (side 'documents' or 'queries' sets the length)."""
        encoded = self.tokenize(texts, side)
        single = side == "queries" and len(texts) == 1 and self._traced is not None and not torch.is_grad_enabled()
        with self.placement.autocast():  # the transformer only: the projection stays float32
            hidden = self._traced(encoded) if single else self.head_inputs(encoded)
        mask = encoded["attention_mask"].bool()
        if torch.is_grad_enabled():
            return self._pooled_with_gradient(hidden, mask)
        return self._pooled(hidden, mask, single)

    def _pooled_with_gradient(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        weight, bias = self.head_weight(), self.head_bias()
        padding = ~mask.unsqueeze(-1)
        if self.pooling == "sum":
            rows = [vocabulary_sums(hidden[row][mask[row]], weight, bias) for row in range(hidden.shape[0])]
            return torch.stack(rows)
        batch, terms = hidden.shape[0], weight.shape[0]
        with torch.no_grad():
            maxima, positions = vocabulary_maxima(hidden.detach(), weight, padding, positions=True)
            rows, ids = torch.nonzero(maxima + bias > 0, as_tuple=True)
        at = rows * hidden.shape[1] + positions[rows, ids]  # each winning position in the B*L states
        winning = (take_rows(hidden.flatten(0, 1), at) * take_rows(weight, ids)).sum(-1) + take_rows(bias, ids)
        return torch.zeros(batch, terms, dtype=winning.dtype, device=hidden.device).index_put(
            (rows, ids), torch.log1p(torch.relu(winning)))

    def _pooled(self, hidden: torch.Tensor, mask: torch.Tensor, single: bool) -> torch.Tensor:
        weight, bias = self.head_weight().detach(), self.head_bias().detach()
        if single and self._use_packed:
            return torch.log1p(torch.relu(self._query_projection()(hidden[0][mask[0]].float()) + bias))[None]
        if self._int8 is not None:
            return self._int8_weights(hidden, mask, weight, bias)
        out = torch.empty(hidden.shape[0], weight.shape[0], dtype=torch.float32, device=weight.device)
        for row in range(hidden.shape[0]):
            positions = hidden[row][mask[row]].float()
            out[row] = self._max_logits(positions) if self.pooling == "max" else \
                vocabulary_sums(positions, weight, bias)
        if self.pooling == "max":
            out = torch.log1p(torch.relu(out + bias))
        return out.cpu()

    # -- fast paths (inference only; the same numbers) ----------------------------------------
    def enable_fast_paths(self, quantize: str) -> None:
        """One query per forward pass on the CPU in float32: a checked trace of the transformer and a
        checked projection on a once-reordered weight (kernels/fastpath.py; the same numbers), for an
        int8 model too where the CPU has no int8 dot products (there it beats the int8 filter);
        `quantize` int8: the vocabulary projection as an exact-rescored filter (kernels/int8.py; the
        transformer layers stay float32: docs/quantization.md measures why)."""
        weight, bias = self.head_weight().detach(), self.head_bias().detach()
        self._int8 = Int8Projection(weight, bias) if quantize == "int8" else None
        single = self.placement.on_cpu and not self.placement.half
        self._traced = TracedForward(lambda ids: self.head_inputs({"input_ids": ids}), self.head_inputs,
                                     self.mlm) if single else None
        # chosen here, as the trace is (the environment switches apply to models built after them);
        # the packed projection itself is built by the first single query that uses it
        self._use_packed = single and self.pooling == "max" and use_packed_projection() and (
            self._int8 is None or not int8_dot_products())

    def _max_logits(self, positions: torch.Tensor) -> torch.Tensor:
        return vocabulary_maxima(positions, self.head_weight().detach())

    def _query_projection(self) -> PackedProjection:
        """The packed projection, built on first use: a corpus encoder never pays for its reordered
        copy of the output embedding."""
        if self._packed is None:
            self._packed = PackedProjection(self.head_weight().detach(), self._max_logits)
        return self._packed

    def _int8_weights(self, hidden, mask, weight, bias) -> torch.Tensor:
        """As the float32 path: a term is non-zero iff some position's logit + bias > 0, which the
        int8 filter bounds; only those terms are projected again in float32."""
        out = torch.zeros(hidden.shape[0], weight.shape[0], dtype=torch.float32)
        for row in range(hidden.shape[0]):
            positions = hidden[row][mask[row]].float()
            terms, best = self._int8.max_logits(positions)
            if self.pooling == "max":
                out[row, terms] = torch.log1p(torch.relu(best))
            else:
                logits = positions @ weight[terms].T + bias[terms]
                out[row, terms] = torch.log1p(torch.relu(logits)).sum(0)
        return out

    def save(self, folder, query_weights: dict[str, float] | None = None, strict: bool = True) -> None:
        """The masked LM and its tokenizer in the sentence-transformers layout (models/st_layout.py):
        `SparseEncoder(folder)` gives this model's weights. Inference-free queries (`query_mode`
        tokenizer) take `query_weights`, the {term: weight} table, also written as the config names
        it where that is a file name of the folder (the family marker records the name). `strict`
        False: a top k sentence-transformers cannot hold is a warning, not an error."""
        from ..st_layout import write_inference_free_splade, write_splade

        rows = int(self.head.weight.shape[0])
        if self.config["query_mode"] != "tokenizer":
            self._save_transformer(folder)
            write_splade(folder, self.config, rows, strict)
            return
        write_inference_free_splade(folder, self.config, rows, self._save_transformer, self.tokenizer, query_weights,
                                    strict)
        source = self.config.get("query_weights")
        if query_weights is not None and source and not Path(source).is_absolute():
            target = Path(folder) / source
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(json.dumps(query_weights, indent=0) + "\n")

    def _save_transformer(self, folder) -> None:
        self.mlm.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
