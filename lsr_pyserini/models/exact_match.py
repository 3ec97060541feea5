"""BM25 folded into a sparse encoder's impacts (`exact_match: bm25`): one index, one query, two scores.

A learned sparse model ranks below BM25 on most collections nobody labelled; the two are
complementary, and their sum ranks above either. Instead of fusing two runs, the sum is written
into the vectors themselves, under terms of their own (`EXACT_PREFIX` + a term of Lucene's default
English analyzer, Anserini's, as `lucene index` and `--bm25` use: Porter stemming, stop words
removed), so that any impact engine (Lucene, PISA, Seismic, ...) computes it in one pass:

    document: PREFIX+t -> idf(t) * tf / (tf + k1 * (1 - b + b * L(d) / avgdl))   (t in the whole text)
    query:    PREFIX+t -> exact_match_weight * (occurrences of t in the query)

so the dot product of a query's and a document's vectors is the model's own score plus
`exact_match_weight` x Lucene's BM25 (the same analyzer, idf, k1, b and lossy length: the formula is
kernels/wordpiece_bm25.py's). The corpus statistics (document count, average length, each term's
document frequency) are the corpus's own, written into the checkpoint by `python -m
lsr_pyserini.adapt` (`EXACT_STATS_FILE`); the document side reads every term of the text,
untruncated, as a BM25 index does. WordPiece tokens instead of the analyzer's terms were measured
and set aside: on CACM their BM25 is 0.4045 nDCG@10 against Lucene's 0.4521, and the sum fell below
Lucene's BM25 (docs/adapt.md).
"""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.outputs import atomic_write
from ..kernels.wordpiece_bm25 import BM25Statistics

EXACT_PREFIX = "bm25:"  # no WordPiece token holds a ':' after letters: the namespaces never meet
EXACT_STATS_FILE = "exact_match.json"
MODES = ("none", "bm25")
ANALYZER = "anserini-default-english"  # io.anserini.analysis.DefaultEnglishAnalyzer.newDefaultInstance()


def _analyze_on_jvm(texts: list[str]) -> list[list[str]]:
    from jnius import autoclass

    global _ANALYZER
    if _ANALYZER is None:
        _ANALYZER = (autoclass("io.anserini.analysis.DefaultEnglishAnalyzer").newDefaultInstance(),
                     autoclass("io.anserini.analysis.AnalyzerUtils"))
    analyzer, utils = _ANALYZER
    return [list(utils.analyze(analyzer, text).toArray()) for text in texts]


_ANALYZER = None


def analyze(texts: list[str]) -> list[list[str]]:
    """Each text's terms as Lucene's default English analyzer gives them (the JVM started first)."""
    from ..core.jvm import on_jvm_thread

    return on_jvm_thread(_analyze_on_jvm, list(texts))


class ExactMatch:
    """The BM25 side of an encoder: corpus statistics over the analyzer's terms, k1, b and the query
    side's weight."""

    def __init__(self, terms: list[str], statistics: BM25Statistics, k1: float, b: float, weight: float):
        self.terms = terms
        self.ids = {t: i for i, t in enumerate(terms)}
        self.statistics = statistics
        self.k1, self.b, self.weight = float(k1), float(b), float(weight)
        self.idf = statistics.idf()
        self.unseen_idf = float(np.log(1.0 + (statistics.doc_count + 0.5) / 0.5))  # a term no document held

    # -- statistics ---------------------------------------------------------------------------
    @classmethod
    def from_terms(cls, documents, k1: float, b: float, weight: float) -> "tuple[ExactMatch, list[np.ndarray]]":
        """Statistics of a corpus given as each document's analyzed terms (an iterable of lists);
        with each document's term ids (int32 arrays, for ranking the corpus)."""
        ids: dict[str, int] = {}
        rows = []
        for terms in documents:
            rows.append(np.asarray([ids.setdefault(t, len(ids)) for t in terms], dtype=np.int32))
        statistics = BM25Statistics.from_token_ids(rows, max(1, len(ids)))
        return cls(list(ids), statistics, k1, b, weight), rows

    def save(self, folder) -> None:
        """The statistics as `EXACT_STATS_FILE` in `folder` (written whole or not at all)."""
        record = {"analyzer": ANALYZER, "doc_count": self.statistics.doc_count, "avgdl": self.statistics.avgdl,
                  "doc_freq": dict(zip(self.terms, self.statistics.doc_freq.tolist()))}
        atomic_write(Path(folder) / EXACT_STATS_FILE, [json.dumps(record, ensure_ascii=False) + "\n"])

    @classmethod
    def load(cls, folder, k1: float, b: float, weight: float) -> "ExactMatch":
        """The statistics a checkpoint holds; InputError in one line when they are missing, unreadable
        or were counted with another analyzer."""
        path = Path(folder) / EXACT_STATS_FILE
        if not path.is_file():
            raise InputError(f"{folder}: exact_match bm25 needs the corpus statistics {EXACT_STATS_FILE} in the "
                             f"model folder (`python -m lsr_pyserini.adapt` writes them)")
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
            doc_count, avgdl, table = int(record["doc_count"]), float(record["avgdl"]), dict(record["doc_freq"])
        except (OSError, ValueError, KeyError, TypeError) as err:
            raise InputError(f"{path}: unreadable corpus statistics ({err})") from None
        if record.get("analyzer") != ANALYZER:
            raise InputError(f"{path}: counted with analyzer {record.get('analyzer')!r}, not {ANALYZER!r}")
        doc_freq = np.asarray(list(table.values()), dtype=np.int64)
        return cls(list(table), BM25Statistics(doc_count, doc_freq, avgdl), k1, b, weight)

    # -- vectors ------------------------------------------------------------------------------
    def document_weights(self, terms: list[str]) -> dict[str, float]:
        """{term: BM25 weight} of one document's analyzed terms (Lucene's formula and lossy length)."""
        if not terms:
            return {}
        counts = Counter(terms)
        norm = self.statistics.length_norm(len(terms), self.k1, self.b)
        weights = {}
        for term, tf in counts.items():
            i = self.ids.get(term)
            idf = self.idf[i] if i is not None else self.unseen_idf
            weight = float(idf * tf / (tf + norm))
            if weight > 0:
                weights[term] = weight
        return weights

    def id_weights(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """(term ids, BM25 weights) of one document given as term ids of the statistics (`from_terms`)."""
        tokens, tf_part = self.statistics.tf_part(ids, self.k1, self.b)
        return tokens, self.idf[tokens] * tf_part

    def documents(self, texts: list[str]) -> list[dict[str, float]]:
        return [{EXACT_PREFIX + t: w for t, w in self.document_weights(terms).items()} for terms in analyze(texts)]

    def queries(self, texts: list[str]) -> list[dict[str, float]]:
        if self.weight == 0:
            return [{} for _ in texts]
        return [{EXACT_PREFIX + t: self.weight * n for t, n in Counter(terms).items()} for terms in analyze(texts)]

    def scores(self, queries: list[str], documents: list[str]):
        """queries x documents BM25 scores (float32 torch tensor, without the weight)."""
        import torch

        out = torch.zeros(len(queries), len(documents))
        doc_rows = [self.document_weights(terms) for terms in analyze(documents)]
        for qi, terms in enumerate(analyze(queries)):
            counts = Counter(terms)
            for di, weights in enumerate(doc_rows):
                out[qi, di] = sum(n * weights.get(t, 0.0) for t, n in counts.items())
        return out


def merge(neural: list[dict[str, float]], exact: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each text's neural vector with its exact-match terms added (their namespaces are disjoint)."""
    return [{**a, **b} for a, b in zip(neural, exact)]
