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

One forward pass (`represent`) and one scoring (`score`) serve training, encoding and tests:

    model = BgeM3Model("BAAI/bge-m3")
    with torch.inference_mode():
        scores = model.score(model.represent(["what is bge-m3?"], "queries"),
                             model.represent(candidate_texts, "documents"))  # {head: 1 x n}
    final = hybrid_score(scores)                                            # 1.0 x dense + 0.3 x sparse

The `bgem3` re-ranker scores stored documents with kernels of the same formulas and combines
them with `hybrid_score`.
"""
from __future__ import annotations

import os
from typing import Mapping, NamedTuple

import torch
import torch.nn.functional as F

from ...core.errors import InputError
from ...core.devices import cpu_state_dict, current, moved
from ...core.hf import check_family, load_quietly, load_tokenizer, model_error, read_family
from ...core.presets import resolve_model
from .config import HEADS, HYBRID_WEIGHTS, SCHEMA
from ..base import SparseVector

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


def check_config(path: str, body: str | None = None):
    """The checkpoint's config; InputError unless it is an XLM-RoBERTa (BGE-M3 family) one or one
    `train bgem3` wrote (its family marker says bgem3: any body, e.g. a BERT), and, with `body` (the
    declared setting a trained checkpoint records), unless its model_type is that."""
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
    if body is not None and config.model_type != body:
        raise InputError(f"model {path!r}: a {config.model_type} body, not the {body} body its settings "
                         f"record (body: {body})")
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


class Heads(NamedTuple):
    """The three heads of a batch of n texts, from one forward pass (`BgeM3Model.represent`)."""

    dense: torch.Tensor          # n x hidden, L2-normalised [CLS]
    token_weights: torch.Tensor  # n x length: ReLU(sparse_linear(H)), 0 at dropped tokens and padding
    input_ids: torch.Tensor      # n x length
    colbert: torch.Tensor        # n x (length - 1) x dim, rows L2-normalised
    colbert_mask: torch.Tensor   # n x (length - 1), True at real positions

    def sparse(self, vocabulary: int) -> torch.Tensor:
        """n x |V|: each token's largest weight (differentiable)."""
        zeros = torch.zeros(self.token_weights.shape[0], vocabulary, dtype=self.token_weights.dtype,
                            device=self.token_weights.device)
        return zeros.scatter_reduce(1, self.input_ids, self.token_weights, reduce="amax")


