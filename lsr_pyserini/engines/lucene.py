"""Lucene engines, through Pyserini's searchers: `lucene` (impact search) and `bm25`.

Every call into Java runs on the one JVM thread (`core.java.on_jvm_thread`: pyjnius is not safe
under several Python threads); parallel search is Anserini's own batch search with `threads` Java
threads, and results are turned into Python values on the JVM thread.

- `lucene`: Anserini's `SimpleImpactSearcher` with the integer impacts given, each query term kept
  only where Pyserini's `LuceneImpactSearcher` keeps it (in the index, idf above `min_idf`), so the
  run equals `lucene search --impact` on the TSV `encode queries` writes, line for line.
- `bm25`: `LuceneSearcher` with BM25 (k1, b; Pyserini's 0.9, 0.4 by default) and the default
  analyzer, as `lucene search --bm25`; with `pretokenized=True` whitespace analysis and queries
  given as `{term: boost}` bags (augmented BM25, `bm25aug queries`), each term repeated by its
  boost, which Pyserini's bag-of-words query turns into one clause of that boost.

Explanations come from Lucene's own `IndexSearcher.explain` on the query Anserini builds, under
the similarity it scores with: for `lucene` every term's contribution is query impact x document
impact (their sum is the score before Anserini's tie adjustment, exactly); for `bm25` they are
Lucene's per-term BM25 scores. Document text comes from the index's stored `raw` or `contents`
field, else from the `encode corpus` shards the index was built from (`INDEX.lsr.json` names them).
"""
from __future__ import annotations

import json

from ..core.errors import InputError
from ..core.hits import Run, TermMatch, run_precision
from ..core.indexes import BM25, IMPACT, encoding_record, lucene_index_kind, shards_folder
from ..core.java import on_jvm_thread
from .base import ENCODED, IMPACTS, TEXT, Engine, manifest_encoder, register, sorted_matches

CONTENTS = "contents"
PYSERINI_BM25 = (0.9, 0.4)


def _explanation_terms(explanation) -> list[TermMatch]:
    """(term, query weight, document weight, contribution) of each `weight(contents:TERM in N)`
    node of a Lucene explanation tree."""
    matches = []
    stack = [explanation]
    while stack:
        node = stack.pop()
        description = node.getDescription()
        if description.startswith("weight(") and f"{CONTENTS}:" in description:
            term = description[description.index(f"{CONTENTS}:") + len(CONTENTS) + 1: description.rindex(" in ")]
            value = float(node.getValue().floatValue())
            boost, freq = 1.0, None
            inner = list(node.getDetails())
            while inner:
                detail = inner.pop()
                text = detail.getDescription()
                if text.startswith("boost"):
                    boost = float(detail.getValue().floatValue())
                elif text.startswith("freq"):
                    freq = float(detail.getValue().floatValue())
                inner.extend(detail.getDetails())
            # ImpactSimilarity explains `impact(freq=F)` with no freq detail: the value is the impact
            matches.append(TermMatch(term, boost, value if freq is None else freq, value))
        else:
            stack.extend(node.getDetails())
    return matches


class LuceneIndex:
    """What both Lucene engines share: the folder, a reader for explanations, documents by id.
    Its methods run on the JVM thread (call them through `on_jvm_thread`)."""

    def __init__(self, index: str, similarity):
        from jnius import autoclass

        self.path = str(index)
        reader_class = autoclass("org.apache.lucene.index.DirectoryReader")
        directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(self.path))
        self.reader = reader_class.open(directory)
        self.index_searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
            self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self.index_searcher.setSimilarity(similarity)
        self.utils = autoclass("io.anserini.index.IndexReaderUtils")
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self._shards = None  # ShardDocuments of the recorded shards; False when there are none

    def explain(self, query, docids: list[str], impacts: dict[str, int] | None = None) -> dict[str, tuple[TermMatch, ...]]:
        """Each document's matching terms under `query` (a Lucene Query). With `impacts` (impact
        search), a term's contribution is its query impact x the document's impact (Lucene's
        ImpactSimilarity explains the document's impact alone; the boost multiplies it)."""
        explained = {}
        for docid in docids:
            lucene_docid = self.utils.convertDocidToLuceneDocid(self.reader, docid)
            if lucene_docid < 0:
                raise InputError(f"{self.path}: no document {docid!r}")
            explanation = self.index_searcher.explain(query, lucene_docid)
            matches = _explanation_terms(explanation) if explanation.isMatch() else []
            if impacts is not None:
                matches = [TermMatch(m.term, float(impacts[m.term]), m.document_weight,
                                     float(impacts[m.term]) * m.document_weight) for m in matches]
            explained[docid] = sorted_matches(matches)
        return explained

    def docs(self, searcher, docids: list[str]) -> list[str | None]:
        """Documents' texts: from the `encode corpus` shards the index was built from where its record
        names them (read in Python: about 0.1 ms a document, against 1.5-2 ms for Pyserini's stored
        field lookup by id), else from the stored fields, in one trip to the JVM thread."""
        shards = self._shard_documents()
        if shards:
            return [shards.text(docid) for docid in docids]
        return on_jvm_thread(lambda: [self.doc(searcher, docid) for docid in docids])

    def doc(self, searcher, docid: str) -> str | None:
        document = searcher.doc(docid)
        if document is None:
            return None
        raw = document.raw()
        if raw:
            try:
                record = json.loads(raw)
            except ValueError:
                return raw
            if isinstance(record, dict):
                for field in ("contents", "text"):
                    if isinstance(record.get(field), str):
                        return record[field]
            return raw
        contents = document.contents()
        if contents:
            return contents
        return self._doc_from_shards(docid)

    def _shard_documents(self):
        if self._shards is None:
            from ..stores.documents import ShardDocuments

            folder = shards_folder(self.path)
            self._shards = ShardDocuments(folder) if folder is not None else False
        return self._shards

    def _doc_from_shards(self, docid: str) -> str | None:
        shards = self._shard_documents()
        if not shards:
            raise InputError(f"{self.path} stores no document text (build it with --storeRaw) and the "
                             f"`encode corpus` shards it was built from are not beside its INDEX.lsr.json record")
        return shards.text(docid)


