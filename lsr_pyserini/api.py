"""The Python API: the encoders, query encoders and searchers the commands use, for scripts and notebooks.

    import lsr_pyserini
    encoder = lsr_pyserini.load_encoder("splade-tiny")              # encode_documents / encode_queries
    query_encoder = lsr_pyserini.QueryEncoder("splade-tiny")        # .encode(text) -> {term: int}
    searcher = lsr_pyserini.Searcher("indexes/scifact-splade-tiny", encoder="splade-tiny")
    hits = searcher.search("what causes cancer?", k=10)             # [Hit(docid, score, ...)]
    hits = searcher.search("what causes cancer?", k=10, explain=True)  # hit.terms: why each matched
    text = searcher.doc(hits[0].docid)

`QueryEncoder` gives exactly the integer impacts `encode queries` writes, and has the `encode`
method Pyserini's `LuceneImpactSearcher(index, query_encoder=...)` calls. `Searcher` puts a query
side (encoders/query.py), an engine (engines/) and optionally a re-ranker (rerankers/) together:
BM25 indexes (no encoder), impact indexes (any sparse preset or checkpoint), augmented BM25
queries (a `train bm25aug` checkpoint on a WordPiece BM25 index), several shard indexes, Seismic
and dense stores, each with any registered re-ranker on top, through the same scoring code as the
`rerank` command. One `Searcher` may be used from any number of threads (docs/api.md).
"""
from __future__ import annotations

import contextlib
from pathlib import Path

from .core.devices import placed
from .core.errors import InputError, NotFound
from .core.hits import Hit, Run
from .core.indexes import is_remote
from .core.arguments import (choice_arg, flag_arg, index_arg, name_arg, number_arg, options_arg, path_arg,
                             qids_arg, texts_arg)
from .core.fusion import METHODS as FUSIONS
from .core.options import checked, non_negative_float, positive_int, probability
from .encoders import build_encoder
from .models.base import SparseEncoder
from .encoders.query import (DEFAULT_ENCODER, AugmentedBm25Queries, EncodedQueries, QueryEncoder,
                              TextQueries, encoder_settings, is_bm25aug)
from .core.topics import VECTOR
from .engines import (available_engines, build_engine, check_engine, engine_class, index_descriptions,
                      recognising_engine)
from .engines.base import ENCODED

__all__ = ["load_encoder", "encoder_settings", "QueryEncoder", "Searcher", "Hit", "DEFAULT_ENCODER",
           "choose_engine"]


def load_encoder(name_or_path: str = DEFAULT_ENCODER, device: str | None = None, dtype: str | None = None,
                 **settings) -> SparseEncoder:
    """The sparse encoder `python -m lsr_pyserini.encode` uses for this preset or checkpoint;
    `settings` override the preset's (e.g. `model=`, `doc_max_length=`, `pooling=`). `device`
    (auto|cpu|cuda|cuda:N|mps) and `dtype` (auto|float32|float16|bfloat16) as the `--device` and
    `--dtype` flags (docs/devices.md); None = auto (CPU float32 without CUDA: today's output)."""
    name_or_path = name_arg("name_or_path", name_or_path)
    with placed(*placement_args(device, dtype)):
        return build_encoder(encoder_settings(name_or_path, **settings))


def placement_args(device, dtype) -> tuple[str | None, str | None]:
    """`device` and `dtype` checked as the `--device` and `--dtype` flags are (None: auto)."""
    from .core.devices import DTYPES, device_name

    if device is not None:
        if not isinstance(device, str):
            raise InputError(f"device: expected one of auto, cpu, cuda, cuda:N, mps, got {device!r}")
        device = checked("device", device, device_name)
    return device, choice_arg("dtype", dtype, DTYPES, optional=True)


def choose_engine(index, encoder_family: str | None) -> str:
    """The engine for `index` (checked before any model is loaded): the first engine, in their
    declared order, that recognises it (engines/base.py: `sharded` for several indexes, `milvus` for
    a database or an address, `seismic`, `pisa`, `bmp` and `dense` for their folders, then a Lucene
    index: `lucene` when impact, `bm25` when BM25, and by the encoder's family when unrecorded)."""
    index = index_arg(index)
    encoder_family = name_arg("encoder_family", encoder_family, optional=True)
    name = recognising_engine(index, encoder_family)
    if name is not None:
        return name
    if not Path(index).exists():
        raise InputError(f"{index}: no such index folder")
    raise InputError(f"{index}: not an index (none of: {'; '.join(index_descriptions())})")


