"""SparseEmbed (Kong et al., SIGIR 2023): SPLADE terms, each carrying a small contextual embedding.

Sparse part: MLM logits M (L x |V|), w_i = max_j log(1 + ReLU(M_ji)), the top-k terms kept (64 for
queries, 256 for documents by default): the activated terms I. Each activated term i gets
e_i = ReLU(W (softmax_j(M_ji) . S) + b), S the encoder's last hidden states (L x H), W: H -> H',
with one head for queries and one for documents. The score sums e_i^Q . e_i^D over the terms both
sides activated; the sparse weights only choose the terms (w^Q . w^D is the auxiliary score and
what Lucene ranks candidates by).

A checkpoint is a masked-LM folder plus `sparseembed_heads.pt` (the two heads) and lsr_family.json.
`encode corpus --encoder sparseembed --dense-store STORE` writes the sparse part through the shared
writer and the documents' term embeddings into a SparseEmbed store (`lsr_pyserini/stores/sparseembed.py`).
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import torch

from ...core.errors import InputError
from ...core.devices import cpu_state_dict, current
from ...core.hf import FAMILY_FILE, load_masked_lm, load_tokenizer
from ...core.presets import resolve_model
from ...kernels.int8 import Int8Projection, projection_engine
from ...kernels.int8 import describe as describe_quantize
from ..registry import encoder as register
from .config import DIMENSIONS, SCHEMA
from ..base import SparseEncoder, SparseVector
from ...kernels.vocabulary import HeadStop, take_rows, vocabulary_maxima

HEADS_FILE = "sparseembed_heads.pt"
SIDES = ("queries", "documents")


class SparseEmbedModel(torch.nn.Module):
    """The masked LM and the two embedding heads; `represent` is shared by training and encoding."""

    def __init__(self, path: str, dim: int | None = None, seed: int = 0, fresh_heads: bool = False):
        """`fresh_heads`: initialise new heads (seeded) even when the checkpoint has some."""
        super().__init__()
        heads_file = Path(path) / HEADS_FILE
        state = None
        if heads_file.is_file() and not fresh_heads:
            state = torch.load(heads_file, map_location="cpu", weights_only=True)
            stored = int(state["documents.weight"].shape[0])
            if dim is not None and dim != stored:
                raise InputError(f"checkpoint {path} has SparseEmbed heads of dimension {stored}, not {dim}")
            dim = stored
        elif dim is None:
            raise InputError(f"checkpoint {path} has no SparseEmbed heads ({HEADS_FILE}); train one with "
                             f"`python -m lsr_pyserini.train sparseembed`")
        if dim not in DIMENSIONS:
            raise InputError(f"embedding dimension must be one of {', '.join(map(str, DIMENSIONS))}, got {dim}")
        # a trained SparseEmbed checkpoint, or a base to train from (plain or SPLADE-trained MLM)
        marker = Path(path) / FAMILY_FILE
        trained_as = json.loads(marker.read_text()).get("family") if marker.is_file() else None
        base_family = "splade" if state is None and trained_as == "splade" else "sparseembed"
        self.mlm = load_masked_lm(path, family=base_family)
        self.tokenizer = load_tokenizer(path)
        hidden = self.mlm.config.hidden_size
        generator = torch.Generator().manual_seed(seed)
        self.heads = torch.nn.ModuleDict({side: torch.nn.Linear(hidden, dim) for side in SIDES})
        for head in self.heads.values():  # seeded, so an untrained model is reproducible
            torch.nn.init.normal_(head.weight, std=hidden ** -0.5, generator=generator)
            torch.nn.init.zeros_(head.bias)
        if state is not None:
            self.heads.load_state_dict(state)
        self.placement = current()  # the device and dtype the model runs on (core/devices.py)
        self.placement.to(self.heads)
        self.dim = dim
        self.terms = min(self.mlm.get_output_embeddings().weight.shape[0], len(self.tokenizer))
        self._states = None
        self.int8 = None  # an Int8Projection once `SparseEmbedEncoder(quantize="int8")` sets it
        self.mlm.base_model.register_forward_hook(self._capture_states)
        self.head_inputs = HeadStop(self.mlm)

    def _capture_states(self, _module, _inputs, output):
        self._states = output[0]

    def represent(self, texts: list[str], side: str, max_length: int, top_k: int):
        """(weights B x k, term ids B x k, active B x k, embeddings B x k x H') of the top-k terms.

        Terms past a text's activated ones (weight 0) have `active` False and zero embeddings."""
        weights, ids, active, context = self.select(texts, max_length, top_k)
        return weights, ids, active, self.embed(context, active, side)

    def embed(self, context: torch.Tensor, active: torch.Tensor, side: str) -> torch.Tensor:
        """e_i = ReLU(W softmax_j(M_ji) . S + b) from the contexts (B x k x H), zero where inactive."""
        return torch.relu(self.heads[side](context)) * active.unsqueeze(-1)

    def select(self, texts: list[str], max_length: int, top_k: int):
        """(weights, term ids, active, contexts softmax_j(M_ji) . S: B x k x H) of the top-k terms.

        The top-k terms are chosen without gradient, projecting one vocabulary slice at a time
        (as the SPLADE encoder does); the chosen terms' logits are then recomputed with gradient,
        so training never holds a B x L x |V| tensor."""
        encoded = self.tokenizer(texts, padding=True, truncation=True, max_length=max_length,
                                 return_tensors="pt")
        encoded = self.placement.to(encoded)
        with self.placement.autocast():  # the transformer only: projections and pooling stay float32
            head_input = self.head_inputs(encoded).float()  # B x L x H, what the vocabulary projection reads
        states, self._states = self._states.float(), None  # B x L x H, the encoder's last hidden states
        padding = ~encoded["attention_mask"].bool().unsqueeze(-1)
        padded = bool(padding.any())  # a single text (one query at a time) has none: skip the no-op fills
        weight, bias = self._head_weight(), self._head_bias()
        with torch.no_grad():
            if self.int8 is not None:  # the same top k, chosen through the int8 filter (kernels/int8.py)
                mask = encoded["attention_mask"].bool()
                ids = torch.stack([self.int8.top_max_logits(head_input[row][mask[row]], top_k)[0]
                                   for row in range(len(texts))])
            else:
                best = vocabulary_maxima(head_input, weight, padding if padded else None)
                ids = torch.topk(best + bias, min(int(top_k), weight.shape[0]), dim=1).indices  # B x k
        chosen = torch.einsum("blh,bkh->blk", head_input, take_rows(weight, ids)) + take_rows(bias, ids).unsqueeze(1)
        if padded:
            chosen = chosen.masked_fill(padding, float("-inf"))  # B x L x k
        weights = torch.log1p(torch.relu(chosen.amax(dim=1)))  # monotone: pool first
        active = weights > 0
        attention = torch.softmax(chosen, dim=1)  # over positions, the MLM logits as scores
        return weights, ids, active, torch.einsum("blk,blh->bkh", attention, states)

    def _head_weight(self) -> torch.Tensor:
        return self.mlm.get_output_embeddings().weight[:self.terms]

    def _head_bias(self) -> torch.Tensor:
        bias = getattr(self.mlm.get_output_embeddings(), "bias", None)
        return bias[:self.terms] if bias is not None else torch.zeros(self.terms, device=self._head_weight().device)

    def fingerprint(self) -> str:
        """SHA-256 over every parameter: stores record it, re-rankers refuse a different model."""
        digest = hashlib.sha256()
        for name, tensor in sorted(self.state_dict().items()):
            digest.update(name.encode())
            digest.update(tensor.detach().float().cpu().contiguous().numpy().tobytes())
        return digest.hexdigest()[:16]

    def save(self, folder) -> None:
        from ...core.hf import write_config

        self.mlm.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        torch.save(cpu_state_dict(self.heads), Path(folder) / HEADS_FILE)  # loads without a GPU
        write_config(folder, "sparseembed", {**SCHEMA.defaults(), "dim": self.dim})  # `train` records its full config


def embedding_scores(query_ids: torch.Tensor, query_embeddings: torch.Tensor, doc_ids: torch.Tensor,
                     doc_embeddings: torch.Tensor) -> torch.Tensor:
    """Q x D: sum over terms both sides activated of e^Q . e^D (inactive terms have zero embeddings)."""
    match = query_ids[:, :, None, None] == doc_ids[None, None, :, :]  # Q x kq x D x kd
    dots = torch.einsum("qah,dbh->qadb", query_embeddings, doc_embeddings)
    return (dots * match).sum(dim=(1, 3))


@register("sparseembed")
class SparseEmbedEncoder(SparseEncoder):
    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "sparseembed encoder")
        self.model_reference = model
        self.path = resolve_model(model)
        self.model = SparseEmbedModel(self.path, dim=config["dim"]).eval()  # another dim than the heads': refused
        self.vocab = self.model.tokenizer.convert_ids_to_tokens(list(range(self.model.terms)))
        self.max_length = {"documents": int(config["doc_max_length"]), "queries": int(config["query_max_length"])}
        self.top_k = {"documents": int(config["doc_top_k"]), "queries": int(config["query_top_k"])}
        self._fingerprint = None
        self.quantize = config["quantize"]
        if self.quantize == "int8":
            self.model.int8 = Int8Projection(self.model._head_weight().detach(), self.model._head_bias().detach())

    @property
    def fingerprint(self) -> str:
        if self._fingerprint is None:
            self._fingerprint = self.model.fingerprint()
        return self._fingerprint

    @torch.inference_mode()
    def terms_and_embeddings(self, texts: list[str], side: str) -> list[tuple[SparseVector, np.ndarray, np.ndarray]]:
        """Per text: the sparse vector {term: weight}, activated term ids (ascending) and their
        embeddings (k x H', float32), in the same term order."""
        weights, ids, active, embeddings = self.model.represent(texts, side, self.max_length[side], self.top_k[side])
        results = []
        for row in range(len(texts)):
            keep = active[row]
            term_ids, order = torch.sort(ids[row][keep])
            values = weights[row][keep][order]
            vector = {self.vocab[i]: w for i, w in zip(term_ids.tolist(), values.tolist())}
            results.append((vector, term_ids.cpu().numpy().astype(np.int64),
                            embeddings[row][keep][order].float().cpu().numpy()))
        return results

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        return [vector for vector, _, _ in self.terms_and_embeddings(texts, "documents")]

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        return [vector for vector, _, _ in self.terms_and_embeddings(texts, "queries")]

    has_dense_side = True

    def encode_documents_with_dense(self, texts: list[str]):
        """(sparse vector, (term ids, embeddings)) per document, for `encode corpus --dense-store`."""
        return [(vector, (ids, emb)) for vector, ids, emb in self.terms_and_embeddings(texts, "documents")]

    def open_dense_store(self, path: str, settings: dict, overwrite: bool = False):
        """The writer for this encoder's `--dense-store`: a SparseEmbed term-embedding store."""
        from ...stores.sparseembed import SparseEmbedStoreWriter

        return SparseEmbedStoreWriter(path, {**settings, "encoder": self.describe(), "identity": self.identity()},
                                      overwrite=overwrite)

    def identity(self) -> dict:
        """What a store must match for this model's queries to score its documents."""
        return {"model": self.model_reference, "fingerprint": self.fingerprint, "dim": self.model.dim,
                "vocab_size": self.model.terms}

    def describe(self) -> dict:
        return {"family": "sparseembed", "model": self.model_reference, "model_path": self.path,
                "dim": self.model.dim, "fingerprint": self.fingerprint,
                "doc_max_length": self.max_length["documents"], "query_max_length": self.max_length["queries"],
                "doc_top_k": self.top_k["documents"], "query_top_k": self.top_k["queries"],
                **self.model.placement.identity(),
                **describe_quantize(self.quantize, "vocabulary projection (int8 filter, exact float32 rescoring)",
                                    projection_engine())}

