"""The Python API: the encoders, query encoders and searchers the commands use, for scripts and notebooks.

    import lsr_pyserini
    encoder = lsr_pyserini.load_encoder("splade-tiny")              # encode_documents / encode_queries
    query_encoder = lsr_pyserini.QueryEncoder("splade-tiny")        # .encode(text) -> {term: int}
    searcher = lsr_pyserini.Searcher("indexes/scifact-splade-tiny", encoder="splade-tiny")
    hits = searcher.search("what causes cancer?", k=10)             # [Hit(docid, score, first_stage_score)]

`QueryEncoder` gives exactly the integer impacts `encode queries` writes, and has the `encode`
method Pyserini's `LuceneImpactSearcher(index, query_encoder=...)` calls. `Searcher` covers BM25
indexes (no encoder), impact indexes (any sparse preset or checkpoint), augmented BM25 queries
(a `train bm25aug` checkpoint on a WordPiece BM25 index) and any registered re-ranker on top,
through the same scoring code as the `rerank` command.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .core.batching import encode_in_length_order
from .core.devices import placed
from .core.errors import InputError
from .core.hf import read_family
from .core.options import checked, positive_float, positive_int, probability
from .core.presets import checked_preset, load_preset
from .core.wordpiece_bm25 import bm25_check
from .core.writer import quantize
from .encoders import build_encoder
from .encoders.base import SparseEncoder, SparseVector

DEFAULT_ENCODER = "splade-tiny"
# the numeric settings and their types: the same as the `encode` flags that set them
NUMERIC_SETTINGS = {"batch_size": positive_int, "doc_max_length": positive_int, "query_max_length": positive_int,
                    "doc_top_k": positive_int, "query_top_k": positive_int, "impact_scale": positive_float,
                    "query_impact_scale": positive_float}


def encoder_settings(name_or_path: str = DEFAULT_ENCODER, **overrides) -> dict:
    """A preset's settings (a preset name, a preset .yaml, or a checkpoint folder trained here)
    with `overrides` applied where not None, checked, and with the writer's defaults."""
    folder = Path(name_or_path)
    if folder.is_dir():
        family = read_family(folder).get("family", "splade")
        settings = {"family": family, "model": str(folder), "name": folder.name}
    else:
        settings = checked_preset(load_preset(name_or_path), model_overridden=overrides.get("model") is not None)
    settings.update({k: v for k, v in overrides.items() if v is not None})
    for key, kind in NUMERIC_SETTINGS.items():
        if settings.get(key) is not None:
            settings[key] = checked(key, settings[key], kind)
    settings.setdefault("impact_scale", 100)
    settings.setdefault("batch_size", 32)
    return settings


def load_encoder(name_or_path: str = DEFAULT_ENCODER, device: str | None = None, dtype: str | None = None,
                 **settings) -> SparseEncoder:
    """The sparse encoder `python -m lsr_pyserini.encode` uses for this preset or checkpoint;
    `settings` override the preset's (e.g. `model=`, `doc_max_length=`, `pooling=`). `device`
    (auto|cpu|cuda|cuda:N|mps) and `dtype` (auto|float32|float16|bfloat16) as the `--device` and
    `--dtype` flags (docs/devices.md); None = auto (CPU float32 without CUDA: today's output)."""
    with placed(device, dtype):
        return build_encoder(encoder_settings(name_or_path, **settings))


class QueryEncoder:
    """Texts to the integer query impacts `encode queries` writes: `encode(text) -> {term: int}`.

    Usable as Pyserini's query encoder: `LuceneImpactSearcher(index, query_encoder=QueryEncoder(...))`.
    """

    def __init__(self, name_or_path: str = DEFAULT_ENCODER, device: str | None = None, dtype: str | None = None,
                 **settings):
        with placed(device, dtype):  # as load_encoder's
            self._build(encoder_settings(name_or_path, **settings))

    @classmethod
    def from_settings(cls, settings: dict) -> "QueryEncoder":
        """A query encoder for settings already resolved by `encoder_settings`."""
        query_encoder = cls.__new__(cls)
        query_encoder._build(settings)
        return query_encoder

    def _build(self, settings: dict) -> None:
        self.settings = settings
        self.encoder = build_encoder(settings)
        self.impact_scale = self.settings.get("query_impact_scale") or self.settings["impact_scale"]
        self.batch_size = int(self.settings["batch_size"])

    def encode_floats(self, texts: list[str], progress=None) -> list[SparseVector]:
        """Float query weights in the input order, one query per forward pass: a padded batch runs the
        transformer on other shapes, whose float kernels may move a weight across a rounding boundary
        (seen on an AVX2 CPU: one term of one SciFact query, 24 alone, 23 in a batch). Alone, a query's
        impacts are the same in `encode queries`, in `Searcher` and inside Pyserini's searchers, which
        encode one query per call."""
        return encode_in_length_order(self.encoder.encode_queries, texts, 1, progress)

    def impacts(self, vector: SparseVector) -> dict[str, int]:
        return quantize(vector, self.impact_scale)

    def batch_encode(self, texts: list[str], progress=None) -> list[dict[str, int]]:
        return [self.impacts(vector) for vector in self.encode_floats(texts, progress)]

    def encode(self, text: str, **_pyserini_kwargs) -> dict[str, int]:
        """One query's integer impacts (Pyserini's QueryEncoder interface)."""
        return self.batch_encode([text])[0]