def _java_hits(results, qids: list[str]) -> Run:
    """{qid: [(docid, score)]} from Anserini's batch result (a Java map of ScoredDoc arrays)."""
    found = {}
    for entry in results.entrySet().toArray():
        found[entry.getKey()] = [(hit.docid, run_precision(hit.score)) for hit in entry.getValue()]
    return {qid: found.get(qid, []) for qid in qids}


class LuceneImpactEngine(Engine):
    name = "lucene"
    query_kind = IMPACTS

    @classmethod
    def check_query_side(cls, index, settings: dict | None, encoder: str | None) -> None:
        if settings is None and not isinstance(index, list):
            raise InputError(f"{index} is an impact index: give the encoder of its documents' impacts (encoder=..., "
                             f"e.g. 'splade-tiny')")
        super().check_query_side(index, settings, encoder)
        if lucene_index_kind(index) == BM25:
            raise InputError(f"{index} is a BM25 index: search it without an encoder (encoder {encoder!r} gives "
                             f"impacts, which BM25 term frequencies do not match)")

    def document_side(self) -> dict | None:
        return recorded_encoder(self.path)

    def __init__(self, index: str, min_idf: float = 0):
        self.path, self.min_idf = str(index), min_idf
        on_jvm_thread(self._open)

    def _open(self):
        from jnius import autoclass
        from pyserini.search.lucene import LuceneImpactSearcher

        self.searcher = LuceneImpactSearcher(self.path, query_encoder=None, min_idf=self.min_idf)
        self.index = LuceneIndex(self.path, autoclass("io.anserini.search.similarity.ImpactSimilarity")())
        self.documents = int(self.searcher.num_docs)

    @property
    def idf(self) -> dict[str, float]:
        return self.searcher.idf

    def kept(self, impacts: dict[str, int]) -> dict[str, int]:
        """The query terms Pyserini's LuceneImpactSearcher sends (in the index, idf above min_idf)."""
        idf, min_idf = self.searcher.idf, self.min_idf
        return {term: weight for term, weight in impacts.items() if term in idf and idf[term] > min_idf}

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        return on_jvm_thread(self._search, qids, queries, k, threads)

    def _search(self, qids, queries, k, threads) -> Run:
        from pyserini.pyclass import JArrayList, JHashMap, JInt

        query_list, qid_list = JArrayList(), JArrayList()
        for impacts in queries:
            query = JHashMap()
            for term, weight in self.kept(impacts).items():
                query.put(term, JInt(int(weight)))
            query_list.add(query)
        for qid in qids:
            qid_list.add(qid)
        return _java_hits(self.searcher.object.batch_search(query_list, qid_list, int(k), int(threads)), qids)

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        return on_jvm_thread(self._explain, query, docids)

    def _explain(self, query, docids):
        from pyserini.pyclass import JFloat, JHashMap

        weights = JHashMap()
        for term, weight in self.kept(query).items():
            weights.put(term, JFloat(float(weight)))
        return self.index.explain(self.index.generator.buildQuery(CONTENTS, weights), docids, self.kept(query))

    def doc(self, docid: str) -> str | None:
        return self.docs([docid])[0]

    def docs(self, docids: list[str]) -> list[str | None]:
        return self.index.docs(self.searcher, docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents}

    def close(self) -> None:
        on_jvm_thread(self.searcher.object.close)


