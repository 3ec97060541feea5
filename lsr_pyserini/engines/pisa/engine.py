"""The `pisa` engine: impact search in a PISA index of the `encode corpus` shards (the `[pisa]`
extra; `python -m lsr_pyserini.pisa index`). Exact by default (MaxScore): the Lucene impact
scores and top k, ties by docid (index.py). Explanations and document text come from the
shards the index was built from (its manifest's `input`), whose impacts are the ones PISA scores."""
from __future__ import annotations

from pathlib import Path

from ...core.hits import Run, TermMatch
from ..base import IMPACTS, Engine, FromInputShards, index_command, recognised_folder, recorded_input, register, shards_encoder
from .index import DEFAULT_ALGORITHM, EXACT_ALGORITHMS, PISA_INDEX


class PisaEngine(FromInputShards, Engine):
    name = "pisa"
    query_kind = IMPACTS
    run_tag = "pisa"
    recognition_order = 30
    index_description = PISA_INDEX.description
    build_options = {"encoding": "--encoding", "block_size": "--block-size"}
    build_resumes = True

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        return recognised_folder(index, PISA_INDEX)

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """MaxScore, WAND, their block-max forms and exhaustive OR are exact; the conjunctive ones are not."""
        return options.get("algorithm", DEFAULT_ALGORITHM) in EXACT_ALGORITHMS

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return index_command("pisa", input, index, options, cls.build_options)

    def __init__(self, index: str, algorithm: str | None = None):
        from .index import PisaIndex

        self.path = str(index)
        self.searcher = PisaIndex(index, algorithm or DEFAULT_ALGORITHM)
        self.documents = self.searcher.documents

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        # PISA's scores are sums of integer products, integers already at a run's precision (no
        # `run_precision` needed: it would format each of k scores to give the same number back)
        run = self.searcher.search(list(zip(qids, queries)), k, threads)
        return {qid: run.get(qid, []) for qid in qids}

    def input_folder(self) -> Path:
        return recorded_input(self.path, self.searcher.manifest)

    def document_side(self) -> dict | None:
        return self.searcher.manifest.get("encoder") or shards_encoder(self.input_folder())

    def searched_terms(self, query: dict[str, int]) -> dict[str, float]:
        """The query terms PISA scores: known to the index, weight > 0."""
        vocabulary = self.searcher.vocabulary
        return {term: float(weight) for term, weight in query.items() if weight > 0 and term in vocabulary}

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        return self.explain_terms(self.searched_terms(query), docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents,
                "algorithm": self.searcher.algorithm, "exact": self.searcher.exact}


@register("pisa", PisaEngine)
def build(index: str, algorithm: str | None = None) -> PisaEngine:
    return PisaEngine(index, algorithm)
