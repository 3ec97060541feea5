"""BGE-M3 (Chen et al. 2024): one XLM-RoBERTa forward pass, three heads.

A checkpoint in the published layout (e.g. `BAAI/bge-m3`) is a folder with the XLM-RoBERTa encoder
(`config.json`, `model.safetensors`, tokenizer files) and two extra heads saved as state dicts of
`torch.nn.Linear`: `sparse_linear.pt` (hidden -> 1) and `colbert_linear.pt` (hidden -> colbert dim).
From the last hidden states H (batch x length x hidden):

- **sparse** (what Lucene indexes): each position's weight is ReLU(sparse_linear(H)); a token that
  occurs several times keeps its largest weight; the tokens FlagEmbedding drops are dropped (cls,
  eos, pad, unk; bos and sep are the same ids in XLM-R). `<mask>` is kept, as FlagEmbedding does.
- **dense**: H[:, 0] ([CLS]), L2-normalised.
- **multi-vector (ColBERT)**: colbert_linear(H[:, 1:]) at non-padding positions (so `</s>` is
  included and `<s>` is not), each vector L2-normalised.

A body other than XLM-RoBERTa (e.g. the BERT that `train bgem3` fine-tunes) is loaded when the
folder's family marker (lsr_family.json) says bgem3; the dropped tokens are read from its tokenizer
by role ([CLS], [SEP], [PAD], [UNK] for a BERT), so the heads are computed the same way.

Scores, as in FlagEmbedding: dense = dot product; sparse = sum over shared terms of the weight
products; colbert = mean over query vectors of the best dot product with a document vector; the
hybrid score is the weighted sum, by default the paper's dense + 0.3 x sparse (`HYBRID_WEIGHTS`).

Terms are the tokenizer's pieces (`▁word`, `ing`, ...), one term per vocabulary id (FlagEmbedding
decodes ids to text, which merges `▁word` and `word`). Lucene splits pretokenized text on
whitespace, so `term_for_piece` percent-encodes whitespace and `%` itself (`new york` ->
`new%20york`, `50%` -> `50%25`): every other character is kept, and distinct pieces stay
distinct terms. Queries and documents go through the same mapping.

Reranking API (documents' embeddings are best computed once and stored):

    model = BgeM3Model("BAAI/bge-m3")
    query = model.encode(["what is bge-m3?"], "queries")      # BgeM3Output(dense, sparse, colbert)
    docs = model.encode(candidate_texts, "documents")
    scores = candidate_scores(query, docs)                     # {"dense": [n], "sparse": [n], "colbert": [n]}
    final = hybrid_score(scores)                               # 1.0 x dense + 0.3 x sparse
"""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple

import numpy as np
import torch
import torch.nn.functional as F

from ...core.errors import InputError
from ...core.devices import current
from ...core.hf import check_family, load_quietly, load_tokenizer, model_error, read_family
from ...core.presets import resolve_model
from ..registry import dense_side
from ..registry import encoder as register
from .config import HEADS, HYBRID_WEIGHTS, SCHEMA
from ..base import DenseVectorSide, SparseEncoder, SparseVector

SPARSE_HEAD_FILE = "sparse_linear.pt"
COLBERT_HEAD_FILE = "colbert_linear.pt"
SUPPORTED_MODEL_TYPES = ("xlm-roberta",)
# Tokens whose sparse weight FlagEmbedding zeroes (by tokenizer role).
DROPPED_TOKEN_ROLES = ("cls_token", "bos_token", "eos_token", "sep_token", "pad_token", "unk_token")
ESCAPE = "%"


def term_for_piece(piece: str) -> str:
    """The index term for a tokenizer piece: whitespace and '%' percent-encoded (UTF-8), rest kept."""
    if not any(ch == ESCAPE or ch.isspace() for ch in piece):
        return piece
    return "".join("".join(f"%{b:02X}" for b in ch.encode("utf-8")) if ch == ESCAPE or ch.isspace() else ch
                   for ch in piece)


class BgeM3Output(NamedTuple):
    """Embeddings of n texts; a head that was not asked for is None."""

    dense: torch.Tensor | None               # n x hidden, L2-normalised [CLS]
    sparse: list[SparseVector] | None        # n x {term: weight > 0}
    colbert: list[torch.Tensor] | None       # n x (tokens - 1) x colbert dim, rows L2-normalised


def _fetch(path: str, filename: str) -> str:
    """A local path to `filename` of the checkpoint (a folder or a hub id)."""
    if os.path.isdir(path):
        local = os.path.join(path, filename)
        if not os.path.isfile(local):
            raise InputError(f"model {path!r}: {filename} is missing (a BGE-M3 checkpoint has the XLM-RoBERTa "
                             f"encoder plus {SPARSE_HEAD_FILE} and {COLBERT_HEAD_FILE})")
        return local
    try:
        from huggingface_hub import hf_hub_download

        return hf_hub_download(path, filename)
    except Exception as err:
        raise model_error(f"{path}/{filename}", err) from None


