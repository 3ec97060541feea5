"""Sharded impact search, all of it in one place: the `sharded` engine and `lucene merge-runs`: several Lucene impact indexes (one per shard group of documents) searched
together, or their per-shard runs merged, into exactly the run one index over all the documents gives.

Why it is exact. An impact score is a dot product of integer impacts, a property of the query and
the document alone: no shard statistic enters it. Anserini's `SimpleImpactSearcher` ranks by
(score descending, external docid ascending: a Lucene `Sort` on the `id` field, bytewise UTF-8),
so the top k of the whole collection is the top k, under that same order, of the union of each
shard's top k. Two details of Pyserini/Anserini must be reproduced too:

* `ScoreTiesAdjusterReranker` then rounds every score to 4 decimals and, within a run of equal
  scores, subtracts 1e-6 x (position in the run of ties), in float32. The scores a shard returns
  are thus already adjusted, by its own tie runs. Impact scores are integers (sums of integer
  products, exact in float32 below 2**24), so the raw score is the adjusted one rounded; the merge
  orders by the raw scores and re-applies the adjustment, bit for bit in float32 (`adjust_ties`).
* `LuceneImpactSearcher` drops a query term whose idf, log(N / df), is not above `min_idf`
  (default 0: a term in every document is dropped). Per shard that would drop a term that is in
  every document of one shard only, so the sharded searcher gives every shard the idf of the union
  (summed document frequencies), which is what the single index computes.

BM25 is refused: its scores use collection statistics (document frequencies, the average length,
the document count), which differ per shard, and Pyserini offers no way to give a shard global
statistics; a merge of per-shard BM25 runs is not the run of one index.

The `sharded` engine searches each shard for the top k with the idf of the union and merges the
shards' integer scores in Anserini's order (score, then docid bytes) with its tie adjustment;
`merge_runs` does the same to runs written per shard (`lucene merge-runs`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path


from ...core.errors import InputError
from ...core.hits import TIE_EPSILON, TIE_GAP, Ranking, Run, TermMatch, adjust_ties, sort_key  # noqa: F401
from ...core.indexes import IMPACT, lucene_index_kind
from ...core.jvm import on_jvm_thread
from ..base import IMPACTS, Engine, register
from ..lucene.engine import Idf, LuceneImpactEngine

BM25_REFUSAL = ("sharded search merges impact indexes only (--impact): BM25 scores depend on each "
                "shard's own statistics (document frequencies, average length), so merged shard runs "
                "would not be the run of one index; search one BM25 index over all documents")
MAX_EXACT = 2 ** 24  # integers above this are not all representable in float32
INTEGER_SLACK = 0.01  # |score - round(score)| below this: an adjusted integer score


def split_indexes(value: str) -> list[str]:
    """The shard indexes of `--index A,B,C` (a list of at least two folders)."""
    paths = [part for part in value.split(",") if part]
    if len(paths) < 2:
        raise InputError(f"--index {value!r}: name two or more shard indexes, separated by commas")
    for path in paths:
        if not Path(path).is_dir():
            raise InputError(f"{path}: no such index folder (one of the shards of --index)")
    if len(set(paths)) < len(paths):
        raise InputError(f"--index {value!r}: a shard is named twice")
    return paths


def shard_list(index) -> list[str] | None:
    """The shard indexes `index` names when it names several (a list, or `A,B,C` that is no path)."""
    if isinstance(index, (list, tuple)):
        return [str(path) for path in index]
    if "," in str(index) and not Path(index).exists():
        return [part for part in str(index).split(",") if part]
    return None


def raw_score(score: float, where: str) -> int:
    """The integer impact score behind a score Anserini returned (tie-adjusted, float32)."""
    if not math.isfinite(score):
        raise InputError(f"{where}: score {score!r} is not finite")
    value = round(score)
    if abs(score - value) > INTEGER_SLACK or abs(value) >= MAX_EXACT:
        raise InputError(f"{where}: score {score!r} is not an integer impact score, so this is not an "
                         f"impact run: only impact runs merge exactly (BM25 statistics differ per shard)")
    return value


def merge_hits(shard_hits: list[list[tuple[str, float]]], k: int) -> Ranking:
    """The top k of the union of the shards' (docid, raw score) lists, tie-adjusted as one index's."""
    pooled = [hit for hits in shard_hits for hit in hits]
    pooled.sort(key=lambda hit: sort_key(hit[0], hit[1]))
    top = pooled[:k]
    return [(docid, score) for (docid, _), score in zip(top, adjust_ties(raw for _, raw in top))]


# ---- merging per-shard run files -------------------------------------------------------------

@dataclass
class ShardRun:
    path: str
    hits: dict[str, list[tuple[str, int]]]  # qid -> [(docid, raw score)] in file order
    order: list[str]  # qids in file order
    tag: str | None
    most_hits: int


def read_shard_run(path: str) -> ShardRun:
    """A TREC run written by `lucene search --impact`, with the integer scores behind its scores."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such run file")
    hits: dict[str, list[tuple[str, int]]] = {}
    order: list[str] = []
    tags: set[str] = set()
    with open(path, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, 1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != 6:
                raise InputError(f"{path} line {line_no}: expected 6 fields of a TREC run "
                                 f"(qid Q0 docid rank score tag), got {len(fields)}")
            qid, _, docid, _, score, tag = fields
            try:
                value = float(score)
            except ValueError:
                raise InputError(f"{path} line {line_no}: score {score!r} is not a number") from None
            if qid not in hits:
                hits[qid] = []
                order.append(qid)
            hits[qid].append((docid, raw_score(value, f"{path} line {line_no}")))
            tags.add(tag)
    if len(tags) > 1:
        raise InputError(f"{path}: several run tags ({', '.join(sorted(tags))}); expected one run")
    most = max((len(h) for h in hits.values()), default=0)
    return ShardRun(path, hits, order, next(iter(tags), None), most)


def topic_order(runs: list[ShardRun]) -> list[str]:
    """Query ids in an order consistent with every run's (each run lists them in the topics' order):
    a topological sort of the runs' consecutive pairs, earliest-seen first where they leave a choice."""
    seen: dict[str, int] = {}
    after: dict[str, set[str]] = {}
    before_count: dict[str, int] = {}
    for run in runs:
        for qid in run.order:
            if qid not in seen:
                seen[qid] = len(seen)
                after[qid] = set()
                before_count[qid] = 0
        for first, second in zip(run.order, run.order[1:]):
            if second not in after[first]:
                after[first].add(second)
                before_count[second] += 1
    import heapq

    ready = [(seen[q], q) for q in seen if before_count[q] == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, qid = heapq.heappop(ready)
        order.append(qid)
        for nxt in after[qid]:
            before_count[nxt] -= 1
            if before_count[nxt] == 0:
                heapq.heappush(ready, (seen[nxt], nxt))
    if len(order) < len(seen):
        raise InputError("the runs list their queries in contradictory orders: give --topics")
    return order


def merge_runs(paths: list[str], k: int, topics: list[str] | None = None) -> tuple[list[str], list[str]]:
    """(lines of the merged TREC run, warnings) for per-shard impact runs."""
    runs = [read_shard_run(path) for path in paths]
    warnings = []
    tags = {run.tag for run in runs if run.tag is not None}
    if len(tags) > 1:
        raise InputError(f"the runs have different tags ({', '.join(sorted(tags))}): not runs of one search")
    tag = next(iter(tags), "Anserini")
    for run in runs:
        if 0 < run.most_hits < k:
            warnings.append(f"{run.path}: at most {run.most_hits} hits per query, fewer than --hits {k}: the "
                            f"merge is exact only if every shard was searched with --hits {k} or more")
    order = topic_order(runs)
    if topics is not None:
        known = set(order)
        order = [qid for qid in topics if qid in known] + [qid for qid in order if qid not in set(topics)]
    lines = []
    for qid in order:
        merged = merge_hits([run.hits.get(qid, []) for run in runs], k)
        lines += [f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n" for rank, (docid, score) in enumerate(merged, 1)]
    return lines, warnings



class ShardedImpactEngine(Engine):
    name = "sharded"
    query_kind = IMPACTS
    several_indexes = True
    recognition_order = 0

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        """A list of indexes, or `A,B,C` that is no path."""
        return shard_list(index) is not None

    def check_encoder(self, settings: dict) -> None:
        for shard in self.shards:
            shard.check_encoder(settings)

    def __init__(self, indexes: list[str], min_idf: float = 0):
        self.paths = [str(path) for path in indexes]
        self.shards = [LuceneImpactEngine(path, min_idf) for path in self.paths]
        idf = on_jvm_thread(Idf, [shard.index.reader for shard in self.shards])
        for shard in self.shards:
            shard.idf = idf  # the union's: a term in every document of one shard only is not dropped there
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

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        shards = [self._shard_of(docid) for docid in docids]
        return [None if shard is None else shard.doc_fields([docid])[0] for docid, shard in zip(docids, shards)]

    def describe(self) -> dict:
        return {"engine": self.name, "indexes": self.paths, "documents": self.documents}

    def close(self) -> None:
        for shard in self.shards:
            shard.close()


@register("sharded", ShardedImpactEngine)
def build(indexes, min_idf: float = 0) -> ShardedImpactEngine:
    """`indexes`: a list of index folders, or one string of them separated by commas."""
    paths = split_indexes(indexes) if isinstance(indexes, str) else [str(path) for path in indexes]
    if len(paths) < 2:
        raise InputError(f"engine 'sharded' merges two or more shard indexes, got {len(paths)}")
    for path in paths:
        if not Path(path).is_dir():
            raise InputError(f"{path}: no such index folder (one of the shards)")
        if lucene_index_kind(path) not in (IMPACT, "unknown"):

            raise InputError(f"{path}: {BM25_REFUSAL}")
    return ShardedImpactEngine(paths, min_idf)
