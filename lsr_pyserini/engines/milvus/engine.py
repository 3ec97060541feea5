"""The `milvus` engine: impact search in a Milvus collection of the `encode corpus` shards (the
`[milvus]` extra; `python -m lsr_pyserini.milvus index`). `index` is the collection's URI (a
milvus-lite database path or `http://host:19530`), `collection` its name. Exact by default (metric
IP on the raw impacts, `drop_ratio_search` 0): Lucene's impact scores and top k, ties by docid
(collection.py). Explanations and document text come from the shards it was loaded from (its
manifest's `input`) when they are on this machine (`FromInputShards`)."""
from __future__ import annotations

import sys
from pathlib import Path

from ...core.errors import InputError
from ...core.indexes import is_remote
from ...core.hits import Run, TermMatch, run_precision
from ...core.options import checked, finite_float, float_in, positive_int
from ..base import IMPACTS, Engine, FromInputShards, refuse_other_encoder, register

# encoder settings that decide a document's impacts (the query side's own keys may differ)
DOCUMENT_SIDE = ("family", "model", "pooling", "doc_max_length", "doc_top_k")


class MilvusEngine(FromInputShards, Engine):
    name = "milvus"
    query_kind = IMPACTS
    run_tag = "milvus"
    recognition_order = 10  # an address is no folder: asked before the folders' engines
    index_description = "a milvus-lite database file or a Milvus server's address"
    build_resumes = True
    index_suffix = ".db"
    bench_options = {"collection": "bench"}

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        if isinstance(index, (list, tuple)):
            return False
        from .collection import is_milvus_database

        return is_remote(index) or is_milvus_database(index)

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """Inner product on the raw impacts is exact unless the query's smallest weights are dropped."""
        return not float(options.get("drop_ratio_search", 0.0))

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return [sys.executable, "-m", "lsr_pyserini.milvus", "index", "--input", str(input), "--uri", str(index),
                "--collection", options.get("collection", cls.bench_options["collection"]), "--quiet"]

    def __init__(self, index: str, collection: str, token: str | None = None, min_idf: float = 0,
                 drop_ratio_search: float = 0.0, replicas: int | None = None):
        from .collection import MilvusCollection

        if not collection:
            raise InputError("engine 'milvus': give the collection's name (engine option collection=NAME)")
        drop_ratio_search = checked("drop_ratio_search", drop_ratio_search, float_in(0, 0.99))
        self.path = str(index)
        min_idf = checked("min_idf", min_idf, finite_float)
        replicas = None if replicas is None else checked("replicas", replicas, positive_int)
        self.collection = MilvusCollection(index, collection, token, min_idf, drop_ratio_search, replicas)
        self.documents = self.collection.documents

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        run = self.collection.search(list(zip(qids, queries)), k)
        return {qid: [(docid, run_precision(score)) for docid, score in run.get(qid, [])] for qid in qids}

    def check_encoder(self, settings: dict) -> None:
        """One line when the query encoder is not the one the collection's documents were encoded with."""
        refuse_other_encoder(self.document_side(), settings, f"{self.path}: collection {self.collection.name!r}",
                             DOCUMENT_SIDE)

    def document_side(self) -> dict | None:
        return self.collection.manifest.get("encoder") or None

    def input_folder(self) -> Path:
        return Path(str(self.collection.manifest.get("input", "")))

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        searched = self.collection.sparse_query(query)
        ids = self.collection.vocabulary.ids
        return self.explain_terms({term: weight for term, weight in query.items() if ids.get(term) in searched},
                                  docids)

    def describe(self) -> dict:
        manifest = self.collection.manifest
        return {"engine": self.name, "index": self.path, "collection": self.collection.name,
                "documents": self.documents, "dense": self.collection.has_dense,
                "drop_ratio_search": self.collection.drop_ratio_search, "min_idf": self.collection.min_idf,
                "exact": not self.collection.drop_ratio_search, "preset": manifest.get("preset")}

    def close(self) -> None:
        self.collection.close()


@register("milvus", MilvusEngine)
def build(index: str, collection: str = "", token: str | None = None, min_idf: float = 0,
          drop_ratio_search: float = 0.0, replicas: int | None = None) -> MilvusEngine:
    """`collection`: its name (required); `token`: a secured cluster's; `min_idf`: as Lucene's;
    `drop_ratio_search`: 0 is exact; `replicas`: in-memory replicas a cluster loads (default: its own)."""
    return MilvusEngine(index, collection, token, min_idf, drop_ratio_search, replicas)