def _load_linear(path: str, filename: str, in_features: int, out_features: int | None) -> torch.nn.Linear:
    """A torch.nn.Linear from a saved state dict, checked against the encoder's hidden size."""
    local = _fetch(path, filename)
    try:
        state = torch.load(local, map_location="cpu", weights_only=True)
    except Exception as err:
        raise InputError(f"{local}: cannot read the head ({str(err).strip().splitlines()[0]})") from None
    weight = state.get("weight") if isinstance(state, dict) else None
    if not isinstance(weight, torch.Tensor) or weight.dim() != 2 or weight.shape[1] != in_features \
            or (out_features is not None and weight.shape[0] != out_features) or set(state) - {"weight", "bias"}:
        shape = tuple(weight.shape) if isinstance(weight, torch.Tensor) else None
        expected = f"({out_features if out_features is not None else 'n'}, {in_features})"
        raise InputError(f"{local}: not a state dict of torch.nn.Linear with weight {expected} "
                         f"(keys {sorted(state) if isinstance(state, dict) else type(state).__name__}, weight {shape})")
    linear = torch.nn.Linear(in_features, weight.shape[0], bias="bias" in state)
    linear.load_state_dict(state)
    return linear.eval()


def check_config(path: str):
    """The checkpoint's config; InputError unless it is an XLM-RoBERTa (BGE-M3 family) one or one
    `train bgem3` wrote (its family marker says bgem3: any body, e.g. a BERT)."""
    from transformers import AutoConfig

    try:
        config = AutoConfig.from_pretrained(path)
    except Exception as err:
        raise model_error(path, err) from None
    check_family(path, "bgem3")
    if config.model_type not in SUPPORTED_MODEL_TYPES and read_family(path).get("family") != "bgem3":
        raise InputError(f"model {path!r}: a {config.model_type} checkpoint, not a BGE-M3 one "
                         f"(the bgem3 family needs {'/'.join(SUPPORTED_MODEL_TYPES)} with "
                         f"{SPARSE_HEAD_FILE} and {COLBERT_HEAD_FILE}, or a checkpoint `train bgem3` wrote)")
    return config


def dropped_token_ids(tokenizer) -> list[int]:
    """Ids of the tokens whose sparse weight is dropped, by role in this tokenizer (XLM-R: <s> </s>
    <pad> <unk>; BERT: [CLS] [SEP] [PAD] [UNK])."""
    return sorted({tokenizer.convert_tokens_to_ids(token) for role in DROPPED_TOKEN_ROLES
                   if (token := getattr(tokenizer, role, None)) is not None})


def load_encoder(path: str):
    """The XLM-RoBERTa encoder without its (unused) pooler, in float32 whatever dtype the weights are
    stored in (transformers 5 keeps a float16 checkpoint in float16; FlagEmbedding computes in float32
    on CPU, and so do we); InputError when weights are missing."""
    from transformers import AutoModel

    return load_quietly(AutoModel, path, "checkpoint is incomplete", add_pooling_layer=False).eval()


