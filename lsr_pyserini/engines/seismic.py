"""The `seismic` engine: impact search in a Seismic index of the `encode corpus` shards (the
`[seismic]` extra; `python -m lsr_pyserini.seismic index`). Exact by default (every posting kept,
whole query, heap factor 1.0): the Lucene impact scores and top k, ties by docid
(stores/seismic.py). Explanations and document text come from the shards the index was built from
(its manifest's `input`), whose impacts are the ones Seismic scores."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.hits import Run, TermMatch, run_precision
from ..core.options import checked, positive_float, positive_int
from .base import IMPACTS, Engine, FromInputShards, register


class SeismicEngine(FromInputShards, Engine):
    name = "seismic"
    query_kind = IMPACTS
    run_tag = "seismic"

    def __init__(self, index: str, query_cut: int | None = None, heap_factor: float = 1.0):
        from ..stores.seismic import SeismicSearcher

        self.query_cut = None if query_cut is None else checked("query_cut", query_cut, positive_int)
        self.heap_factor = checked("heap_factor", heap_factor, positive_float)
        self.path = str(index)
        self.searcher = SeismicSearcher(index)
        self.documents = self.searcher.documents

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        run = self.searcher.search(list(zip(qids, queries)), k, self.query_cut, self.heap_factor, threads)
        return {qid: [(docid, run_precision(score)) for docid, score in run.get(qid, [])] for qid in qids}

    def input_folder(self) -> Path:
        return Path(str(self.searcher.manifest.get("input", "")))

    def searched_terms(self, query: dict[str, int]) -> dict[str, float]:
        """The query terms Seismic scores: known to the index, weight > 0, the `query_cut` largest."""
        components, values = self.searcher.query_arrays(query)
        terms = [term for term, value in query.items() if value > 0 and term in self.searcher.vocabulary]
        if self.query_cut is not None and len(terms) > self.query_cut:
            order = np.argsort(-values, kind="stable")[: self.query_cut]
            terms = [terms[i] for i in sorted(order)]
        return {term: float(np.float32(query[term])) for term in terms}

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        return self.explain_terms(self.searched_terms(query), docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents, "query_cut": self.query_cut,
                "heap_factor": self.heap_factor, "exact": bool(self.searcher.manifest.get("exact"))}


@register("seismic", SeismicEngine)
def build(index: str, query_cut: int | None = None, heap_factor: float = 1.0) -> SeismicEngine:
    return SeismicEngine(index, query_cut, heap_factor)
