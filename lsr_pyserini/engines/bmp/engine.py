"""The `bmp` engine: impact search in a BMP index of the `encode corpus` shards (the `[bmp]` extra;
`python -m lsr_pyserini.bmp index`). Approximate: BMP's 8-bit impacts round the shards' (index.py),
and `alpha`, `beta` below 1 prune blocks and terms further. Explanations and document text come from
the shards the index was built from (its manifest's `input`), with their own impacts."""
from __future__ import annotations

from pathlib import Path

from ...core.hits import Run, TermMatch, run_precision
from ...core.options import checked, float_in
from ..base import IMPACTS, Engine, FromInputShards, index_command, recognised_folder, recorded_input, register
from .index import BMP_INDEX


class BmpEngine(FromInputShards, Engine):
    name = "bmp"
    query_kind = IMPACTS
    run_tag = "bmp"
    recognition_order = 35
    index_description = BMP_INDEX.description
    build_options = {"block_size": "--block-size"}

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        return recognised_folder(index, BMP_INDEX)

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """Never: its 8-bit impacts round any impact above 255, whatever `alpha` and `beta`."""
        return False

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return index_command("bmp", input, index, options, cls.build_options)

    def __init__(self, index: str, alpha: float = 1.0, beta: float = 1.0):
        from .index import BmpIndex

        self.alpha = checked("alpha", alpha, float_in(0, 1))
        self.beta = checked("beta", beta, float_in(0, 1))
        self.path = str(index)
        self.index = BmpIndex(index)
        self.documents = self.index.documents

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        run = self.index.search(list(zip(qids, queries)), k, self.alpha, self.beta, threads)
        return {qid: [(docid, run_precision(score)) for docid, score in run.get(qid, [])] for qid in qids}

    def input_folder(self) -> Path:
        return recorded_input(self.path, self.index.manifest)

    def document_side(self) -> dict | None:
        return self.index.manifest.get("encoder") or super().document_side()

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        return self.explain_terms({term: float(weight) for term, weight in query.items() if weight > 0}, docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents, "alpha": self.alpha,
                "beta": self.beta, "scale": self.index.scale, "exact": False}


@register("bmp", BmpEngine)
def build(index: str, alpha: float = 1.0, beta: float = 1.0) -> BmpEngine:
    """`alpha`, `beta` in (0, 1]: BMP's block and term pruning (1: none)."""
    return BmpEngine(index, alpha, beta)
