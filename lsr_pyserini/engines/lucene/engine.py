"""Lucene engines on Anserini's and Lucene's classes: `lucene` (impact search) and `bm25`.

Neither imports Pyserini's Python search modules (which import torch and transformers: 8 s): the
classes are named here, so a search starts in the time the JVM takes.

Every call into Java runs on the one JVM thread (`core.jvm.on_jvm_thread`: pyjnius is not safe
under several Python threads); parallel search is Anserini's own batch search with `threads` Java
threads, and results are turned into Python values on the JVM thread.

- `lucene`: Anserini's `SimpleImpactSearcher` with the integer impacts given, each query term kept
  only where Pyserini's `LuceneImpactSearcher` keeps it (in the index, idf above `min_idf`), so the
  run equals `lucene search --impact` on the TSV `encode queries` writes, line for line.
- `bm25`: `LuceneSearcher` with BM25 (k1, b; Pyserini's 0.9, 0.4 by default) and the default
  analyzer, as `lucene search --bm25`; with `pretokenized=True` whitespace analysis and queries
  given as `{term: boost}` bags (augmented BM25, `bm25aug queries`), each term repeated by its
  boost, which Pyserini's bag-of-words query turns into one clause of that boost.

The top k costs the search, not the reading of ids: Lucene ranks by (score, the `id` field's doc
values) as Anserini's searchers ask (`TopK`), the hits cross to Python as one JSON text per query
(Jackson, in Anserini's jar) with each id taken from its sort value, and Anserini's tie adjustment
is applied in Python bit for bit (`core/hits.adjust_ties`): the run equals Anserini's, without
reading a stored field. An index without doc values on `id` (built elsewhere) is searched through
Anserini's own batch search (ids from stored fields), with one warning.

Explanations come from Lucene's own `IndexSearcher.explain` on the query Anserini builds, under
the similarity it scores with: for `lucene` every term's contribution is query impact x document
impact (their sum is the score before Anserini's tie adjustment, exactly); for `bm25` they are
Lucene's per-term BM25 scores. Document text comes from the index's stored `raw` or `contents`
field, else from the `encode corpus` shards the index was built from (its `lsr_index.json` names them).
"""
from __future__ import annotations

import json
import logging
import os
import re
import sys
from pathlib import Path

import numpy as np

from ...core.errors import InputError
from ...core.hits import Run, TermMatch, adjust_ties, run_precision
from ...core.indexes import (BM25, CONTENTS, IMPACT, encoding_record, is_lucene_index, is_remote, lucene_index_kind,
                             record_description, shards_folder, shards_manifest)
from ...core.jvm import on_jvm_thread
from ...stores.documents import document_fields
from ..base import ENCODED, IMPACTS, TEXT, Engine, manifest_encoder, register, sorted_matches

log = logging.getLogger(__name__)
CONTENTS, ID = "contents", "id"
PYSERINI_BM25 = (0.9, 0.4)
BM25_FAMILIES = (None, "bm25aug")  # no encoder, or augmented BM25 queries: a Lucene index of unknown kind is BM25


def lucene_kind_of(index) -> str | None:
    """IMPACT, BM25 or UNKNOWN for a Lucene index folder; None for anything else."""
    if isinstance(index, (list, tuple)) or is_remote(index) or not Path(index).is_dir() or not is_lucene_index(index):
        return None
    return lucene_index_kind(index)