class BgeM3Model:
    """The BGE-M3 encoder with its dense, sparse and ColBERT heads, for encoding and re-ranking."""

    def __init__(self, model: str, doc_max_length: int | None = None, query_max_length: int | None = None):
        """The lengths default to the family's (`config.py`)."""
        lengths = SCHEMA.complete({"doc_max_length": doc_max_length, "query_max_length": query_max_length},
                                  "bgem3 model")
        doc_max_length, query_max_length = lengths["doc_max_length"], lengths["query_max_length"]
        self.model_reference = model
        self.path = resolve_model(model)
        self.max_length = {"documents": int(doc_max_length), "queries": int(query_max_length)}
        # Cheap checks first: the family (config), then the head files, then the large weights.
        hidden = check_config(self.path).hidden_size
        self.sparse_linear = _load_linear(self.path, SPARSE_HEAD_FILE, hidden, 1)
        self.colbert_linear = _load_linear(self.path, COLBERT_HEAD_FILE, hidden, None)
        self.tokenizer = load_tokenizer(self.path)
        self.placement = current()  # the device and dtype the encoder runs on (core/devices.py)
        self.encoder = load_encoder(self.path)
        self.dropped_ids = dropped_token_ids(self.tokenizer)
        pieces = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
        self.terms = [term_for_piece(piece) for piece in pieces]  # vocabulary id -> index term

    def _tokenize(self, texts: list[str], side: str):
        if side not in self.max_length:
            raise ValueError(f"side must be 'documents' or 'queries', got {side!r}")
        return self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                              return_tensors="pt")

    @torch.inference_mode()
    def encode(self, texts: list[str], side: str, heads: tuple[str, ...] = HEADS) -> BgeM3Output:
        """Embeddings of `texts` (side 'documents' or 'queries' sets the maximum length)."""
        unknown = set(heads) - set(HEADS)
        if unknown:
            raise ValueError(f"unknown heads {sorted(unknown)} (known: {', '.join(HEADS)})")
        encoded = self._tokenize(texts, side)
        hidden = self._hidden(encoded)
        mask = encoded["attention_mask"]
        return BgeM3Output(
            dense=F.normalize(hidden[:, 0], dim=-1) if "dense" in heads else None,
            sparse=self._sparse(hidden, encoded["input_ids"], mask) if "sparse" in heads else None,
            colbert=self._colbert(hidden, mask) if "colbert" in heads else None,
        )

    def _hidden(self, encoded) -> torch.Tensor:
        """The last hidden states, float32 on the CPU, where the (small) heads run."""
        with self.placement.autocast():
            return self.encoder(**self.placement.to(encoded)).last_hidden_state.float().cpu()

    def _sparse(self, hidden: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor) -> list[SparseVector]:
        return [{self.terms[i]: w for i, w in weights.items()} for weights in self._sparse_ids(hidden, input_ids, mask)]

    def _sparse_ids(self, hidden: torch.Tensor, input_ids: torch.Tensor, mask: torch.Tensor) -> list[dict[int, float]]:
        """{vocabulary id: weight} per text (terms and vocabulary ids are one to one)."""
        weights = torch.relu(self.sparse_linear(hidden)).squeeze(-1)  # batch x length
        dropped = set(self.dropped_ids)
        vectors = []
        for ids, row, keep in zip(input_ids.tolist(), weights.tolist(), mask.tolist()):
            vector: dict[int, float] = {}
            for token_id, weight, real in zip(ids, row, keep):
                if real and weight > 0 and token_id not in dropped and weight > vector.get(token_id, 0.0):
                    vector[token_id] = weight
            vectors.append(vector)
        return vectors

    @torch.inference_mode()
    def encode_for_store(self, texts: list[str], side: str) -> tuple[BgeM3Output, list[dict[int, float]]]:
        """All three heads from one forward pass, the sparse head also as {vocabulary id: weight}."""
        encoded = self._tokenize(texts, side)
        hidden = self._hidden(encoded)
        mask = encoded["attention_mask"]
        by_id = self._sparse_ids(hidden, encoded["input_ids"], mask)
        output = BgeM3Output(dense=F.normalize(hidden[:, 0], dim=-1),
                             sparse=[{self.terms[i]: w for i, w in weights.items()} for weights in by_id],
                             colbert=self._colbert(hidden, mask))
        return output, by_id

    def _colbert(self, hidden: torch.Tensor, mask: torch.Tensor) -> list[torch.Tensor]:
        vectors = F.normalize(self.colbert_linear(hidden[:, 1:]), dim=-1)
        lengths = mask[:, 1:].sum(1).tolist()
        return [row[:n].clone() for row, n in zip(vectors, lengths)]

    def describe(self) -> dict:
        return {
            "model": self.model_reference,
            "model_path": self.path,
            "doc_max_length": self.max_length["documents"],
            "query_max_length": self.max_length["queries"],
            "dropped_token_ids": self.dropped_ids,
            "terms": "tokenizer pieces; whitespace and '%' percent-encoded",
        }


# -- scores (query embeddings against candidate documents' embeddings) ---------------------------
def dense_score(query: torch.Tensor, docs: torch.Tensor) -> torch.Tensor:
    """Dot products of normalised [CLS] vectors: query [hidden] or [m x hidden] against docs [n x hidden]."""
    return query @ docs.T


def sparse_score(query: SparseVector, doc: SparseVector) -> float:
    """Sum over shared terms of query weight x document weight (FlagEmbedding's lexical matching score)."""
    if len(doc) < len(query):
        query, doc = doc, query
    return sum(weight * doc[term] for term, weight in query.items() if term in doc)


def colbert_score(query: torch.Tensor, doc: torch.Tensor) -> float:
    """Mean over the query's vectors of the best dot product with one of the document's vectors."""
    if query.shape[0] == 0 or doc.shape[0] == 0:
        return 0.0
    return float((query @ doc.T).amax(1).mean())


