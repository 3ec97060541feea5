"""First-stage retrieval for `lsr_pyserini.Searcher`, through Pyserini's own Lucene searchers.

- BM25 on a plain index: `LuceneSearcher` (the default analyzer, as `lucene search --bm25`).
- Impact search: `LuceneImpactSearcher` with `QueryEncoder` as its query encoder, so queries are
  encoded on the fly into the same integer impacts `encode queries` writes.
- Augmented BM25: the `bm25aug queries` lines, searched by `LuceneSearcher` with whitespace
  analysis and the BM25 parameters the model was trained with (as `lucene search --bm25 --pretokenized`).

- Seismic (`engine="seismic"`, the `[seismic]` extra): the same `QueryEncoder` impacts searched in a
  Seismic index of the same shards (`python -m lsr_pyserini.seismic index`); exact by default.

Scores are kept at the precision of a TREC run file (6 decimals), so that re-ranking and fusion
through the API and through the `rerank` command on the written run give identical runs.
"""
from __future__ import annotations

from pathlib import Path

from .core.errors import InputError
from .core.hf import read_family

Run = dict[str, list[tuple[str, float]]]
PYSERINI_BM25 = (0.9, 0.4)


def run_precision(score: float) -> float:
    """A score as a TREC run file holds it (`%.6f`)."""
    return float(f"{score:.6f}")


class LuceneFirstStage:
    def __init__(self, searcher, make_query=None):
        self.searcher = searcher
        self.make_query = make_query  # texts -> query strings (augmented BM25), or None

    def search(self, texts: list[str], qids: list[str], k: int, threads: int = 1) -> Run:
        queries = self.make_query(list(zip(qids, texts))) if self.make_query else texts
        results = self.searcher.batch_search(queries, qids, k=k, threads=threads)
        return {qid: [(hit.docid, run_precision(hit.score)) for hit in results.get(qid, [])] for qid in qids}


def first_stage_searcher(index: str, encoder: str | None, bm25: tuple[float, float] | None,
                         encoder_options: dict) -> LuceneFirstStage:
    """The Lucene searcher for `index` and `encoder` (see the module's description)."""
    from .core.java import start_jvm

    start_jvm()
    from pyserini.search.lucene import LuceneImpactSearcher, LuceneSearcher

    if encoder is None:
        searcher = LuceneSearcher(index)
        searcher.set_bm25(*(bm25 or PYSERINI_BM25))
        return LuceneFirstStage(searcher)
    if _is_bm25aug(encoder):
        from pyserini.analysis import JWhiteSpaceAnalyzer

        from .encoders.bm25aug import AugmentedQueries

        augmented = AugmentedQueries(encoder, index, **encoder_options)
        searcher = LuceneSearcher(index)
        searcher.set_analyzer(JWhiteSpaceAnalyzer())
        searcher.set_bm25(*(bm25 or augmented.bm25))

        def make_query(queries):
            augmented.check_searchable(queries, "queries")
            return [line.rstrip("\n").split("\t", 1)[1] for line in augmented.lines(queries)[0]]

        return LuceneFirstStage(searcher, make_query)
    if bm25 is not None:
        raise InputError("bm25=(k1, b) applies to BM25 indexes, not to impact search")
    from .api import QueryEncoder

    return LuceneFirstStage(LuceneImpactSearcher(index, query_encoder=QueryEncoder(encoder, **encoder_options)))


class SeismicFirstStage:
    """Impact search in a Seismic index, queries encoded on the fly (`QueryEncoder`)."""

    def __init__(self, searcher, query_encoder, query_cut: int | None, heap_factor: float):
        self.searcher, self.query_encoder = searcher, query_encoder
        self.query_cut, self.heap_factor = query_cut, heap_factor

    def search(self, texts: list[str], qids: list[str], k: int, threads: int = 1) -> Run:
        queries = list(zip(qids, self.query_encoder.batch_encode(texts)))
        if threads == 1:
            run = self.searcher.search(queries, k, self.query_cut, self.heap_factor)
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(threads) as pool:
                rankings = pool.map(lambda query: self.searcher.search_one(*query, k, self.query_cut,
                                                                           self.heap_factor), queries)
                run = dict(zip(qids, rankings))
        return {qid: [(docid, run_precision(score)) for docid, score in run.get(qid, [])] for qid in qids}


ENGINES = ("lucene", "seismic")
SEISMIC_OPTIONS = ("query_cut", "heap_factor")


def seismic_first_stage(index: str, encoder: str | None, bm25: tuple[float, float] | None, encoder_options: dict,
                        engine_options: dict) -> SeismicFirstStage:
    """The Seismic searcher for `index` (a `seismic index` folder) and a sparse `encoder`."""
    from .core.options import checked, positive_float, positive_int
    from .stores.seismic import SeismicSearcher

    unknown = sorted(set(engine_options) - set(SEISMIC_OPTIONS))
    if unknown:
        raise InputError(f"engine 'seismic' has no option {unknown[0]!r} (options: {', '.join(SEISMIC_OPTIONS)})")
    if encoder is None or bm25 is not None:
        raise InputError("engine 'seismic' serves impact indexes: give a sparse encoder (and no bm25=)")
    if _is_bm25aug(encoder):
        raise InputError(f"engine 'seismic' serves impact indexes; {encoder!r} is a bm25aug model (use engine='lucene')")
    query_cut = engine_options.get("query_cut")
    if query_cut is not None:
        query_cut = checked("query_cut", query_cut, positive_int)
    heap_factor = checked("heap_factor", engine_options.get("heap_factor", 1.0), positive_float)
    searcher = SeismicSearcher(index)
    from .api import QueryEncoder

    return SeismicFirstStage(searcher, QueryEncoder(encoder, **encoder_options), query_cut, heap_factor)


def _is_bm25aug(encoder: str) -> bool:
    """Whether `encoder` names a bm25aug checkpoint folder or preset (no model is loaded or hashed)."""
    from .core.presets import load_preset, resolve_model

    try:
        path = Path(resolve_model(encoder))
        family = read_family(path).get("family") if path.is_dir() else load_preset(encoder)["family"]
    except InputError:
        return False
    return family == "bm25aug"