class Searcher:
    """Search an index with encoded queries, optionally re-ranking its candidates.

    - `engine=None` chooses from the index (`choose_engine`): `lucene` (impact index, encoder
      required), `bm25` (BM25 index; no encoder, or a `train bm25aug` checkpoint), `sharded`
      (`index` a list of impact indexes, or `"A,B,C"`), `seismic` (a `seismic index` folder; the
      `[seismic]` extra), `pisa` (a `pisa index` folder; the `[pisa]` extra), `bmp` (a `bmp index`
      folder; the `[bmp]` extra, approximate), `dense` (a dense
      store; no encoder). Or name one of them.
    - `encoder=` a sparse preset or checkpoint: impact queries encoded on the fly.
    - `encoder_options`: the query encoder's declared settings (models/NAME/config.py), overriding
      the preset's or checkpoint's, for every family: a sparse encoder's (`query_max_length`,
      `model`, ...); a bm25aug checkpoint's (`augment`, `weighting`, `batch_size`, and
      `query_impact_scale` as its boost scale); for a dense store (no encoder), those of the store's
      family a query side may set (`model`, `batch_size`, and promptreps' `chat_template`: the
      others are fixed by the documents). Anything else is refused in one line.
    - `engine_options`: the engine's own options (lucene, sharded: `min_idf`; bm25: `k1`, `b`,
      `pretokenized`; seismic: `query_cut`, `heap_factor`; pisa: `algorithm`; bmp: `alpha`, `beta`); `bm25=(k1, b)` is short for BM25's.
    - `reranker=` a registered re-ranker name with its `store`: the first stage's top `candidates`
      re-scored, fused with the first stage when `interpolate` is a weight in [0, 1] (`fusion`
      minmax, zscore or rrf).
    - `device`, `dtype`: where the query encoder and the re-ranker's model run (as load_encoder's).
    """

    def __init__(self, index, encoder: str | None = None, reranker: str | None = None,
                 store: str | None = None, interpolate: float | None = None, fusion: str = "minmax",
                 candidates: int = 1000, reranker_options: dict | None = None,
                 bm25: tuple[float, float] | None = None, encoder_options: dict | None = None,
                 engine: str | None = None, engine_options: dict | None = None,
                 device: str | None = None, dtype: str | None = None, encoded: bool = False):
        index = index_arg(index)
        encoder, reranker = name_arg("encoder", encoder, optional=True), name_arg("reranker", reranker, optional=True)
        store = path_arg("store", store, optional=True)
        fusion = choice_arg("fusion", fusion, FUSIONS)
        engine = name_arg("engine", engine, optional=True)
        encoded = flag_arg("encoded", encoded)
        reranker_options, encoder_options = (options_arg("reranker_options", reranker_options),
                                             options_arg("encoder_options", encoder_options))
        engine_options = options_arg("engine_options", engine_options)
        if bm25 is not None:
            if not isinstance(bm25, (tuple, list)) or len(bm25) != 2:
                raise InputError(f"bm25: expected (k1, b), got {bm25!r}")
            bm25 = (number_arg("k1", bm25[0], non_negative_float), number_arg("b", bm25[1], probability))
        self._place, self._placement = placement_args(device, dtype), None
        # encoded queries and no re-ranker: no model to place, and resolving `auto` would import torch (2 s)
        self._models = not (encoded and reranker is None)
        with placed(self.placement) if self._models else contextlib.nullcontext():
            self._open(index, encoder, reranker, store, interpolate, fusion, candidates, reranker_options, bm25,
                       encoder_options, engine, engine_options, encoded)

    @property
    def placement(self):
        """Where the query encoder and the re-ranker's model run (resolved when first needed)."""
        if self._placement is None:
            with placed(*self._place) as placement:
                self._placement = placement
        return self._placement

    def _placed(self):
        return placed(self.placement) if self._models else contextlib.nullcontext()

    def _open(self, index, encoder, reranker, store, interpolate, fusion, candidates, reranker_options, bm25,
              encoder_options, engine, engine_options, encoded):
        if interpolate is not None:
            interpolate = number_arg("interpolate", interpolate, probability)
        candidates = number_arg("candidates", candidates, positive_int)
        if bm25 is not None:
            from .kernels.wordpiece_bm25 import bm25_check

            bm25_check(*bm25)
        if engine is not None and engine not in available_engines():
            check_engine(engine, {})  # the one-line refusal naming the engines
        from .engines.sharded import shard_list

        shards = shard_list(index)
        for path in shards or [index]:
            if not Path(path).exists() and not is_remote(path):
                raise InputError(f"{path}: no such index folder")
        settings = None
        if encoded:  # queries given encoded (`search --encoded`): `search_encoded` only
            if encoder is not None:
                raise InputError("encoded=True: the queries are already encoded; give no encoder")
            settings, encoder = {"family": ENCODED}, "--encoded"
        elif encoder is not None:  # resolved once: the family chooses the engine and the query side
            settings = encoder_settings(encoder, **encoder_options)
        name = engine or choose_engine(index, "splade" if encoded else settings and settings.get("family"))
        if encoded and engine_class(name).query_kind == VECTOR:
            raise InputError(f"encoded queries: engine {name!r} encodes query texts with its store's encoder")
        # an engine of BM25 scores (its declaration: `scores` "tf") takes k1 and b, and bags of boosts
        scores_bm25 = engine_class(name).scores == "tf"
        if scores_bm25:
            if bm25 is not None:
                engine_options = {"k1": bm25[0], "b": bm25[1], **engine_options}
            if is_bm25aug(settings) or encoded:
                engine_options.setdefault("pretokenized", True)
        elif bm25 is not None:
            raise InputError(f"bm25=(k1, b) applies to BM25 indexes, not to engine {name!r}")
        check_engine(name, engine_options)
        # what the engine takes is its own declaration; nothing is loaded before it answers
        engine_class(name).check_query_side(shards or index, settings, encoder)
        if scores_bm25 and is_bm25aug(settings):  # its model says which BM25 it was trained for
            self.query_side = self._query_side(name, index, settings, encoder_options)
            engine_options.setdefault("k1", self.query_side.bm25[0])
            engine_options.setdefault("b", self.query_side.bm25[1])
        self.engine = build_engine(name, shards or index, engine_options)
        if settings is not None:  # another encoder than the documents': refused before its model loads
            self.engine.check_encoder(settings)
        if not (scores_bm25 and is_bm25aug(settings)):
            self.query_side = EncodedQueries() if encoded else self._query_side(name, index, settings, encoder_options)
        self.index = ",".join(shards) if shards else str(index)
        self.reranker = self._reranker(reranker, store, reranker_options)
        self.store, self.interpolate, self.fusion, self.candidates = store, interpolate, fusion, candidates

    @staticmethod
    def _query_side(engine, index, settings, encoder_options):
        if engine_class(engine).query_kind == VECTOR:
            from .models.dense.queries import DenseQueries

            return DenseQueries.from_settings(index, encoder_options)  # of the store's family's declared settings
        if settings is None:
            if encoder_options:
                raise InputError(f"encoder_options {', '.join(map(repr, encoder_options))}: no query encoder "
                                 f"to set (give encoder=...)")
            return TextQueries()
        if is_bm25aug(settings):
            return AugmentedBm25Queries(settings, index, encoder_options)
        return QueryEncoder.from_settings(settings)

    @staticmethod
    def _reranker(reranker, store, reranker_options):
        if reranker is None:
            return None
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
            options["batch_size"] = number_arg("batch_size", options["batch_size"], positive_int)
        return build_reranker(reranker, store, {**options, **own})

    def search(self, text: str, k: int = 10, explain: bool = False) -> list[Hit]:
        if not isinstance(text, str):
            raise InputError(f"text: expected a string, got {type(text).__name__} {text!r}")
        return self.batch_search([text], ["q"], k=k, explain=explain)["q"]

    def batch_search(self, texts: list[str], qids: list[str], k: int = 10, threads: int = 1,
                     explain: bool = False) -> dict[str, list[Hit]]:
        """{qid: hits} for each query; with a re-ranker, the top k of its re-scored candidates. With
        `explain`, each hit's `terms` are the terms that matched in the first stage."""
        k, threads = number_arg("k", k, positive_int), number_arg("threads", threads, positive_int)
        texts, qids = texts_arg("texts", texts), qids_arg("qids", qids)
        return self.search_encoded(texts, qids, self.encode_queries(texts, qids), k, threads, explain)

    def encode_queries(self, texts: list[str], qids: list[str]) -> list:
        """The engine's queries for these texts (the first half of `batch_search`; a service encodes
        the next batch while the engine searches this one)."""
        texts, qids = texts_arg("texts", texts), qids_arg("qids", qids)
        if len(texts) != len(qids):
            raise InputError(f"{len(texts)} query texts for {len(qids)} query ids")
        if len(set(qids)) < len(qids):
            raise InputError("query ids repeat: give each query its own id")
        with self._placed():  # a model loaded on first use goes there too
            return self.query_side.queries(qids, texts)

    def search_encoded(self, texts: list[str], qids: list[str], queries: list, k: int = 10, threads: int = 1,
                       explain: bool = False) -> dict[str, list[Hit]]:
        """The second half of `batch_search`: the engine, the re-ranker and the explanations for
        queries `encode_queries` made of `texts`."""
        k, threads = number_arg("k", k, positive_int), number_arg("threads", threads, positive_int)
        explain = flag_arg("explain", explain)
        texts, qids = texts_arg("texts", texts), qids_arg("qids", qids)
        if isinstance(queries, (str, bytes)) or not isinstance(queries, (list, tuple)) or len(queries) != len(qids):
            raise InputError(f"queries: expected a list of {len(qids)} queries (one per query id), got "
                             f"{type(queries).__name__}{f' of {len(queries)}' if isinstance(queries, (list, tuple)) else ''}")
        if len(texts) != len(qids):
            raise InputError(f"{len(texts)} query texts for {len(qids)} query ids")
        depth = max(k, self.candidates) if self.reranker else k
        with self._placed():
            run = self.engine.search(qids, queries, depth, threads)
            first_scores = None
            if self.reranker is not None:
                run, first_scores = self._rerank(run, qids, texts, depth)
        top = {qid: run.get(qid, [])[:k] for qid in qids}
        terms = {}
        if explain:
            for qid, query in zip(qids, queries):
                terms[qid] = self.engine.explain(query, [docid for docid, _ in top[qid]])
        stage = "first_stage" if self.reranker is not None else "score"
        return {qid: [Hit(docid, score, first_scores[qid][docid] if first_scores else None,
                          terms[qid][docid] if explain else None, stage if explain else None)
                      for docid, score in top[qid]]
                for qid in qids}

    def _rerank(self, run: Run, qids, texts, depth) -> tuple[Run, dict]:
        from .rerankers import candidates_of, check_candidates, rerank

        first_stage = candidates_of(run, depth)
        check_candidates(self.reranker, first_stage, depth, "first-stage run", self.store)
        reranked = rerank(self.reranker, first_stage, dict(zip(qids, texts)), self.interpolate, self.fusion)
        return reranked, {qid: dict(ranking) for qid, ranking in first_stage.items()}

    def doc(self, docid: str) -> str:
        """The document's text, from the index's stored documents or the `encode corpus` shards it was
        built from (InputError naming what is missing where neither holds it; NotFound for an id
        the collection does not hold)."""
        text = self.engine.doc(docid_arg(docid))
        if text is None:
            raise NotFound(f"{docid!r}: no such document in {self.index}")
        return text

    def docs(self, docids: list[str]) -> list[str | None]:
        """Several documents' texts in one step, None for an id the collection does not hold (an
        InputError where neither the index nor its shards keep texts)."""
        return self.engine.docs([docid_arg(docid) for docid in docids_arg(docids)])

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        """Several documents' `{"contents"[, "title"]}` in one step: `docs`' texts, with each one's
        title alone where the index's records keep it (shards and `--storeRaw` indexes written since
        titles were kept); None for an id the collection does not hold."""
        return self.engine.doc_fields([docid_arg(docid) for docid in docids_arg(docids)])

    def close(self) -> None:
        self.engine.close()


def docid_arg(docid) -> str:
    """A document id: a string or an integer (as str)."""
    if isinstance(docid, bool) or not isinstance(docid, (str, int)):
        raise InputError(f"docid: expected a string or an integer, got {type(docid).__name__} {docid!r}")
    return str(docid)


def docids_arg(docids) -> list:
    if isinstance(docids, (str, bytes)) or not isinstance(docids, (list, tuple)):
        raise InputError(f"docids: expected a list of document ids, got {type(docids).__name__} {docids!r}")
    return list(docids)