def lucene_index_command(input: Path, index: Path, collection: str, impact: bool) -> list[str]:
    """`lucene index` of a JsonVectorCollection (impact) or a JsonCollection (text), two threads."""
    flags = ["--impact", "--pretokenized"] if impact else []
    return [sys.executable, "-m", "lsr_pyserini.lucene", "index", "--collection", collection, "--input", str(input),
            "--index", str(index), "--generator", "DefaultLuceneDocumentGenerator", *flags, "--threads", "2"]


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
        from jnius import JavaException, autoclass

        self.path = str(index)
        reader_class = autoclass("org.apache.lucene.index.DirectoryReader")
        directory = autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(self.path))
        try:
            self.reader = reader_class.open(directory)
        except JavaException as err:  # a corrupt or partial index: refused before the first query
            reason = (str(err).splitlines() or ["unreadable"])[0]
            raise InputError(f"{self.path}: not a readable Lucene index ({reason})") from None
        self.index_searcher = autoclass("org.apache.lucene.search.IndexSearcher")(
            self.reader, signature="(Lorg/apache/lucene/index/IndexReader;)V")
        self.index_searcher.setSimilarity(similarity)
        self.utils = autoclass("io.anserini.index.IndexReaderUtils")
        self.generator = autoclass("io.anserini.search.query.BagOfWordsQueryGenerator")()
        self.documents = int(self.reader.numDocs())
        self._shards = None  # ShardDocuments of the recorded shards; False when there are none

    def document(self, docid: str):
        """The stored Lucene document of an external id (None when there is none)."""
        lucene_docid = self.utils.convertDocidToLuceneDocid(self.reader, docid)
        return None if lucene_docid < 0 else self.reader.storedFields().document(lucene_docid)

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

    def docs(self, docids: list[str]) -> list[str | None]:
        """Documents' texts (see `doc_fields`)."""
        return [None if found is None else found["contents"] for found in self.doc_fields(docids)]

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        """Documents' `{"contents"[, "title"]}`: from the `encode corpus` shards the index was built from
        where its record names them (read in Python: about 0.1 ms a document, against 1.5-2 ms for
        Pyserini's stored field lookup by id), else from the stored fields, in one trip to the JVM thread."""
        shards = self._shard_documents()
        if shards:
            return [shards.document(docid) for docid in docids]
        return on_jvm_thread(lambda: [self.stored(docid) for docid in docids])

    def stored(self, docid: str) -> dict | None:
        """The document's `{"contents"[, "title"]}` from its stored raw JSON (the shard record it was
        indexed from) or `contents` field, else from the shards; None when the index has no such id."""
        document = self.document(docid)
        if document is None:
            return None
        raw = document.get("raw")
        if raw:
            try:
                record = json.loads(raw)
            except ValueError:
                return {"contents": raw}
            if isinstance(record, dict):
                for field in ("contents", "text"):
                    if isinstance(record.get(field), str):
                        return document_fields({**record, "contents": record[field]})
            return {"contents": raw}
        contents = document.get(CONTENTS)
        if contents:
            return {"contents": contents}
        return self._doc_from_shards(docid)

    def _shard_documents(self):
        if self._shards is None:
            from ...stores.documents import ShardDocuments

            folder = shards_folder(self.path)
            self._shards = ShardDocuments(folder) if folder is not None else False
        return self._shards

    def _doc_from_shards(self, docid: str) -> dict | None:
        shards = self._shard_documents()
        if not shards:
            raise InputError(f"{self.path} stores no document text (build it with --storeRaw) and the "
                             f"`encode corpus` shards it was built from are not where its record says")
        return shards.document(docid)


def _java_hits(results, qids: list[str]) -> Run:
    """{qid: [(docid, score)]} from Anserini's batch result (a Java map of ScoredDoc arrays)."""
    found = {}
    for entry in results.entrySet().toArray():
        found[entry.getKey()] = [(hit.docid, run_precision(hit.score)) for hit in entry.getValue()]
    return {qid: found.get(qid, []) for qid in qids}


