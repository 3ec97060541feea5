"""SPLADE: log(1 + ReLU(MLM logits)) pooled over the text's positions (max: v2/++, sum: v1).

Speed: the vocabulary projection (|V| x hidden) dominates the cost. Instead of materialising the
batch x length x |V| logits tensor and pooling it afterwards, we run the model up to the input of
its output-embedding layer, drop padding positions, and project one vocabulary slice at a time,
reducing over positions while the slice is in cache. For max pooling the bias, ReLU and log1p are
monotone, so they are applied once per term after the reduction. Results equal the direct
computation up to floating-point summation order.

Inference-free queries (`query_mode: tokenizer`) use the tokenizer alone: each distinct token of
the query gets the weight from a per-term table (`query_weights`, e.g. an IDF JSON), or 1.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from ..core.devices import current
from ..core.errors import InputError
from ..core.fastpath import PackedProjection, TracedForward, int8_dot_products, use_packed_projection
from ..core.hf import load_masked_lm, load_tokenizer, model_error
from ..core.presets import resolve_model
from ..core.quantize import Int8Projection, checked_quantize, projection_engine
from ..core.quantize import describe as describe_quantize
from .base import register
from .base import SparseEncoder, SparseVector

VOCAB_SLICE = 4096  # rows of the output embedding projected at once (~16 MiB of logits per 256 tokens)
POOLINGS = ("max", "sum")
QUERY_MODES = ("model", "tokenizer")


class _HeadInput(Exception):
    """Raised by a hook to stop the forward pass at the output-embedding layer."""

    def __init__(self, hidden: torch.Tensor):
        self.hidden = hidden


def take_rows(table: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """`table[ids]` (rows of a weight matrix; a vector's entries) with a backward that repeats bit
    for bit: indexing's backward adds the repeated rows' gradients in an order that varies between
    runs at 2 or more threads (torch 2.13 on CPU), an embedding lookup's adds them in the order the
    ids come, as indexing does at one thread."""
    if table.dim() == 1:
        return torch.nn.functional.embedding(ids, table.unsqueeze(1)).squeeze(-1)
    return torch.nn.functional.embedding(ids, table)


def run_to_head(model, encoded) -> torch.Tensor:
    """The hidden states that feed the model's output-embedding layer (batch x length x hidden),
    with gradient when enabled; the vocabulary projection itself is not run."""
    hook = model.get_output_embeddings().register_forward_pre_hook(SpladeEncoder._stop_at_head)
    try:
        model(**encoded)
    except _HeadInput as stop:
        return stop.hidden
    finally:
        hook.remove()
    raise RuntimeError("the model never reached its output-embedding layer")


@register("splade")
class SpladeEncoder(SparseEncoder):
    def __init__(
        self,
        model: str,
        pooling: str = "max",
        doc_max_length: int = 256,
        query_max_length: int = 64,
        doc_top_k: int | None = None,
        query_top_k: int | None = None,
        query_mode: str = "model",
        query_weights: str | None = None,
        quantize: str = "none",
    ):
        if pooling not in POOLINGS:
            raise InputError(f"pooling {pooling!r} is not one of {', '.join(POOLINGS)}")
        if query_mode not in QUERY_MODES:
            raise InputError(f"query_mode {query_mode!r} is not one of {', '.join(QUERY_MODES)}")
        self.model_reference = model
        self.path = resolve_model(model)
        self.pooling = pooling
        self.max_length = {"documents": int(doc_max_length), "queries": int(query_max_length)}
        self.top_k = {"documents": doc_top_k, "queries": query_top_k}
        self.query_mode = query_mode
        self.tokenizer = load_tokenizer(self.path)
        self.placement = current()  # the device and dtype the model runs on (core/devices.py)
        # Documents always need the model, even for inference-free queries. float32 whatever dtype the
        # weights are stored in: transformers 5 keeps a bfloat16/float16 checkpoint in that dtype, which
        # the float32 projection below cannot multiply (and which is slow and imprecise on CPU).
        self.model = load_masked_lm(self.path)
        head = self.model.get_output_embeddings()
        # Rows past the tokenizer's vocabulary (padded embedding matrices) name no term: drop them.
        terms = min(head.weight.shape[0], len(self.tokenizer))
        self.vocab = self.tokenizer.convert_ids_to_tokens(list(range(terms)))
        self._head_weight = head.weight.detach()[:terms]
        bias = getattr(head, "bias", None)
        self._head_bias = bias.detach()[:terms] if bias is not None else torch.zeros(terms, device=self._head_weight.device)
        head.register_forward_pre_hook(self._stop_at_head)
        # int8: the vocabulary projection as an exact-rescored filter (core/quantize.py); the
        # transformer layers stay float32 (docs/quantization.md measures why)
        self.quantize = checked_quantize(quantize)
        self._int8 = Int8Projection(self._head_weight, self._head_bias) if self.quantize == "int8" else None
        self.query_weights_source = query_weights
        self.query_weight_table = self._load_query_weights(query_weights) if query_mode == "tokenizer" else None
        # one query per forward pass on the CPU in float32: a checked trace of the transformer and a
        # checked projection on a once-reordered weight (core/fastpath.py; the same numbers), for an
        # int8 encoder too where the CPU has no int8 dot products (there it beats the int8 filter)
        single = self.placement.on_cpu and not self.placement.half
        self._traced = TracedForward(lambda ids: self.head_inputs({"input_ids": ids}), self.head_inputs,
                                     self.model) if single else None
        # chosen here, as the trace is (the environment switches apply to encoders built after them);
        # the packed projection itself is built by the first single query that uses it
        self._use_packed = single and self.pooling == "max" and use_packed_projection() and (
            self._int8 is None or not int8_dot_products())
        self._packed = None

    # -- model side -------------------------------------------------------------------------
    @staticmethod
    def _stop_at_head(_module, inputs):
        raise _HeadInput(inputs[0])

    def head_inputs(self, encoded) -> torch.Tensor:
        """Hidden states that feed the output-embedding layer (batch x length x hidden)."""
        try:
            self.model(**encoded)
        except _HeadInput as stop:
            return stop.hidden
        raise RuntimeError("the model never reached its output-embedding layer")

    @torch.inference_mode()
    def term_weights(self, texts: list[str], side: str) -> torch.Tensor:
        """Dense batch x |V| SPLADE weights for `texts` (float32)."""
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                                 return_tensors="pt")
        encoded = self.placement.to(encoded)
        single = side == "queries" and len(texts) == 1 and self._traced is not None
        with self.placement.autocast():  # the transformer only: the projection below stays float32
            hidden = self._traced(encoded) if single else self.head_inputs(encoded)
        mask = encoded["attention_mask"].bool()
        weight, bias = self._head_weight, self._head_bias
        if single and self._use_packed:
            return torch.log1p(torch.relu(self._query_projection()(hidden[0][mask[0]].float()) + bias))[None]
        if self._int8 is not None:
            return self._int8_weights(hidden, mask)
        out = torch.empty(len(texts), weight.shape[0], dtype=torch.float32, device=weight.device)
        for row in range(len(texts)):
            positions = hidden[row][mask[row]].float()
            if self.pooling == "max":
                out[row] = self._max_logits(positions)
                continue
            for start in range(0, weight.shape[0], VOCAB_SLICE):
                logits = positions @ weight[start:start + VOCAB_SLICE].T
                logits += bias[start:start + VOCAB_SLICE]
                out[row, start:start + VOCAB_SLICE] = torch.log1p(torch.relu(logits)).sum(0)
        if self.pooling == "max":
            out = torch.log1p(torch.relu(out + bias))
        return out.cpu()

    def _max_logits(self, positions: torch.Tensor) -> torch.Tensor:
        """max over `positions` (length x hidden) of their vocabulary logits, bias not added."""
        weight = self._head_weight
        return torch.cat([(positions @ weight[start:start + VOCAB_SLICE].T).amax(0)
                          for start in range(0, weight.shape[0], VOCAB_SLICE)])

    def _query_projection(self) -> PackedProjection:
        """The packed projection (core/fastpath.py), built on first use: a corpus encoder never pays
        for its reordered copy of the output embedding. An int8 encoder takes it only on a CPU
        without int8 dot products, where it is the faster way to the same impacts."""
        if self._packed is None:
            self._packed = PackedProjection(self._head_weight, self._max_logits)
        return self._packed

    def _int8_weights(self, hidden: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """As the float32 path: a term is non-zero iff some position's logit + bias > 0, which the
        int8 filter bounds; only those terms are projected again in float32."""
        out = torch.zeros(hidden.shape[0], self._head_weight.shape[0], dtype=torch.float32)
        for row in range(hidden.shape[0]):
            positions = hidden[row][mask[row]].float()
            terms, best = self._int8.max_logits(positions)
            if self.pooling == "max":
                out[row, terms] = torch.log1p(torch.relu(best))
            else:
                logits = positions @ self._head_weight[terms].T + self._head_bias[terms]
                out[row, terms] = torch.log1p(torch.relu(logits)).sum(0)
        return out

    def _to_vectors(self, dense: torch.Tensor, side: str) -> list[SparseVector]:
        top_k = self.top_k[side]
        vectors = []
        for row in dense:
            if top_k:
                values, ids = torch.topk(row, min(int(top_k), row.numel()))
                keep = values > 0
                values, ids = values[keep], ids[keep]
            else:
                ids = torch.nonzero(row, as_tuple=True)[0]
                values = row[ids]
            vectors.append({self.vocab[i]: w for i, w in zip(ids.tolist(), values.tolist())})
        return vectors

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        return self._to_vectors(self.term_weights(texts, "documents"), "documents")

    # -- query side --------------------------------------------------------------------------
    def _load_query_weights(self, source: str | None) -> dict[str, float] | None:
        if not source:
            return None
        path = Path(source)
        if not path.is_absolute() and (Path(self.path) / source).is_file():
            path = Path(self.path) / source
        elif not path.is_file() and not Path(self.path).exists():
            try:
                from huggingface_hub import hf_hub_download

                path = Path(hf_hub_download(self.path, source))
            except Exception as err:
                raise model_error(f"{self.path}/{source}", err) from None
        try:
            table = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as err:
            raise InputError(f"{path}: cannot read query weights ({err})") from None
        if not isinstance(table, dict):
            raise InputError(f"{path}: query weights must be a JSON object {{term: weight}}")
        return {str(k): float(v) for k, v in table.items()}

    def _tokenizer_vectors(self, texts: list[str]) -> list[SparseVector]:
        vectors = []
        for text in texts:
            ids = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                 max_length=self.max_length["queries"])["input_ids"]
            vector = {}
            for token in dict.fromkeys(self.tokenizer.convert_ids_to_tokens(ids)):
                weight = self.query_weight_table.get(token, 0.0) if self.query_weight_table else 1.0
                if weight > 0:
                    vector[token] = weight
            top_k = self.top_k["queries"]
            if top_k and len(vector) > top_k:
                vector = dict(sorted(vector.items(), key=lambda kv: -kv[1])[: int(top_k)])
            vectors.append(vector)
        return vectors

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        if self.query_mode == "tokenizer":
            return self._tokenizer_vectors(texts)
        return self._to_vectors(self.term_weights(texts, "queries"), "queries")

    def describe(self) -> dict:
        return {
            "family": "splade",
            "model": self.model_reference,
            "model_path": self.path,
            "pooling": self.pooling,
            "doc_max_length": self.max_length["documents"],
            "query_max_length": self.max_length["queries"],
            "doc_top_k": self.top_k["documents"],
            "query_top_k": self.top_k["queries"],
            "query_mode": self.query_mode,
            "query_weights": self.query_weights_source,
            **self.placement.identity(),
            **describe_quantize(self.quantize, "vocabulary projection (int8 filter, exact float32 rescoring)",
                                projection_engine()),
        }

