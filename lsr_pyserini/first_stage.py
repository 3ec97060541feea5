"""First-stage retrieval for `lsr_pyserini.Searcher`, through Pyserini's own Lucene searchers.

- BM25 on a plain index: `LuceneSearcher` (the default analyzer, as `lucene search --bm25`).
- Impact search: `LuceneImpactSearcher` with `QueryEncoder` as its query encoder, so queries are
  encoded on the fly into the same integer impacts `encode queries` writes.
- Augmented BM25: the `bm25aug queries` lines, searched by `LuceneSearcher` with whitespace
  analysis and the BM25 parameters the model was trained with (as `lucene search --bm25 --pretokenized`).

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


def _is_bm25aug(encoder: str) -> bool:
    """Whether `encoder` names a bm25aug checkpoint folder or preset (no model is loaded or hashed)."""
    from .core.presets import load_preset, resolve_model

    try:
        path = Path(resolve_model(encoder))
        family = read_family(path).get("family") if path.is_dir() else load_preset(encoder)["family"]
    except InputError:
        return False
    return family == "bm25aug"
