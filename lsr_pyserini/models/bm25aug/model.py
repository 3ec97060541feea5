"""BM25 query augmentation and re-weighting ("Improving BM25 with learned query augmentation",
arXiv 2305.14087): BM25 stays the scorer, a small encoder rewrites the query.

    score(q, d) = (w(q) * v * (bow(q) + a(q))) . f(d)

over the model's WordPiece vocabulary, with v the BM25 IDF vector and f(d) the document's BM25
term-frequency vector (both from `wordpiece_bm25`, i.e. Lucene's), so that the query-side weight
`w(q) * (bow(q) + a(q))` is exactly the boost a Lucene BM25 query gives each term:

- bow(q)_t: how often token t occurs in the query (special tokens left out; queries are cut at
  `query_max_length` tokens for the model and the bag alike);
- a(q) = ReLU(W enc(q)[CLS] + c): augmentation over the vocabulary, special tokens masked to 0;
- w(q)_t = ReLU(u . enc(q)_i + e) for the query position(s) i holding token t; a token repeated in
  the query takes the LARGEST weight of its positions (its count stays in bow). Tokens that are
  not in the query (pure augmentation) get w = 1.

Initialisation: u = 0, e = 1 (w = 1) and W = 0, c = `AUGMENT_INIT_BIAS` (a = that small constant,
above ReLU's kink so gradients reach W), so an untrained model scores as plain WordPiece BM25 plus
a tiny uniform term. Ablations: augment=False (a = 0), weighting=False (w = 1); scoring "bow"
(f(d) = 1 for a present token and v = 1) is a property of the index and the training, not of
this module.

Checkpoint layout: the encoder body (any BERT-family `AutoModel` checkpoint) and tokenizer as
saved by transformers, the two heads in `bm25aug_heads.safetensors`, the settings in
`lsr_family.json` (family "bm25aug").
"""
from __future__ import annotations

from pathlib import Path

import torch

from ...core.length_order import encode_in_length_order
from ...core.errors import InputError
from ...core.devices import current
from ...core.hf import FAMILY_FILE, check_family, load_quietly, load_tokenizer, read_family, write_config
from ...core.options import checked, positive_float, positive_int
from ...core.presets import model_path, resolve_model
from ...kernels.wordpiece_bm25 import check_index_tokenizer, pretokenize
from ...core.writer import to_impacts, query_line
from ..registry import encoder as register
from .config import MODEL_SETTINGS, SCHEMA
from ..base import SparseEncoder, SparseVector

HEADS_FILE = "bm25aug_heads.safetensors"
AUGMENT_INIT_BIAS = 1e-3
FAMILY = "bm25aug"
LUCENE_MAX_CLAUSES = 1024  # Lucene's default IndexSearcher.maxClauseCount