class TopK:
    """The top k of a Lucene query as Anserini's searchers return it, read without stored fields.

    Anserini's `SimpleImpactSearcher` and `SimpleSearcher` ask Lucene for the top k under
    Sort(score, `id` as a string), read every hit's stored document for its id, then adjust ties
    (`ScoreTiesAdjusterReranker`). Here a query's hits cross to Python as one text (commons-lang's
    ReflectionToStringBuilder of Lucene's TopDocs, in Anserini's jar): no object per hit, no
    stored field. Two ways, one order:

    - `by_score` (impact indexes): Lucene's plain top k by score, which can skip blocks that cannot
      enter it, ids from a table of the index's ids built once at opening (from the `id` field's
      doc values, with each id's rank in byte order); the hits are ordered by (score, id rank) in
      numpy, and while the last hit fetched ties with the k-th the depth doubles, so a tie at the
      cut-off is resolved by id as Anserini does. Impact scores are sums of integers, exact in
      float32 whatever order Lucene adds them in.
    - sorted (BM25: float scores, whose last bits depend on the order of the sum): the very collector
      Anserini runs, Sort(score, id), each hit's id read from its sort value.

    `adjust_ties` then repeats Anserini's tie adjustment bit for bit in float32. Methods run on the
    JVM thread."""

    def __init__(self, index: "LuceneIndex", by_score: bool):
        from jnius import autoclass

        sort_field = autoclass("org.apache.lucene.search.SortField")
        string = autoclass("org.apache.lucene.search.SortField$Type").STRING_VAL
        self.searcher, self.documents = index.index_searcher, index.documents
        self.sort = autoclass("org.apache.lucene.search.Sort")(sort_field.FIELD_SCORE, sort_field(ID, string))
        self.text = autoclass("org.apache.commons.lang3.builder.ReflectionToStringBuilder")
        self.ids = None
        if by_score and index.reader.maxDoc() > 0:  # lucene docid -> external id, from the doc values
            everything = self.searcher.search(autoclass("org.apache.lucene.search.MatchAllDocsQuery")(),
                                              int(index.reader.maxDoc()),
                                              autoclass("org.apache.lucene.search.Sort")(sort_field(ID, string)), False)
            self.ids = np.empty(int(index.reader.maxDoc()), dtype=object)
            self.rank = np.zeros(int(index.reader.maxDoc()), dtype=np.int64)  # the id's place in byte order
            for place, (doc, _, ref) in enumerate(self.hits(everything)):
                self.ids[doc], self.rank[doc] = docid_of(ref), place

    @classmethod
    def of(cls, index: "LuceneIndex", by_score: bool) -> "TopK | None":
        """The fast top k of an index whose `id` field has binary doc values (what Anserini writes,
        and what Lucene's STRING_VAL sort reads); None for one without them."""
        from jnius import autoclass

        info = autoclass("org.apache.lucene.index.FieldInfos").getMergedFieldInfos(index.reader).fieldInfo(ID)
        if info is None or info.getDocValuesType().toString() != "BINARY":
            return None
        return cls(index, by_score)

    def hits(self, top) -> list[tuple[int, float, str | None]]:
        """(lucene docid, Lucene's float32 score, the id's sort value as hex or None) of TopDocs' hits."""
        return [(int(doc), float(score), ref or None) for doc, score, ref in HIT.findall(self.text.toString(top))]

    def raw(self, query, k: int) -> list[tuple[str, float]]:
        """[(docid, Lucene's float32 score)] of the top k, in Anserini's order, before its tie adjustment."""
        if self.ids is None:
            top = self.searcher.search(query, int(k), self.sort, True)
            return [(docid_of(ref), score) for _, score, ref in self.hits(top)]
        if not self.documents:
            return []
        k, depth = int(k), min(int(k) + 1, self.documents)
        while True:
            docs, scores = self.scored(self.searcher.search(query, depth))
            order = np.lexsort((self.rank[docs], -scores))  # score descending, then the id's bytes
            if len(order) <= k or depth >= self.documents or scores[order[k - 1]] != scores[order[-1]]:
                top = order[:k]
                return list(zip(self.ids[docs[top]].tolist(), scores[top].tolist()))
            depth = min(depth * 2, self.documents)  # the k-th ties with the last fetched: more may tie

    def scored(self, top) -> tuple[np.ndarray, np.ndarray]:
        """(lucene docids, scores) of plain TopDocs, parsed in C: its text with the labels taken out
        is a run of numbers, three a hit (doc, score, shard index)."""
        text = self.text.toString(top)
        start = text.find("scoreDocs={") + len("scoreDocs={")
        body = text[start:text.index("}", start)]
        numbers = np.array(body.replace("doc=", "").replace(" score=", " ").replace(" shardIndex=", " ")
                           .replace(",", " ").split(), dtype=np.float64)
        if len(numbers) != 3 * body.count("doc="):  # not the text expected: read it hit by hit
            hits = SCORED.findall(body)
            return np.array([int(d) for d, _ in hits], dtype=np.int64), np.array([float(v) for _, v in hits])
        return numbers[0::3].astype(np.int64), numbers[1::3]

    def search(self, query, k: int) -> list[tuple[str, float]]:
        """[(docid, score)] as Anserini's searcher returns them (tie-adjusted, at run precision)."""
        hits = self.raw(query, k)
        scores = run_precisions(np.array(adjust_ties(s for _, s in hits), dtype=np.float32))
        return list(zip([docid for docid, _ in hits], scores))