@dataclass(frozen=True)
class Hit:
    docid: str
    score: float
    first_stage_score: float | None = None  # set when a re-ranker produced `score`


class Searcher:
    """Search a Lucene index, optionally re-ranking its candidates.

    - `encoder=None`: BM25 on a plain index (`bm25=(k1, b)`, default Pyserini's 0.9, 0.4).
    - `encoder=` a sparse preset or checkpoint: impact search with on-the-fly query encoding.
    - `encoder=` a `train bm25aug` checkpoint: augmented BM25 queries on its WordPiece index.
    - `engine="seismic"` (the `[seismic]` extra): impact search in a Seismic index of the same shards
      (`python -m lsr_pyserini.seismic index`), exact by default; `engine_options` may set
      `query_cut` and `heap_factor` (docs/seismic.md).
    - `reranker=` a registered re-ranker name with its `store`: the first stage's top `candidates`
      re-scored, fused with the first stage when `interpolate` is a weight in [0, 1].
    """

    def __init__(self, index: str, encoder: str | None = None, reranker: str | None = None,
                 store: str | None = None, interpolate: float | None = None, fusion: str = "minmax",
                 candidates: int = 1000, reranker_options: dict | None = None,
                 bm25: tuple[float, float] | None = None, encoder_options: dict | None = None,
                 engine: str = "lucene", engine_options: dict | None = None,
                 device: str | None = None, dtype: str | None = None):
        """`device` and `dtype` place the query encoder and the re-ranker's model (as load_encoder's)."""
        with placed(device, dtype) as placement:
            self.placement = placement
            self._open(index, encoder, reranker, store, interpolate, fusion, candidates, reranker_options, bm25,
                       encoder_options, engine, engine_options)

    def _open(self, index, encoder, reranker, store, interpolate, fusion, candidates, reranker_options, bm25,
              encoder_options, engine, engine_options):
        from .first_stage import ENGINES, first_stage_searcher, seismic_first_stage

        if not Path(index).is_dir():
            raise InputError(f"{index}: no such index folder")
        if interpolate is not None:
            interpolate = checked("interpolate", interpolate, probability)
        candidates = checked("candidates", candidates, positive_int)
        if bm25 is not None:
            bm25_check(*bm25)
        if engine not in ENGINES:
            raise InputError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
        if engine == "seismic":
            self.first_stage = seismic_first_stage(index, encoder, bm25, encoder_options or {}, engine_options or {})
        elif engine_options:
            raise InputError(f"engine_options {sorted(engine_options)} apply to engine='seismic'")
        else:
            self.first_stage = first_stage_searcher(index, encoder, bm25, encoder_options or {})
        self.reranker = None
        if reranker is not None:
            from .rerankers import build_reranker
            from .rerankers import reranker_options as own_options

            if store is None:
                raise InputError(f"reranker {reranker!r} needs the store written at encoding time (store=...)")
            options = dict(reranker_options or {})
            own = own_options(reranker, options)
            unknown = sorted(set(options) - set(own) - {"model", "batch_size"})
            if unknown:
                raise InputError(f"reranker {reranker!r} has no option {unknown[0]!r}")
            if options.get("batch_size") is not None:
                options["batch_size"] = checked("batch_size", options["batch_size"], positive_int)
            self.reranker = build_reranker(reranker, store, {**options, **own})
        self.store, self.interpolate, self.fusion, self.candidates = store, interpolate, fusion, candidates

    def search(self, text: str, k: int = 10) -> list[Hit]:
        return self.batch_search([text], ["q"], k=k)["q"]

    def batch_search(self, texts: list[str], qids: list[str], k: int = 10, threads: int = 1) -> dict[str, list[Hit]]:
        """{qid: hits} for each query; with a re-ranker, the top k of its re-scored candidates."""
        with placed(self.placement):  # models a re-ranker loads on first use go there too
            return self._batch_search(texts, qids, k, threads)

    def _batch_search(self, texts: list[str], qids: list[str], k: int, threads: int) -> dict[str, list[Hit]]:
        if len(texts) != len(qids):
            raise InputError(f"{len(texts)} query texts for {len(qids)} query ids")
        k, threads = checked("k", k, positive_int), checked("threads", threads, positive_int)
        depth = max(k, self.candidates) if self.reranker else k
        run = self.first_stage.search(texts, qids, depth, threads)
        if self.reranker is None:
            return {qid: [Hit(docid, score) for docid, score in ranking] for qid, ranking in run.items()}
        from .rerankers import candidates_of, check_candidates, rerank

        first_stage = candidates_of(run, depth)
        check_candidates(self.reranker, first_stage, depth, "first-stage run", self.store)
        reranked = rerank(self.reranker, first_stage, dict(zip(qids, texts)), self.interpolate, self.fusion)
        first_scores = {qid: dict(ranking) for qid, ranking in first_stage.items()}
        return {qid: [Hit(docid, score, first_scores[qid][docid]) for docid, score in ranking[:k]]
                for qid, ranking in reranked.items()}