class QueryAugmenter(torch.nn.Module):
    """Query text -> B x |V| BM25 boosts w(q) * (bow(q) + a(q))."""

    def __init__(self, body, tokenizer, augment: bool | None = None, weighting: bool | None = None,
                 query_max_length: int | None = None, scoring: str | None = None, k1: float | None = None,
                 b: float | None = None):
        """Settings not given take the family's defaults (config.py)."""
        super().__init__()
        given = {"augment": augment, "weighting": weighting, "query_max_length": query_max_length,
                 "scoring": scoring, "k1": k1, "b": b}
        settings = SCHEMA.complete(given, "bm25aug model")
        self.body = body
        self.tokenizer = tokenizer
        self.augment, self.weighting = settings["augment"], settings["weighting"]
        self.query_max_length = settings["query_max_length"]
        self.scoring, self.k1, self.b = settings["scoring"], settings["k1"], settings["b"]
        hidden, vocab = body.config.hidden_size, len(tokenizer)
        self.augment_head = torch.nn.Linear(hidden, vocab)
        self.weight_head = torch.nn.Linear(hidden, 1)
        with torch.no_grad():
            self.augment_head.weight.zero_()
            self.augment_head.bias.fill_(AUGMENT_INIT_BIAS)
            self.weight_head.weight.zero_()
            self.weight_head.bias.fill_(1.0)
        allowed = torch.ones(vocab)
        allowed[torch.tensor(sorted(set(tokenizer.all_special_ids)), dtype=torch.long)] = 0.0
        self.register_buffer("allowed", allowed, persistent=False)
        self.placement = current()  # the device and dtype it runs on (core/devices.py)

    @classmethod
    def load(cls, reference: str, **overrides) -> "QueryAugmenter":
        """A trained bm25aug folder (heads and settings restored), or any BERT-family checkpoint
        to start training from (fresh heads)."""
        from transformers import AutoModel

        path = resolve_model(reference)
        check_family(path, FAMILY)
        marker = Path(path) / FAMILY_FILE
        settings = recorded_settings(path) if marker.is_file() else {}
        settings.update({k: v for k, v in overrides.items() if v is not None})
        tokenizer = load_tokenizer(path)
        from transformers import AutoConfig

        try:
            architecture = AutoConfig.from_pretrained(path).model_type
        except Exception:
            architecture = None
        pooler = {"add_pooling_layer": False} if architecture in ("bert", "roberta", "xlm-roberta", "electra") else {}
        from transformers.utils import logging as hf_logging

        bar = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()  # the weight-loading bar of a model this small is noise
        try:
            body = load_quietly(AutoModel, path, "encoder weights missing", **pooler)
        finally:
            if bar:
                hf_logging.enable_progress_bar()
        model = cls(body, tokenizer, **settings)
        heads = Path(path) / HEADS_FILE
        if heads.is_file():
            from safetensors.torch import load_file

            model.load_heads(load_file(str(heads)))
        elif marker.is_file():
            raise InputError(f"model {reference!r}: {HEADS_FILE} missing from a bm25aug checkpoint")
        return model.placement.to(model)

    def load_heads(self, state: dict[str, torch.Tensor]) -> None:
        expected = self.augment_head.weight.shape
        if state.get("augment_head.weight", torch.empty(0)).shape != expected:
            raise InputError(f"{HEADS_FILE}: augmentation head does not match the vocabulary ({tuple(expected)})")
        self.augment_head.load_state_dict({"weight": state["augment_head.weight"], "bias": state["augment_head.bias"]})
        self.weight_head.load_state_dict({"weight": state["weight_head.weight"], "bias": state["weight_head.bias"]})

    def tokenize(self, texts: list[str]):
        return self.tokenizer(texts, padding=True, truncation=True, max_length=self.query_max_length,
                              return_tensors="pt")

    def forward(self, texts: list[str]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(boosts, bow, a), each B x |V|."""
        encoded = self.placement.to(self.tokenize(texts))
        ids = encoded["input_ids"]
        vocab = self.allowed.shape[0]
        keep = encoded["attention_mask"].float() * self.allowed[ids]
        bow = torch.zeros(ids.shape[0], vocab, device=ids.device).scatter_add_(1, ids, keep)
        if self.augment or self.weighting:
            with self.placement.autocast():  # the transformer only: heads and pooling stay float32
                hidden = self.body(**encoded).last_hidden_state.float()
        if self.augment:
            augmentation = torch.relu(self.augment_head(hidden[:, 0])) * self.allowed
        else:
            augmentation = torch.zeros_like(bow)
        if self.weighting:
            positions = torch.relu(self.weight_head(hidden)).squeeze(-1) * keep
            token_weight = torch.zeros_like(bow).scatter_reduce(1, ids, positions, reduce="amax", include_self=True)
            weight = torch.where(bow > 0, token_weight, torch.ones_like(bow))
        else:
            weight = torch.ones_like(bow)
        return weight * (bow + augmentation), bow, augmentation

    def save(self, folder) -> None:
        from safetensors.torch import save_file

        self.body.save_pretrained(folder)
        self.tokenizer.save_pretrained(folder)
        save_file({f"{name}.{key}": tensor.detach().contiguous()
                   for name in ("augment_head", "weight_head")
                   for key, tensor in getattr(self, name).state_dict().items()}, str(Path(folder) / HEADS_FILE))
        write_config(folder, FAMILY, {**SCHEMA.defaults(), **self.settings()})  # `train` records its full config

    def settings(self) -> dict:
        """The declared settings this model holds (config.py's MODEL_SETTINGS)."""
        return {name: getattr(self, name) for name in MODEL_SETTINGS}


class BM25AugEncoder(SparseEncoder):
    """Query side only: {WordPiece token: boost}. Documents are indexed by `bm25aug index` as text."""

    def __init__(self, model: QueryAugmenter, min_weight: float = 0.0):
        """Weights below `min_weight` are left out (e.g. 0.5 / boost scale: they would round to 0;
        the untrained remainder of a(q) is thousands of such tiny weights)."""
        self.model = model.eval()
        self.min_weight = min_weight
        self.vocabulary = model.tokenizer.convert_ids_to_tokens(list(range(len(model.tokenizer))))

    @torch.inference_mode()
    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        boosts = self.model(texts)[0].cpu()
        vectors = []
        for row in boosts:
            nonzero = torch.nonzero((row > 0) & (row >= self.min_weight)).squeeze(-1).tolist()
            vectors.append({self.vocabulary[i]: float(row[i]) for i in nonzero})
        return vectors

    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        raise InputError("bm25aug encodes queries only: index documents with `python -m lsr_pyserini.bm25aug index`")

    def describe(self) -> dict:
        return {"augment": self.model.augment, "weighting": self.model.weighting,
                "query_max_length": self.model.query_max_length, **self.model.placement.identity()}


@register(FAMILY)
def build(model: str, augment: bool | None = None, weighting: bool | None = None,
          query_max_length: int | None = None, scoring: str | None = None, k1: float | None = None,
          b: float | None = None) -> BM25AugEncoder:
    return BM25AugEncoder(QueryAugmenter.load(model, augment=augment, weighting=weighting,
                                              query_max_length=query_max_length, scoring=scoring, k1=k1, b=b))


def recorded_settings(path) -> dict:
    """The model settings a bm25aug checkpoint records: its config's, and those a checkpoint of before
    wrote beside it (scoring, k1, b) or instead of one (augment, weighting, query_max_length)."""
    marker = read_family(path)
    config = marker.get("config") if isinstance(marker.get("config"), dict) else {}
    given = {k: v for k, v in {**marker, **config}.items() if k in MODEL_SETTINGS}
    return SCHEMA.checked(given, f"checkpoint {path}")


def recorded_query_settings(path) -> dict:
    """The boost scale (query_impact_scale, else impact_scale) and batch size a bm25aug checkpoint's
    config records, else the family's defaults."""
    marker = read_family(path) if Path(path).is_dir() else {}
    config = marker.get("config") if isinstance(marker.get("config"), dict) else {}
    names = ("impact_scale", "query_impact_scale", "batch_size")
    settings = SCHEMA.complete({k: v for k, v in config.items() if k in names}, f"checkpoint {path}")
    return {"boost_scale": settings["query_impact_scale"] or settings["impact_scale"],
            "batch_size": settings["batch_size"]}


class AugmentedQueries:
    """Augmented, re-weighted BM25 queries for one WordPiece index: the `qid<TAB>tokens` lines
    `bm25aug queries` writes (each token repeated round(boost x boost_scale) times), which
    Pyserini's BM25 with whitespace analysis scores as the model's formula."""

    def __init__(self, model: str, index: str, boost_scale: float | None = None, max_boost: int = 10_000,
                 max_terms: int = LUCENE_MAX_CLAUSES, augment: bool | None = None, weighting: bool | None = None,
                 batch_size: int | None = None, **settings):
        """`boost_scale` and `batch_size` not given: the checkpoint's (its query_impact_scale, else
        impact_scale; its batch_size), else the family's defaults (100, 32). `settings`: other
        declared settings the caller gives (`scoring`, `k1`, `b`, `query_max_length`), which
        override the checkpoint's as `augment` and `weighting` do: a `scoring` that is not the
        index's is refused, and `k1`, `b` are the BM25 the queries are searched with."""
        self.reference = model
        self.path = model_path(model)
        saved = recorded_query_settings(self.path)
        boost_scale = checked("boost_scale", saved["boost_scale"] if boost_scale is None else boost_scale,
                              positive_float)
        max_boost = checked("max_boost", max_boost, positive_int)
        max_terms = checked("max_terms", max_terms, positive_int)
        batch_size = checked("batch_size", saved["batch_size"] if batch_size is None else batch_size, positive_int)
        unknown = sorted(set(settings) - {"scoring", "k1", "b", "query_max_length"})
        if unknown:
            raise InputError(f"{model}: bm25aug queries take no setting {unknown[0]!r}")
        self.model = QueryAugmenter.load(self.path, augment=augment, weighting=weighting, **settings).eval()
        self.record = check_index_tokenizer(index, self.model.tokenizer, model)
        # an untrained body serves either index, unless the caller names a scoring
        trained = "scoring" in recorded_settings(self.path) or settings.get("scoring") is not None
        if trained and self.model.scoring != self.record.get("scoring"):
            said = (f"scoring={self.model.scoring!r} was given" if settings.get("scoring") is not None
                    else f"{model} was trained for {self.model.scoring!r} scoring")
            raise InputError(f"{said} but {index} is a {self.record.get('scoring')!r} index")
        self.boost_scale, self.max_boost, self.max_terms = boost_scale, max_boost, max_terms
        self.batch_size = batch_size
        self.encoder = BM25AugEncoder(self.model, min_weight=0.5 / boost_scale)  # lighter weights round to 0

    @property
    def bm25(self) -> tuple[float, float]:
        """The BM25 k1, b the model was trained with."""
        return self.model.k1, self.model.b

    def check_searchable(self, queries: list[tuple[str, str]], source: str) -> None:
        """InputError for a query that tokenizes to nothing searchable."""
        special = set(self.model.tokenizer.all_special_tokens)
        empty = [qid for (qid, _), tokens in zip(queries, pretokenize(self.model.tokenizer, [t for _, t in queries]))
                 if not set(tokens) - special]
        if empty:
            more = f"; {len(empty) - 1} more such queries" if len(empty) > 1 else ""
            raise InputError(f"{source}: query {empty[0]!r} tokenizes to nothing searchable with the tokenizer "
                             f"of {self.reference} (no token, or unknown characters only){more}")

    def boosts(self, queries: list[tuple[str, str]], progress=None) -> tuple[list[dict[str, int]], int]:
        """Each (qid, text) query's integer boosts {token: round(boost x boost_scale)}, and how many
        queries lost low-boost terms to the clause limit."""
        with torch.inference_mode():
            vectors = encode_in_length_order(self.encoder.encode_queries, [text for _, text in queries],
                                             self.batch_size, progress)
        return query_boosts([qid for qid, _ in queries], vectors, self.boost_scale, self.max_boost, self.max_terms)

    def lines(self, queries: list[tuple[str, str]], progress=None) -> tuple[list[str], int]:
        """TSV lines for (qid, text) queries and how many queries lost low-boost terms to the clause limit."""
        boosts, trimmed = self.boosts(queries, progress)
        return [query_line(qid, boost) for (qid, _), boost in zip(queries, boosts)], trimmed


def query_boosts(qids: list[str], vectors: list[dict[str, float]], boost_scale: float, max_boost: int,
                 max_terms: int) -> tuple[list[dict[str, int]], int]:
    """Each query's integer boosts and how many queries lost low-boost terms to the clause limit."""
    queries, trimmed = [], 0
    for qid, vector in zip(qids, vectors):
        boosts = to_impacts(vector, boost_scale)
        for term, boost in boosts.items():
            if boost > max_boost:
                raise InputError(f"query {qid}: term {term!r} would get boost {boost} (weight {vector[term]:.4g} "
                                 f"x scale {boost_scale:g}), above --max-boost {max_boost}: lower --boost-scale")
        if len(boosts) > max_terms:
            trimmed += 1
            boosts = dict(sorted(boosts.items(), key=lambda item: -item[1])[:max_terms])
        queries.append(boosts)
    return queries, trimmed
