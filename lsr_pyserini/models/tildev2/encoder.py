"""TILDEv2 (Zhuang & Zuccon, 2021): contextualised exact matching.

A BERT encoder plus a one-output linear head with ReLU (`tok_proj`) gives one weight per passage
token; the document vector keeps the largest weight of each token of the (expanded) passage,
special tokens left out. The query side is the tokenizer alone: each query token counts once per
occurrence, so the Lucene impact score sum_i w(d, q_i) is exactly TILDEv2's score and no model runs
at query time.

Checkpoint layout, as published (e.g. `ielab/TILDEv2-TILDE200-exp`) and as this toolkit saves it:
a BERT config, weights named `bert.*` and `tok_proj.weight` / `tok_proj.bias`, and the tokenizer.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path

import torch

from ...core.errors import InputError
from ...core.devices import current, placed
from ...core.hf import check_family, load_quietly, load_tokenizer, model_error
from ...core.presets import resolve_model
from ...kernels.int8 import quantize_linears
from ...kernels.int8 import describe as describe_quantize
from ..registry import encoder as register
from .config import SCHEMA
from ..base import SparseEncoder, SparseVector


def _head_state(path: str) -> dict[str, torch.Tensor]:
    """The checkpoint's `tok_proj.*` tensors (empty when it has no head). From safetensors only
    those tensors are read: BertModel.from_pretrained loads the encoder weights itself."""
    folder = Path(path)
    if (folder / "model.safetensors").is_file():
        from safetensors import safe_open

        with safe_open(str(folder / "model.safetensors"), framework="pt") as handle:
            return {k: handle.get_tensor(k) for k in handle.keys() if k.startswith("tok_proj.")}
    if (folder / "pytorch_model.bin").is_file():
        state = torch.load(folder / "pytorch_model.bin", map_location="cpu", weights_only=True)
        return {k: v for k, v in state.items() if k.startswith("tok_proj.")}
    raise InputError(f"model {path!r}: no model.safetensors or pytorch_model.bin (a local TILDEv2 folder is needed)")


class TildeV2Model(torch.nn.Module):
    """BERT + tok_proj; `from_pretrained` accepts a TILDEv2 folder, or any BERT checkpoint to start
    training from (the head is then freshly initialised)."""

    def __init__(self, bert, head: torch.nn.Linear):
        super().__init__()
        self.bert = bert
        self.tok_proj = head
        self.placement = current()  # the device and dtype it runs on (core/devices.py)

    @classmethod
    def from_pretrained(cls, path: str, require_head: bool = True) -> "TildeV2Model":
        from transformers import BertConfig, BertModel

        check_family(path, "tildev2")
        if not Path(path).is_dir():
            raise InputError(f"model {path!r}: a local TILDEv2 folder is needed (download it first)")
        try:
            config = BertConfig.from_pretrained(path)
        except Exception as err:
            raise model_error(path, err) from None
        state = _head_state(path)
        has_head = "tok_proj.weight" in state
        if require_head and not has_head:
            raise InputError(f"model {path!r}: not a TILDEv2 checkpoint (no tok_proj.weight)")
        bert = load_quietly(BertModel, path, "BERT weights missing", add_pooling_layer=False)
        head = torch.nn.Linear(config.hidden_size, 1)
        if has_head:
            head.load_state_dict({"weight": state["tok_proj.weight"], "bias": state["tok_proj.bias"]})
        else:
            torch.nn.init.normal_(head.weight, std=config.initializer_range)
            torch.nn.init.zeros_(head.bias)
        return current().to(cls(bert, head))  # on the active device (core/devices.py)

    def token_weights(self, encoded) -> torch.Tensor:
        """B x L non-negative weights, one per position."""
        with self.placement.autocast():  # the transformer only: the head and ReLU stay float32
            hidden = self.bert(**encoded).last_hidden_state
        return torch.relu(self.tok_proj(hidden.float())).squeeze(-1)

    def save(self, folder) -> None:
        from safetensors.torch import save_file

        self.bert.config.save_pretrained(folder)
        state = {f"bert.{k}": v.contiguous() for k, v in self.bert.state_dict().items()}
        state.update({f"tok_proj.{k}": v.contiguous() for k, v in self.tok_proj.state_dict().items()})
        save_file(state, str(Path(folder) / "model.safetensors"), metadata={"format": "pt"})


def passage_positions(encoded, special: torch.Tensor) -> torch.Tensor:
    """B x L: the positions whose weight counts, real tokens that are not special tokens (encoding,
    training and the head's BM25 fit all read this)."""
    return encoded["attention_mask"].bool() & ~torch.isin(encoded["input_ids"], special)


def document_vectors(weights: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor,
                     vocab: list[str]) -> list[SparseVector]:
    """Largest weight per distinct token of each row (positions where `mask` is False skipped)."""
    vectors = []
    for row_weights, row_ids, row_mask in zip(weights.tolist(), input_ids.tolist(), mask.tolist()):
        vector: dict[str, float] = {}
        for weight, token_id, keep in zip(row_weights, row_ids, row_mask):
            if keep and weight > 0:
                term = vocab[token_id]
                if weight > vector.get(term, 0.0):
                    vector[term] = weight
        vectors.append(vector)
    return vectors


@register("tildev2")
class TildeV2Encoder(SparseEncoder):
    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "tildev2 encoder")
        self.model_reference = model
        self.path = resolve_model(model)
        check_family(self.path, "tildev2")
        self.tokenizer = load_tokenizer(self.path)
        self.placement = current()  # the device and dtype the model runs on (core/devices.py)
        self._model = None  # loaded on first document batch: queries need the tokenizer only
        self.max_length = {"documents": int(config["doc_max_length"]), "queries": int(config["query_max_length"])}
        self.vocab = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        self.quantize = config["quantize"]

    @property
    def model(self) -> TildeV2Model:
        if self._model is None:
            with placed(self.placement):
                self._model = TildeV2Model.from_pretrained(self.path).eval()
            if self.quantize == "int8":  # the BERT encoder's Linear layers (tok_proj: one output, kept float32)
                quantize_linears(self._model.bert)
        return self._model

    @torch.inference_mode()
    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length["documents"],
                                 return_tensors="pt")
        encoded = self.placement.to(encoded)
        weights = self.model.token_weights(encoded)
        mask = passage_positions(encoded, torch.tensor(self.tokenizer.all_special_ids,
                                                       device=encoded["input_ids"].device))
        return document_vectors(weights, encoded["input_ids"], mask, self.vocab)

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        vectors = []
        for text in texts:
            ids = self.tokenizer(text, add_special_tokens=False, truncation=True,
                                 max_length=self.max_length["queries"])["input_ids"]
            vectors.append({term: float(n) for term, n in Counter(self.tokenizer.convert_ids_to_tokens(ids)).items()})
        return vectors

    def describe(self) -> dict:
        return {"family": "tildev2", "model": self.model_reference, "model_path": self.path,
                "doc_max_length": self.max_length["documents"], "query_max_length": self.max_length["queries"],
                **self.placement.identity(), **describe_quantize(self.quantize, "every Linear of the BERT encoder")}