class BgeM3Model(torch.nn.Module):
    """The BGE-M3 body with its dense, sparse and ColBERT heads: `represent` is the one forward pass
    (training calls it with gradients, encoding and re-ranking under inference mode), `score` the
    one scoring of queries against documents.

    A checkpoint needs both head files; `new_heads` (training from a body without them) creates
    them instead, as FlagEmbedding does: torch's initialisation seeded with `seed`, the ColBERT
    head `colbert_dim` wide (None: the hidden size), and with `sparse_init_bias` a sparse head
    starting at weight 0 and that bias."""

    def __init__(self, model: str, doc_max_length: int | None = None, query_max_length: int | None = None,
                 new_heads: dict | None = None, body: str | None = None):
        super().__init__()
        lengths = SCHEMA.complete({"doc_max_length": doc_max_length, "query_max_length": query_max_length},
                                  "bgem3 model")
        self.model_reference = model
        self.path = resolve_model(model)
        self.max_length = {"documents": int(lengths["doc_max_length"]), "queries": int(lengths["query_max_length"])}
        if new_heads is None:  # a checkpoint: cheap checks first (config, head files), then the large weights
            hidden = check_config(self.path, body).hidden_size
            self.sparse_linear = _load_linear(self.path, SPARSE_HEAD_FILE, hidden, 1)
            self.colbert_linear = _load_linear(self.path, COLBERT_HEAD_FILE, hidden, None)
            self.tokenizer = load_tokenizer(self.path)
            self.encoder = load_encoder(self.path)
        else:  # a body to train, with its heads or new ones
            self.tokenizer = load_tokenizer(self.path)
            self.encoder = load_encoder(self.path)
            hidden = self.encoder.config.hidden_size
            if all(os.path.isfile(os.path.join(self.path, name)) for name in (SPARSE_HEAD_FILE, COLBERT_HEAD_FILE)):
                self.sparse_linear = _load_linear(self.path, SPARSE_HEAD_FILE, hidden, 1)
                self.colbert_linear = _load_linear(self.path, COLBERT_HEAD_FILE, hidden, new_heads.get("colbert_dim"))
            else:
                with torch.random.fork_rng():  # new heads depend on the seed only, not on what ran before
                    torch.manual_seed(new_heads["seed"])
                    self.sparse_linear = torch.nn.Linear(hidden, 1)
                    self.colbert_linear = torch.nn.Linear(hidden, new_heads.get("colbert_dim") or hidden)
                if new_heads.get("sparse_init_bias") is not None:
                    torch.nn.init.zeros_(self.sparse_linear.weight)
                    torch.nn.init.constant_(self.sparse_linear.bias, new_heads["sparse_init_bias"])
        self.placement = current()  # the device and dtype the body runs on (core/devices.py)
        self.dropped_ids = dropped_token_ids(self.tokenizer)
        self.register_buffer("dropped", torch.tensor(self.dropped_ids, dtype=torch.long), persistent=False)
        self.vocabulary = len(self.tokenizer)
        self._terms = None

    @property
    def terms(self) -> list[str]:
        """Vocabulary id -> index term (built on first use: training never needs it)."""
        if self._terms is None:
            pieces = self.tokenizer.convert_ids_to_tokens(list(range(len(self.tokenizer))))
            self._terms = [term_for_piece(piece) for piece in pieces]
        return self._terms

    def _tokenize(self, texts: list[str], side: str):
        if side not in self.max_length:
            raise ValueError(f"side must be 'documents' or 'queries', got {side!r}")
        return self.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length[side],
                              return_tensors="pt")

    # -- the forward pass -------------------------------------------------------------------
    def represent(self, texts: list[str], side: str) -> Heads:
        """The three heads of `texts` (side 'documents' or 'queries' sets the maximum length). The
        heads run where their weights are: beside the body when training, on the CPU when encoding
        (the body's last hidden states then come back in float32)."""
        device = self.sparse_linear.weight.device
        encoded = self._tokenize(texts, side)
        with self.placement.autocast():
            hidden = self.encoder(**moved(encoded, self.encoder.device)).last_hidden_state
        if not torch.is_grad_enabled():
            hidden = hidden.float()
        hidden = hidden.to(device)
        mask, ids = moved(encoded["attention_mask"], device), moved(encoded["input_ids"], device)
        keep = mask.bool() & ~torch.isin(ids, self.dropped.to(device))
        weights = torch.relu(self.sparse_linear(hidden)).squeeze(-1) * keep
        colbert = F.normalize(self.colbert_linear(hidden[:, 1:]), dim=-1)
        return Heads(F.normalize(hidden[:, 0], dim=-1), weights, ids, colbert, mask[:, 1:].bool())

    def score(self, queries: Heads, documents: Heads) -> dict[str, torch.Tensor]:
        """Each head's (queries x documents) scores, as FlagEmbedding computes them: dense = dot product
        of the [CLS] vectors; sparse = sum over shared tokens of the weight products; colbert = mean
        over the query's vectors of the best dot product with a document vector."""
        return {"dense": queries.dense @ documents.dense.T,
                "sparse": queries.sparse(self.vocabulary) @ documents.sparse(self.vocabulary).T,
                "colbert": colbert_scores(queries.colbert, queries.colbert_mask, documents.colbert,
                                          documents.colbert_mask)}

    @torch.inference_mode()
    def scores(self, queries: list[str], documents: list[str]) -> dict[str, torch.Tensor]:
        """Each head's (queries x documents) scores of texts: `score` of their `represent`."""
        return self.score(self.represent(queries, "queries"), self.represent(documents, "documents"))

    # -- inference outputs ------------------------------------------------------------------
    @torch.inference_mode()
    def encode(self, texts: list[str], side: str, heads: tuple[str, ...] = HEADS) -> BgeM3Output:
        """Embeddings of `texts` (side 'documents' or 'queries' sets the maximum length)."""
        unknown = set(heads) - set(HEADS)
        if unknown:
            raise ValueError(f"unknown heads {sorted(unknown)} (known: {', '.join(HEADS)})")
        output, by_id = self.encode_for_store(texts, side)
        return BgeM3Output(dense=output.dense if "dense" in heads else None,
                           sparse=output.sparse if "sparse" in heads else None,
                           colbert=output.colbert if "colbert" in heads else None)

    @torch.inference_mode()
    def encode_for_store(self, texts: list[str], side: str) -> tuple[BgeM3Output, list[dict[int, float]]]:
        """All three heads from one forward pass, the sparse head also as {vocabulary id: weight}."""
        heads = self.represent(texts, side)
        by_id = sparse_by_id(heads)
        lengths = heads.colbert_mask.sum(1).tolist()
        output = BgeM3Output(dense=heads.dense.cpu(),
                             sparse=[{self.terms[i]: w for i, w in weights.items()} for weights in by_id],
                             colbert=[row[:n].clone().cpu() for row, n in zip(heads.colbert, lengths)])
        return output, by_id

    def describe(self) -> dict:
        return {
            "model": self.model_reference,
            "model_path": self.path,
            "doc_max_length": self.max_length["documents"],
            "query_max_length": self.max_length["queries"],
            "dropped_token_ids": self.dropped_ids,
            "terms": "tokenizer pieces; whitespace and '%' percent-encoded",
        }

    def save(self, folder) -> None:
        self.encoder.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        for head, name in ((self.sparse_linear, SPARSE_HEAD_FILE), (self.colbert_linear, COLBERT_HEAD_FILE)):
            torch.save(cpu_state_dict(head), os.path.join(folder, name))


def sparse_by_id(heads: Heads) -> list[dict[int, float]]:
    """{vocabulary id: largest weight} per text, ids in the order their first weighted position comes
    (the order the documents' sparse vectors are stored in)."""
    vectors = []
    for ids, row in zip(heads.input_ids.tolist(), heads.token_weights.tolist()):
        vector: dict[int, float] = {}
        for token_id, weight in zip(ids, row):
            if weight > 0 and weight > vector.get(token_id, 0.0):
                vector[token_id] = weight
        vectors.append(vector)
    return vectors


def colbert_scores(queries: torch.Tensor, query_mask: torch.Tensor, docs: torch.Tensor,
                   doc_mask: torch.Tensor) -> torch.Tensor:
    """Mean over each query's vectors of the best dot product with a document's (non-padding) vector."""
    tokens = torch.einsum("qin,pjn->qipj", queries, docs)
    best = tokens.masked_fill(~doc_mask[None, None], float("-inf")).amax(-1)  # q x Lq x p
    best = best.masked_fill(~query_mask[:, :, None], 0.0)
    return best.sum(1) / query_mask.sum(1, keepdim=True).clamp(min=1)


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


