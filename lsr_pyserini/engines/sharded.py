"""The `sharded` engine: several Lucene impact indexes (one per group of documents) searched
together into exactly the run one index over all their documents gives (core/shards.py says why
it is exact): each shard is searched for the top k with the idf of the union, and the shards'
integer scores are merged in Anserini's order (score, then docid bytes) with its tie adjustment."""
from __future__ import annotations

from pathlib import Path

from ..core.errors import InputError
from ..core.hits import Run, TermMatch
from ..core.indexes import IMPACT, lucene_index_kind
from ..core.java import on_jvm_thread
from ..core.shards import global_idf, merge_hits, raw_score, split_indexes
from .base import IMPACTS, Engine, register
from .lucene import LuceneImpactEngine


class ShardedImpactEngine(Engine):
    name = "sharded"
    query_kind = IMPACTS

    def __init__(self, indexes: list[str], min_idf: float = 0):
        self.paths = [str(path) for path in indexes]
        self.shards = [LuceneImpactEngine(path, min_idf) for path in self.paths]
        idf = on_jvm_thread(global_idf, self.paths)
        for shard in self.shards:
            shard.searcher.idf = idf  # a term in every document of one shard only is not dropped there
        self.documents = sum(shard.documents for shard in self.shards)

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        per_shard = [shard.search(qids, queries, k, threads) for shard in self.shards]
        merged = {}
        for qid in qids:
            lists = [[(docid, raw_score(score, f"{shard.path}, query {qid}")) for docid, score in run[qid]]
                     for shard, run in zip(self.shards, per_shard)]
            merged[qid] = merge_hits(lists, k)
        return merged

    def _shard_of(self, docid: str) -> LuceneImpactEngine | None:
        def find():
            for shard in self.shards:
                if shard.index.utils.convertDocidToLuceneDocid(shard.index.reader, docid) >= 0:
                    return shard
            return None

        return on_jvm_thread(find)

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        explained = {}
        for docid in docids:
            shard = self._shard_of(docid)
            if shard is None:
                raise InputError(f"{','.join(self.paths)}: no document {docid!r} in any shard")
            explained.update(shard.explain(query, [docid]))
        return explained

    def doc(self, docid: str) -> str | None:
        shard = self._shard_of(docid)
        return None if shard is None else shard.doc(docid)

    def describe(self) -> dict:
        return {"engine": self.name, "indexes": self.paths, "documents": self.documents}

    def close(self) -> None:
        for shard in self.shards:
            shard.close()


@register("sharded")
def build(indexes, min_idf: float = 0) -> ShardedImpactEngine:
    """`indexes`: a list of index folders, or one string of them separated by commas."""
    paths = split_indexes(indexes) if isinstance(indexes, str) else [str(path) for path in indexes]
    if len(paths) < 2:
        raise InputError(f"engine 'sharded' merges two or more shard indexes, got {len(paths)}")
    for path in paths:
        if not Path(path).is_dir():
            raise InputError(f"{path}: no such index folder (one of the shards)")
        if lucene_index_kind(path) not in (IMPACT, "unknown"):
            from ..core.shards import BM25_REFUSAL

            raise InputError(f"{path}: {BM25_REFUSAL}")
    return ShardedImpactEngine(paths, min_idf)
