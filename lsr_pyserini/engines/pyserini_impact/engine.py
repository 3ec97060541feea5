"""The `pyserini` engine: Pyserini's own `LuceneImpactSearcher` with Pyserini's own
`SpladeQueryEncoder` (PyTorch, the checkpoint's masked LM), searching a Lucene impact index from a
query's text. It is the baseline a user of Pyserini already has: `bench` times it from text to hits
beside the toolkit's path (`--text-queries`, `--encoder`), on the same index and checkpoint.

Pyserini's encoder quantizes a weight w as round(w / 5 * 256) (the toolkit's as round(100 w)), so
its run is the same model's up to rounding, not the same run line for line; it sees the masked LM
only (no inference-free query table, no exact-match side). It searches the `lucene` engine's index,
which bench builds once for both (`index_of`)."""
from __future__ import annotations

from pathlib import Path

from ...core.errors import InputError
from ...core.hits import Run, run_precision
from ...core.indexes import IMPACT
from ...core.jvm import on_jvm_thread
from ..base import TEXT, Engine, register
from ..lucene.engine import LuceneImpactEngine, check_lucene_index

def checkpoint_folder(encoder: str) -> str:
    """The masked-LM folder of a preset name, preset file or checkpoint folder (Pyserini loads it
    with transformers' AutoModelForMaskedLM)."""
    from ...core.presets import resolve_model
    from ...encoders.query import encoder_settings

    settings = encoder_settings(encoder)
    if settings.get("family") != "splade":
        raise InputError(f"engine 'pyserini': encoder {encoder!r} is a {settings.get('family')} model; Pyserini's "
                         f"SpladeQueryEncoder takes a SPLADE checkpoint")
    if settings.get("query_mode") == "tokenizer":
        raise InputError(f"engine 'pyserini': encoder {encoder!r} has inference-free queries; Pyserini's "
                         f"SpladeQueryEncoder runs the masked LM")
    return resolve_model(settings["model"])


class PyseriniImpactEngine(Engine):
    name = "pyserini"
    query_kind = TEXT           # it encodes the text itself, with Pyserini's encoder
    scores = "impact"
    recognition_order = 99      # never chosen for a folder: named only
    index_description = LuceneImpactEngine.index_description
    index_of = "lucene"         # it searches the lucene engine's index (bench builds one for both)

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """Not a reference for recall: its queries are its own encoder's, rounded otherwise."""
        return False

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return LuceneImpactEngine.index_command(input, index, options)

    @classmethod
    def check_query_side(cls, index, settings: dict | None, encoder: str | None) -> None:
        super().check_query_side(index, settings, encoder)
        if settings is not None:
            raise InputError("engine 'pyserini' encodes the queries' text itself: give its checkpoint as the "
                             "engine option encoder=..., not a query encoder")

    def __init__(self, index: str, encoder: str, min_idf: float = 0):
        self.path, self.min_idf = str(index), float(min_idf)
        self.checkpoint = checkpoint_folder(encoder)
        on_jvm_thread(self._open)

    def _open(self) -> None:
        from pyserini.encode import SpladeQueryEncoder
        from pyserini.search.lucene import LuceneImpactSearcher

        self.searcher = LuceneImpactSearcher(self.path, SpladeQueryEncoder(self.checkpoint), min_idf=self.min_idf)
        self.documents = int(self.searcher.num_docs)

    def search(self, qids: list[str], queries: list[str], k: int, threads: int = 1) -> Run:
        return on_jvm_thread(self._search, qids, queries, k)

    def _search(self, qids, queries, k) -> Run:
        return {qid: [(hit.docid, run_precision(hit.score)) for hit in self.searcher.search(text, int(k))]
                for qid, text in zip(qids, queries)}

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents, "checkpoint": self.checkpoint}

    def close(self) -> None:
        on_jvm_thread(self.searcher.close)


@register("pyserini", PyseriniImpactEngine)
def build(index: str, encoder: str | None = None, min_idf: float = 0) -> PyseriniImpactEngine:
    """`encoder`: the SPLADE checkpoint (preset name or folder) Pyserini's query encoder loads (required);
    `min_idf`: Pyserini's, query terms of an idf at most this are dropped."""
    if not encoder:
        raise InputError("engine 'pyserini' loads Pyserini's SPLADE query encoder: give its checkpoint, engine "
                         "option encoder=PRESET_OR_FOLDER (e.g. splade-tiny)")
    if check_lucene_index(index, "pyserini") != IMPACT:
        raise InputError(f"{index} is a BM25 index: engine 'pyserini' searches a Lucene impact index")
    return PyseriniImpactEngine(index, encoder, min_idf)