def run_precisions(scores: np.ndarray) -> list[float]:
    """`run_precision` of float32 scores, in one pass: x * 10**6 is exact in float64 for a float32 x
    below 2**24 (24 + 20 bits), numpy's round takes it to the nearest integer, halves to even, as
    Python's formatting rounds the exact value, and the quotient by 10**6 is the double nearest that
    decimal, which is what parsing its text gives. Other scores go one by one."""
    if len(scores) and float(np.abs(scores).max()) < 2.0 ** 24:
        return np.round(scores.astype(np.float64), 6).tolist()
    return [run_precision(float(score)) for score in scores]


# one hit of Lucene's ScoreDoc/FieldDoc toString: "doc=12 score=3.0 shardIndex=-1[ fields=[..., [69 64]]]"
HIT = re.compile(r"doc=(\d+) score=(\S+) shardIndex=-?\d+(?: fields=\[(?:[^\[\]]*, )?\[([0-9a-f ]*)\]\])?")
SCORED = re.compile(r"doc=(\d+) score=([^ ]+)")  # a plain ScoreDoc's (no sort values): a fifth faster


def docid_of(ref: str) -> str:
    """An id from BytesRef's toString (its bytes in hex, "[69 64]")."""
    return bytes.fromhex(ref).decode("utf-8")


def fast_path_default() -> bool:
    """The fast top k unless LSR_PYSERINI_LUCENE_TOP_K=anserini (Anserini's own batch search: the
    before of a benchmark, or a check)."""
    choice = os.environ.get("LSR_PYSERINI_LUCENE_TOP_K", "fast")
    if choice not in ("fast", "anserini"):
        raise InputError(f"LSR_PYSERINI_LUCENE_TOP_K={choice!r}: expected fast or anserini")
    return choice == "fast"


def slow_top_k_warning(path: str) -> None:
    log.warning(f"{path}: its `id` field has no binary doc values (an index built elsewhere): ids are read from "
                f"stored fields through Anserini's searcher, which is slower at large k")


class Idf:
    """log(N / df) of query terms, as Pyserini's LuceneImpactSearcher computes it for every term of
    the index at start-up, here only for the terms queries use (cached): N and df summed over
    `readers` (one index, or the shards of one collection). None for a term in no document."""

    def __init__(self, readers: list):
        from jnius import autoclass

        self.readers = readers
        self.term = autoclass("org.apache.lucene.index.Term")
        self.documents = sum(int(reader.numDocs()) for reader in readers)
        self.cache: dict[str, float | None] = {}

    def __call__(self, terms) -> dict[str, float | None]:
        new = [term for term in terms if term not in self.cache]
        if new:
            dfs = np.array([sum(int(reader.docFreq(self.term(CONTENTS, term))) for reader in self.readers)
                            for term in new], dtype=np.int64)
            with np.errstate(divide="ignore"):
                idfs = np.log(self.documents / dfs)  # the expression Pyserini evaluates (float64)
            for term, df, idf in zip(new, dfs, idfs):
                self.cache[term] = float(idf) if df > 0 else None
        return {term: self.cache[term] for term in terms}


