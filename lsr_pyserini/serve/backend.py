"""The one backend behind the REST routes, the MCP tools and the page.

Each configured index is a `Slot`: a `Searcher` (api.py) and its `MicroBatcher`. Requests are
single queries submitted to the slot's batcher, a two-stage pipeline: one thread encodes a group
(`Searcher.encode_queries`: each query alone, so a batched query's ranking is the one
`Searcher.search` gives it alone), the other searches the group encoded before
(`Searcher.search_encoded`) and fetches the hits' texts in the same step. A reload
opens and warms a new `Searcher` beside the old one and swaps the slot in one assignment; the old
batcher finishes what it holds, and a request that reached it after the swap goes to the new one.
Results are plain dicts in Pyserini's REST shape (`pyserini.server.models.Hits`).
"""
from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass

from ..api import Searcher
from ..core.errors import InputError, NotFound
from ..core.evaluation import evaluate_ranking
from ..core.hits import Hit, run_precision
from ..core.outputs import folder_bytes
from ..core.readers import read_qrels
from ..engines.base import VECTOR
from .batching import Closed, MicroBatcher, Overloaded
from .served import IndexSpec, ServiceConfig

logger = logging.getLogger(__name__)
WARM_QUERIES = ("what is the effect of vitamin d on bone density", "a")

__all__ = ["Backend", "Overloaded", "NotFound", "NotReady"]


class NotReady(Exception):
    """The backend is still loading its indexes."""


@dataclass
class Slot:
    spec: IndexSpec
    searcher: Searcher
    batcher: MicroBatcher
    version: int
    loaded_at: float
    load_seconds: float
    has_texts: bool
    size_bytes: int  # on disk when this version opened (the files do not change while served)


def hit_dict(hit: Hit, document: dict | None, explain: bool) -> dict:
    """A candidate in Pyserini's shape (`document_txt`: the whole text, title included), with the
    document's `title` alone where its record keeps one."""
    candidate = {"docid": hit.docid, "score": hit.score, "document_txt": document["contents"] if document else ""}
    if document and "title" in document:
        candidate["title"] = document["title"]
    if explain:
        candidate["terms"] = [{"term": m.term, "query_weight": m.query_weight, "document_weight": m.document_weight,
                               "contribution": m.contribution} for m in hit.terms or ()]
        candidate["explained"] = hit.explained
        if hit.first_stage_score is not None:
            candidate["first_stage_score"] = hit.first_stage_score
    return candidate


def query_terms(query) -> list[dict] | None:
    """The query's own terms and weights as the engine searched them, largest first (impact and
    boosted BM25 queries: {term: weight}); None for a text or a vector query."""
    if not isinstance(query, dict):
        return None
    return [{"term": term, "weight": float(weight)}
            for term, weight in sorted(query.items(), key=lambda item: (-item[1], item[0]))]