def candidate_scores(query: BgeM3Output, docs: BgeM3Output, row: int = 0) -> dict[str, torch.Tensor]:
    """Each head's score of query `row` against every document in `docs` (heads both sides have)."""
    scores = {}
    if query.dense is not None and docs.dense is not None:
        scores["dense"] = dense_score(query.dense[row], docs.dense)
    if query.sparse is not None and docs.sparse is not None:
        scores["sparse"] = torch.tensor([sparse_score(query.sparse[row], d) for d in docs.sparse])
    if query.colbert is not None and docs.colbert is not None:
        scores["colbert"] = torch.tensor([colbert_score(query.colbert[row], d) for d in docs.colbert])
    return scores


def hybrid_score(scores: Mapping[str, torch.Tensor | float],
                 weights: Mapping[str, float] = HYBRID_WEIGHTS) -> torch.Tensor | float:
    """sum(weight x score) over heads with a non-zero weight (the paper's s_rank; no normalisation).

    FlagEmbedding's `compute_score` divides by the sum of the weights, which ranks identically.
    """
    unknown = set(weights) - set(HEADS)
    if unknown:
        raise ValueError(f"unknown heads {sorted(unknown)} in weights (known: {', '.join(HEADS)})")
    used = {head: weight for head, weight in weights.items() if weight}
    missing = [head for head in used if head not in scores]
    if missing:
        raise ValueError(f"weights need the {', '.join(missing)} score(s), which were not computed")
    if not used:
        raise ValueError("all hybrid weights are zero")
    return sum(weight * scores[head] for head, weight in used.items())


# -- the sparse encoder the `encode` command uses ------------------------------------------------
@register("bgem3")
class BgeM3Encoder(DenseVectorSide, SparseEncoder):
    """BGE-M3's sparse head as a `SparseEncoder` (the dense and ColBERT heads are not computed)."""

    def __init__(self, model: str, **settings):
        config = SCHEMA.complete({"model": model, **settings}, "bgem3 encoder")
        self.top_k = {"documents": config["doc_top_k"], "queries": config["query_top_k"]}
        self.model = BgeM3Model(model, doc_max_length=config["doc_max_length"],
                                query_max_length=config["query_max_length"])

    def _encode(self, texts: list[str], side: str) -> list[SparseVector]:
        return self._prune(self.model.encode(texts, side, heads=("sparse",)).sparse, side)

    def _prune(self, vectors: list[SparseVector], side: str) -> list[SparseVector]:
        top_k = self.top_k[side]
        if top_k:
            vectors = [dict(sorted(v.items(), key=lambda kv: -kv[1])[: int(top_k)]) for v in vectors]
        return vectors

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        return self._encode(texts, "documents")

    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        return self._encode(texts, "queries")

    def encode_documents_with_dense(self, texts: list[str]) -> list[tuple]:
        """Per document, from one forward pass (`encode corpus --dense-store`): the (top-k) sparse
        vector for Lucene, the dense vector, and what the `bgem3` re-ranker reads from the store:
        the ColBERT vectors (float16) and the whole sparse head as vocabulary ids and weights."""
        output, by_id = self.model.encode_for_store(texts, "documents")
        sparse = self._prune(output.sparse, "documents")
        return [(vector, (dense.numpy(), {
                    "colbert": colbert.numpy().astype(np.float16),
                    "sparse_ids": np.fromiter(weights.keys(), dtype=np.int32, count=len(weights)),
                    "sparse_weights": np.fromiter(weights.values(), dtype=np.float32, count=len(weights))}))
                for vector, dense, colbert, weights in zip(sparse, output.dense, output.colbert, by_id)]

    @property
    def dense(self) -> "BgeM3Dense":
        return BgeM3Dense(self.model)

    def describe(self) -> dict:
        return {"family": "bgem3", **self.model.describe(),
                "doc_top_k": self.top_k["documents"], "query_top_k": self.top_k["queries"],
                **self.model.placement.identity()}


class BgeM3Dense:
    """BGE-M3's dense side as the dense store and `search_dense` / `rerank` use it."""

    def __init__(self, model: BgeM3Model):
        self.model = model

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, "queries", heads=("dense",)).dense.numpy()

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.model.encode(texts, "documents", heads=("dense",)).dense.numpy()

    def describe(self) -> dict:
        model = self.model.describe()
        return {"family": "bgem3", "model": model["model"], "doc_max_length": model["doc_max_length"],
                "query_max_length": model["query_max_length"]}


@dense_side("bgem3")
def dense_encoder(settings: dict) -> BgeM3Dense:
    """The dense side a store's manifest describes (`lsr_pyserini.encoders.dense.build_dense_encoder`)."""
    return BgeM3Dense(BgeM3Model(settings["model"], doc_max_length=settings.get("doc_max_length"),
                                 query_max_length=settings.get("query_max_length")))