class LuceneImpactEngine(Engine):
    name = "lucene"
    query_kind = IMPACTS
    recognition_order = 90  # after every engine with a record of its own: any Lucene index is one of the two
    index_description = "a Lucene index (a segments_N file)"

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        kind = lucene_kind_of(index)
        return kind == IMPACT or (kind not in (None, BM25) and family not in BM25_FAMILIES)

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return lucene_index_command(input, index, "JsonVectorCollection", impact=True)

    @classmethod
    def check_query_side(cls, index, settings: dict | None, encoder: str | None) -> None:
        if settings is None and not isinstance(index, list):
            if lucene_index_kind(index) == BM25:
                raise InputError(f"{index} is a BM25 index: search it with engine 'bm25' (or no engine), not "
                                 f"engine 'lucene', which scores impacts")
            raise InputError(f"{index} is an impact index: give the encoder of its documents' impacts (--encoder, "
                             f"or encoder= in Python; e.g. splade-tiny)")
        super().check_query_side(index, settings, encoder)
        if lucene_index_kind(index) == BM25:
            raise InputError(f"{index} is a BM25 index: search it without an encoder (encoder {encoder!r} gives "
                             f"impacts, which BM25 term frequencies do not match)")
        if not isinstance(index, list) and settings.get("family") != ENCODED and recorded_encoder(index) is None:
            check_vocabulary(index, settings, encoder)

    def document_side(self) -> dict | None:
        return recorded_encoder(self.path)

    def __init__(self, index: str, min_idf: float = 0, fast: bool | None = None):
        """`fast`: the top k read without stored fields (`TopK`) where the index allows; False: always
        through Anserini's batch search (the reference the benchmark and the tests compare with);
        None: `fast_path_default()`."""
        self.path, self.min_idf = str(index), min_idf
        on_jvm_thread(self._open, fast_path_default() if fast is None else fast)

    def _open(self, fast: bool):
        from jnius import autoclass

        self.index = LuceneIndex(self.path, autoclass("io.anserini.search.similarity.ImpactSimilarity")())
        self.documents = self.index.documents
        self.idf = Idf([self.index.reader])
        self.fast = TopK.of(self.index, by_score=True) if fast else None
        self._searcher = None  # Anserini's SimpleImpactSearcher, opened where it is needed
        self._whitespace = None
        if fast and self.fast is None:
            slow_top_k_warning(self.path)

    @property
    def searcher(self):
        """Anserini's SimpleImpactSearcher on this index (the slow path's; opened on first use)."""
        if self._searcher is None:
            from jnius import autoclass

            self._searcher = autoclass("io.anserini.search.SimpleImpactSearcher")(self.path)
        return self._searcher

    def kept(self, impacts: dict[str, int]) -> dict[str, int]:
        """The query terms Pyserini's LuceneImpactSearcher sends (in the index, idf above min_idf)."""
        idf = self.idf(list(impacts))
        return {term: weight for term, weight in impacts.items()
                if idf[term] is not None and idf[term] > self.min_idf}

    def search(self, qids: list[str], queries: list[dict[str, int]], k: int, threads: int = 1) -> Run:
        return on_jvm_thread(self._search, qids, queries, k, threads)

    def _query(self, impacts: dict[str, int]):
        """Anserini's query for these impacts: a boost per kept term. Built from one text (each term
        repeated by its impact, whitespace-analysed: what `lucene search --impact` reads), which is
        one call into Java, where a map costs two a term; from the map where a term is longer than
        the whitespace analyzer's 255 characters."""
        from jnius import autoclass

        kept = self.kept(impacts)
        if all(len(term) <= 255 for term in kept):
            if self._whitespace is None:
                self._whitespace = autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")()
            text = " ".join(" ".join([term] * int(weight)) for term, weight in kept.items())
            return self.index.generator.buildQuery(CONTENTS, self._whitespace, text)
        weights = autoclass("java.util.HashMap")()
        number = autoclass("java.lang.Float")
        for term, weight in kept.items():
            weights.put(term, number(float(int(weight))))  # Anserini's intToFloat
        return self.index.generator.buildQuery(CONTENTS, weights)

    def _search(self, qids, queries, k, threads) -> Run:
        if self.fast is not None:
            return {qid: self.fast.search(self._query(impacts), k) for qid, impacts in zip(qids, queries)}
        from jnius import autoclass

        query_list, qid_list = autoclass("java.util.ArrayList")(), autoclass("java.util.ArrayList")()
        number = autoclass("java.lang.Integer")
        for impacts in queries:
            query = autoclass("java.util.HashMap")()
            for term, weight in self.kept(impacts).items():
                query.put(term, number(int(weight)))
            query_list.add(query)
        for qid in qids:
            qid_list.add(qid)
        return _java_hits(self.searcher.batch_search(query_list, qid_list, int(k), int(threads)), qids)

    def explain(self, query: dict[str, int], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        return on_jvm_thread(self._explain, query, docids)

    def _explain(self, query, docids):
        return self.index.explain(self._query(query), docids, self.kept(query))

    def doc(self, docid: str) -> str | None:
        return self.docs([docid])[0]

    def docs(self, docids: list[str]) -> list[str | None]:
        return self.index.docs(docids)

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        return self.index.doc_fields(docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents}

    def close(self) -> None:
        on_jvm_thread(self._close)

    def _close(self) -> None:
        if self._searcher is not None:
            self._searcher.close()
        self.index.reader.close()


class Bm25Engine(Engine):
    name = "bm25"
    query_kind = TEXT
    scores = "tf"
    recognition_order = 91
    index_description = LuceneImpactEngine.index_description
    builds_from_text = True

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        kind = lucene_kind_of(index)
        return kind == BM25 or (kind not in (None, IMPACT) and family in BM25_FAMILIES)

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str]:
        return lucene_index_command(input, index, "JsonCollection", impact=False)

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
                 pretokenized: bool = False, fast: bool | None = None):
        from ...kernels.wordpiece_bm25 import bm25_check

        bm25_check(k1, b)
        self.path, self.k1, self.b, self.pretokenized = str(index), float(k1), float(b), bool(pretokenized)
        on_jvm_thread(self._open, fast_path_default() if fast is None else fast)

    def _open(self, fast: bool):
        from jnius import autoclass

        # Anserini's SimpleSearcher: its default analyzer, or whitespace (Pyserini's JWhiteSpaceAnalyzer)
        self.searcher = autoclass("io.anserini.search.SimpleSearcher")(self.path)
        if self.pretokenized:
            self.searcher.set_analyzer(autoclass("org.apache.lucene.analysis.core.WhitespaceAnalyzer")())
        self.searcher.set_bm25(self.k1, self.b)
        self.analyzer = self.searcher.get_analyzer()
        similarity = autoclass("org.apache.lucene.search.similarities.BM25Similarity")(self.k1, self.b)
        self.index = LuceneIndex(self.path, similarity)
        self.documents = self.index.documents
        self.fast = TopK.of(self.index, by_score=False) if fast else None
        if fast and self.fast is None:
            slow_top_k_warning(self.path)

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
        if self.fast is not None:
            return {qid: self.fast.search(self.index.generator.buildQuery(CONTENTS, self.analyzer, text), k)
                    for qid, text in zip(qids, strings)}
        from jnius import autoclass

        query_list, qid_list = autoclass("java.util.ArrayList")(), autoclass("java.util.ArrayList")()
        for text, qid in zip(strings, qids):
            query_list.add(text)
            qid_list.add(qid)
        return _java_hits(self.searcher.batch_search(query_list, qid_list, int(k), int(threads)), qids)

    def explain(self, query, docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        text = self.query_string(query)
        return on_jvm_thread(lambda: self.index.explain(self.index.generator.buildQuery(CONTENTS, self.analyzer, text),
                                                        docids))

    def doc(self, docid: str) -> str | None:
        return self.docs([docid])[0]

    def docs(self, docids: list[str]) -> list[str | None]:
        return self.index.docs(docids)

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        return self.index.doc_fields(docids)

    def describe(self) -> dict:
        return {"engine": self.name, "index": self.path, "documents": self.documents, "k1": self.k1, "b": self.b,
                "pretokenized": self.pretokenized}

    def close(self) -> None:
        on_jvm_thread(self._close)

    def _close(self) -> None:
        self.searcher.close()
        self.index.reader.close()


def recorded_encoder(index) -> dict | None:
    """The document encoder an impact index's record names: its own copy, else the manifest of the
    `encode corpus` shards it was built from (an index built elsewhere records none)."""
    record = encoding_record(index) or {}
    if isinstance(record.get("encoder"), dict):
        encoder = record["encoder"]
        if "preset" not in encoder:  # an index of before: the preset's name from the shards' manifest
            manifest = shards_manifest(index)
            preset = (manifest_encoder(manifest) or {}).get("preset") if manifest is not None else None
            encoder = {**encoder, "preset": preset} if preset else encoder
        return encoder
    manifest = shards_manifest(index)
    return manifest_encoder(manifest) if manifest is not None else None


# families whose impact terms are their tokenizer's tokens: an index with no record of its encoder
# is checked against the tokenizer's vocabulary; any other family's cannot be told, and is refused
TOKEN_TERM_FAMILIES = ("splade", "tildev2", "sparseembed")
VOCABULARY_SHARE = 0.95  # of an index's sampled terms, in the encoder's vocabulary


def check_vocabulary(index, settings: dict, encoder: str | None) -> None:
    """For an impact index that records no encoder (built from vectors encoded elsewhere): refuse,
    in one line, an encoder whose vocabulary does not hold the index's terms, and an encoder of a
    family whose terms cannot be checked."""
    from ...core.indexes import index_terms

    family = settings.get("family")
    if family not in TOKEN_TERM_FAMILIES:
        raise InputError(f"{index} records no encoder (no lsr_index.json in it) and family {family!r}'s terms "
                         f"cannot be checked against it: rebuild it with `lucene index` from `encode corpus` shards")
    from ...core.hf import load_tokenizer
    from ...core.presets import resolve_model
    from ...models.exact_match import EXACT_PREFIX

    vocabulary = load_tokenizer(resolve_model(settings["model"])).get_vocab()
    terms = index_terms(index)
    exact = settings.get("exact_match", "none") != "none"  # its BM25 terms: the analyzer's, under their prefix
    known = sum(term in vocabulary or (exact and term.startswith(EXACT_PREFIX)) for term in terms)
    if terms and known < VOCABULARY_SHARE * len(terms):
        raise InputError(f"{index} records no encoder, and its terms are not encoder {encoder!r}'s vocabulary "
                         f"({known} of {len(terms)} sampled terms are): give the encoder its documents were "
                         f"encoded with")


def check_lucene_index(index, engine: str) -> str:
    """The index's kind (core/indexes.py), refusing a folder that is not a Lucene index, in one line."""
    if isinstance(index, (list, tuple)):
        raise InputError(f"engine {engine!r} searches one index; several shard indexes: engine 'sharded'")
    kind = lucene_index_kind(index)
    if kind not in (IMPACT, BM25):
        raise InputError(f"{index}: cannot tell whether it holds impacts or BM25 term frequencies (no record in "
                         f"it, and its norms and term frequencies are all 1, or it has no '{CONTENTS}' field): "
                         f"build it with `lucene index` (--impact for impacts)")
    return kind


@register("lucene", LuceneImpactEngine)
def build_lucene(index: str, min_idf: float = 0) -> LuceneImpactEngine:
    check_lucene_index(index, "lucene")
    return LuceneImpactEngine(index, min_idf)


@register("bm25", Bm25Engine)
def build_bm25(index: str, k1: float = PYSERINI_BM25[0], b: float = PYSERINI_BM25[1],
               pretokenized: bool = False) -> Bm25Engine:
    if check_lucene_index(index, "bm25") == IMPACT and not pretokenized:
        raise InputError(f"{index} is an impact index ({record_description(index)}): search it with an encoder "
                         f"(engine 'lucene'), not with BM25")
    return Bm25Engine(index, k1, b, pretokenized)


__all__ = ["LuceneImpactEngine", "Bm25Engine", "LuceneIndex", "PYSERINI_BM25"]