class Backend:
    def __init__(self, config: ServiceConfig):
        self.config = config
        self._slots: dict[str, Slot] = {}
        self._reload_locks = {spec.name: threading.Lock() for spec in config.indexes}
        # read at start-up, so that a malformed line is refused (naming the file and line) before serving
        self._qrels = {spec.name: read_qrels(spec.qrels) for spec in config.indexes if spec.qrels}
        self.ready = False
        self.error: str | None = None

    # ---- loading
    def load(self) -> None:
        """Open and warm every configured index (then `ready`)."""
        for spec in self.config.indexes:
            self._slots[spec.name] = self._open(spec, 1)
        self.ready = True
        logger.info("ready: %s", ", ".join(self._slots))

    def _open(self, spec: IndexSpec, version: int) -> Slot:
        started = time.perf_counter()
        logger.info("loading index %r (version %d) from %s", spec.name, version, spec.path)
        searcher = Searcher(**spec.searcher)
        warm_lengths = getattr(searcher.query_side, "warm", None)
        if warm_lengths is not None:
            warm_lengths()
        docids = []
        for text in WARM_QUERIES:  # warm the query side and the engine, alone and batched
            docids += [hit.docid for hit in searcher.search(text, k=10, explain=True)]
        searcher.batch_search(list(WARM_QUERIES), ["0", "1"], k=10, threads=self.config.threads)
        has_texts = True
        try:
            searcher.docs(docids[:10])
        except InputError as err:  # an index without stored texts, built from shards now gone
            has_texts = False
            logger.warning("index %r: search results carry no document text (%s)", spec.name, err)
        batcher = MicroBatcher(lambda key, encoded: self._run_group(searcher, has_texts, key, encoded),
                               self.config.max_batch, self.config.max_wait_ms, self.config.queue_size,
                               name=f"{spec.name}-v{version}", prepare=lambda key, texts: self._encode(searcher, texts))
        size = sum(folder_bytes(part) for part in spec.path.split(","))
        return Slot(spec, searcher, batcher, version, time.time(), time.perf_counter() - started, has_texts, size)

    @staticmethod
    def _alone(searcher: Searcher) -> bool:
        """Whether queries must be encoded and scored one at a time to give `Searcher.search`'s
        answer: dense query vectors and re-rankers' models run padded batches, whose float kernels
        may move the last bits (engines/base.py); impact and BM25 query sides encode each query
        alone anyway and batch only the engine's search."""
        return searcher.reranker is not None or searcher.query_side.makes == VECTOR

    def _encode(self, searcher: Searcher, texts: list[str]) -> tuple:
        qids = [str(position) for position in range(len(texts))]
        if self._alone(searcher):
            return texts, qids, [searcher.encode_queries([text], [qid])[0] for text, qid in zip(texts, qids)]
        return texts, qids, searcher.encode_queries(texts, qids)

    def _run_group(self, searcher: Searcher, has_texts: bool, key, encoded: tuple) -> list:
        k, explain = key
        texts, qids, queries = encoded
        threads = self.config.threads
        if self._alone(searcher):
            found = {}
            for text, qid, query in zip(texts, qids, queries):
                found.update(searcher.search_encoded([text], [qid], [query], k=k, threads=threads, explain=explain))
        else:
            found = searcher.search_encoded(texts, qids, queries, k=k, threads=threads, explain=explain)
        rankings = [found[qid] for qid in qids]
        docids = sorted({hit.docid for hits in rankings for hit in hits})
        documents = dict(zip(docids, searcher.doc_fields(docids))) if has_texts and docids else {}
        return [{"candidates": [hit_dict(hit, documents.get(hit.docid), explain) for hit in hits],
                 "query_terms": query_terms(query) if explain else None}
                for hits, query in zip(rankings, queries)]

    def close(self) -> None:
        for slot in list(self._slots.values()):
            slot.batcher.close()
            slot.searcher.close()

    # ---- reading
    def names(self) -> list[str]:
        return [spec.name for spec in self.config.indexes]

    def known(self, name: str) -> None:
        """NotFound unless `name` is a served index."""
        if name not in self._reload_locks:
            raise NotFound(f"index {name!r}: not served here (served: {', '.join(self.names())})")

    def slot(self, name: str) -> Slot:
        self.known(name)
        if not self.ready:
            raise NotReady()
        return self._slots[name]

    def kind(self, name: str) -> str:
        return self.slot(name).searcher.engine.scores  # what the engine says its scores are

    def status(self, name: str) -> dict:
        slot = self.slot(name)
        described = slot.searcher.engine.describe()
        return {"downloaded": True, "size_bytes": str(slot.size_bytes), "name": name,
                "kind": self.kind(name), "engine": slot.searcher.engine.name,
                "encoder": slot.spec.searcher.get("encoder"), "reranker": slot.spec.searcher.get("reranker"),
                "documents": described.get("documents"), "version": slot.version,
                "loaded_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(slot.loaded_at)),
                "load_seconds": round(slot.load_seconds, 3), "queue_depth": slot.batcher.depth,
                "batches": slot.batcher.batches, "queries": slot.batcher.queries,
                "has_texts": slot.has_texts}

    def document(self, name: str, docid: str) -> dict:
        slot = self.slot(name)
        if not slot.has_texts:
            raise NotFound(f"index {name!r} keeps no document texts")
        document = slot.searcher.doc_fields([docid])[0]
        if document is None:
            missing = NotFound(f"document {docid!r}: not in index {name!r}")
            missing.field = "docid"
            raise missing
        return {"id": docid, **document}  # "contents", and "title" where the index keeps it apart

    # ---- judging (the index entry's qrels; nothing here needs the index loaded)
    def qrels(self, name: str) -> dict[str, dict[str, int]]:
        """The index's configured qrels, {qid: {docid: relevance}} (InputError where none is configured)."""
        self.known(name)
        if name not in self._qrels:
            raise InputError(f"index {name!r}: no qrels configured (an index entry's 'qrels: PATH', or --qrels)")
        return self._qrels[name]

    def evaluate(self, name: str, metric: str, qid: str, scores: dict[str, float], cutoff: int) -> float:
        """`metric`@`cutoff` of one query's `{docid: score}` against the index's qrels (trec_eval)."""
        if qid not in self.qrels(name):
            raise InputError(f"query {qid!r}: not judged in the qrels of index {name!r}")
        return evaluate_ranking(self.config.index(name).qrels, qid, scores, metric, cutoff)

    # ---- searching
    def submit(self, name: str, texts: list[str], hits: int, explain: bool):
        """Futures of each query's candidates; all queued or none (Overloaded)."""
        for _ in range(3):  # a reload may close the slot between reading and submitting
            slot = self.slot(name)
            try:
                return slot.batcher.submit_many([((hits, explain), text) for text in texts])
            except Closed:
                time.sleep(0.001)
        raise Overloaded()

    def explain(self, name: str, text: str, docids: list[str]) -> list[dict]:
        """The named documents' matching terms for `text`, from the index's engine (the first stage
        when the index is re-ranked); the score of a document that matches no term is 0. NotFound
        names a document the index does not hold."""
        searcher = self.slot(name).searcher
        query = searcher.encode_queries([text], ["q"])[0]
        try:
            matched = searcher.engine.explain(query, docids)
        except InputError as err:  # the engine's message names the index's folder: name the document instead
            if "no document" not in str(err):
                raise
            for docid in docids:
                try:
                    searcher.engine.explain(query, [docid])
                except InputError:
                    raise NotFound(f"document {docid!r}: not in index {name!r}") from None
            raise
        reranked = searcher.reranker is not None
        explained = []
        for docid in docids:
            terms = matched.get(docid, ())
            score = run_precision(sum(term.contribution for term in terms))
            explained.append({"docid": docid, "score": None if reranked else score,
                              "first_stage_score": score if reranked else None,
                              "explained": "first_stage" if reranked else "score",
                              "terms": [{"term": m.term, "query_weight": m.query_weight,
                                         "document_weight": m.document_weight, "contribution": m.contribution}
                                        for m in terms]})
        return explained

    async def search(self, name: str, text: str, hits: int = 10, qid: str = "", explain: bool = False) -> dict:
        return (await self.search_many(name, [(qid, text)], hits, explain))[0]

    async def search_many(self, name: str, queries: list[tuple[str, str]], hits: int = 10,
                          explain: bool = False) -> list[dict]:
        started = time.perf_counter()
        futures = self.submit(name, [text for _, text in queries], hits, explain)
        results = await asyncio.gather(*[asyncio.wrap_future(future) for future in futures])
        took_ms = round((time.perf_counter() - started) * 1000.0, 3)
        answers = []
        for (qid, text), result in zip(queries, results):
            answer = {"query": {"qid": qid, "query_txt": text}, "candidates": result["candidates"], "took_ms": took_ms}
            if result["query_terms"] is not None:
                answer["query_terms"] = result["query_terms"]
            answers.append(answer)
        return answers

    def reload(self, name: str) -> dict:
        """Open the configured path again beside the current version, warm it, switch atomically."""
        current = self.slot(name)
        lock = self._reload_locks[name]
        with lock:
            current = self._slots[name]
            fresh = self._open(current.spec, current.version + 1)
            self._slots[name] = fresh  # one assignment: every later request gets the new version
        current.batcher.close()  # finishes what it holds
        current.searcher.close()
        logger.info("index %r: version %d serves (reloaded in %.2f s)", name, fresh.version, fresh.load_seconds)
        return {"name": name, "version": fresh.version, "load_seconds": round(fresh.load_seconds, 3)}
