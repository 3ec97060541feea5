"""The `seismic` engine: impact search in a Seismic index of the `encode corpus` shards (the
`[seismic]` extra; `python -m lsr_pyserini.seismic index`). Exact by default (every posting kept,
whole query, heap factor 1.0): the Lucene impact scores and top k, ties by docid
(index.py). Explanations and document text come from the shards the index was built from
(its manifest's `input`), whose impacts are the ones Seismic scores."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...core.hits import Run, TermMatch, run_precision
from ...core.options import checked, positive_float, positive_int
from ..base import IMPACTS, Engine, FromInputShards, index_command, recognised_folder, recorded_input, register
from .index import SEISMIC_INDEX


class SeismicEngine(FromInputShards, Engine):
    name = "seismic"
    query_kind = IMPACTS
    run_tag = "seismic"
    recognition_order = 20
    index_description = SEISMIC_INDEX.description
    # the build options bench gives `seismic index` (specs that differ in them build an index of their own)
    build_options = {"n_postings": "--n-postings", "summary_energy": "--summary-energy",
                     "centroid_fraction": "--centroid-fraction", "max_fraction": "--max-fraction"}
    build_resumes = True

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        return recognised_folder(index, SEISMIC_INDEX)

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """Every posting kept, every block's summary an upper bound, the whole query, heap factor 1."""
        return (float(options.get("heap_factor", 1.0)) == 1.0 and options.get("query_cut") is None
                and options.get("n_postings") is None and float(options.get("summary_energy", 1.0)) >= 1.0)

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return index_command("seismic", input, index, options, cls.build_options)

    def __init__(self, index: str, query_cut: int | None = None, heap_factor: float = 1.0):
        from .index import SeismicIndex

        self.query_cut = None if query_cut is None else checked("query_cut", query_cut, positive_int)
        self.heap_factor = checked("heap_factor", heap_factor, positive_float)
        self.path = str(index)
        self.searcher = SeismicIndex(index)
        self.documents = self.searcher.documents

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        run = self.searcher.search(list(zip(qids, queries)), k, self.query_cut, self.heap_factor, threads)
        return {qid: [(docid, run_precision(score)) for docid, score in run.get(qid, [])] for qid in qids}

    def input_folder(self) -> Path:
        return recorded_input(self.path, self.searcher.manifest)

    def document_side(self) -> dict | None:
        return self.searcher.manifest.get("encoder") or super().document_side()

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