class Bm25Engine(Engine):
    name = "bm25"
    query_kind = TEXT
    scores = "tf"

    @classmethod
    def check_query_side(cls, index, settings: dict | None, encoder: str | None) -> None:
        super().check_query_side(index, settings, encoder)
        if settings is not None and settings.get("family") not in ("bm25aug", ENCODED):
            if lucene_index_kind(index) == IMPACT:
                raise InputError(f"{index} is an impact index: search it with engine 'lucene' (BM25 takes no encoder, "
                                 f"or a bm25aug checkpoint)")
            raise InputError(f"encoder {encoder!r} makes impact queries, but {index} is searched with BM25: "
                             f"a BM25 index takes no encoder, or a bm25aug checkpoint")

    def __init__(self, index: str, k1: float = PYSERINI_BM25[0], b: float = PYSERINI_BM25[1],
                 pretokenized: bool = False):
        from ..kernels.wordpiece_bm25 import bm25_check

        bm25_check(k1, b)
        self.path, self.k1, self.b, self.pretokenized = str(index), float(k1), float(b), bool(pretokenized)
        on_jvm_thread(self._open)

    def _open(self):
        from jnius import autoclass
        from pyserini.search.lucene import LuceneSearcher

        self.searcher = LuceneSearcher(self.path)
        if self.pretokenized:
            from pyserini.analysis import JWhiteSpaceAnalyzer

            self.searcher.set_analyzer(JWhiteSpaceAnalyzer())
        self.searcher.set_bm25(self.k1, self.b)
        self.analyzer = self.searcher.object.get_analyzer()
        similarity = autoclass("org.apache.lucene.search.similarities.BM25Similarity")(self.k1, self.b)
        self.index = LuceneIndex(self.path, similarity)
        self.documents = int(self.searcher.num_docs)

    def query_string(self, query) -> str:
        """A text as it is; a {term: boost} bag as each term repeated by its boost (pretokenized only)."""
        if isinstance(query, str):
            return query
        if not self.pretokenized:
            raise InputError("engine 'bm25': a {term: boost} query needs pretokenized=True (whitespace analysis)")
        return " ".join(" ".join([term] * int(boost)) for term, boost in query.items())

    def search(self, qids: list[str], queries: list, k: int, threads: int = 1) -> Run:
        strings = [self.query_string(query) for query in queries]
        return on_jvm_thread(self._search, qids, strings, k, threads)

    def _search(self, qids, strings, k, threads) -> Run:
        results = self.searcher.batch_search(strings, qids, k=int(k), threads=int(threads))
        return {qid: [(hit.docid, run_precision(hit.score)) for hit in results.get(qid, [])] for qid in qids}

    def explain(self, query, docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        text = self.query_string(query)
        return on_jvm_thread(lambda: self.index.explain(self.index.generator.buildQuery(CONTENTS, self.analyzer, text),
                                                        docids))

    def doc(self, docid: str) -> str | None:
        return self.docs([docid])[0]

    def docs(self, docids: list[str]) -> list[str | None]:
        return self.index.docs(self.searcher, docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents, "k1": self.k1, "b": self.b,
                "pretokenized": self.pretokenized}

    def close(self) -> None:
        on_jvm_thread(self.searcher.close)


def recorded_encoder(index) -> dict | None:
    """The document encoder an impact index's record names: its own copy, else the manifest of the
    `encode corpus` shards it was built from (an index built elsewhere records none)."""
    record = encoding_record(index) or {}
    if isinstance(record.get("encoder"), dict):
        return record["encoder"]
    return manifest_encoder(record["shards_manifest"]) if record.get("shards_manifest") else None


def check_lucene_index(index, engine: str) -> str:
    """The index's kind (core/indexes.py), refusing a folder that is not a Lucene index, in one line."""
    if isinstance(index, (list, tuple)):
        raise InputError(f"engine {engine!r} searches one index; several shard indexes: engine 'sharded'")
    return lucene_index_kind(index)


@register("lucene", LuceneImpactEngine)
def build_lucene(index: str, min_idf: float = 0) -> LuceneImpactEngine:
    check_lucene_index(index, "lucene")
    return LuceneImpactEngine(index, min_idf)


@register("bm25", Bm25Engine)
def build_bm25(index: str, k1: float = PYSERINI_BM25[0], b: float = PYSERINI_BM25[1],
               pretokenized: bool = False) -> Bm25Engine:
    if check_lucene_index(index, "bm25") == IMPACT and not pretokenized:
        raise InputError(f"{index} is an impact index (INDEX.lsr.json beside it): search it with an encoder "
                         f"(engine 'lucene'), not with BM25")
    return Bm25Engine(index, k1, b, pretokenized)


__all__ = ["LuceneImpactEngine", "Bm25Engine", "LuceneIndex", "PYSERINI_BM25"]
