"""The training data path every family shares: queries, qrels, corpus, hard negatives, teacher.

Hard negatives are the top documents of a Lucene run (BM25 by default, produced by the toolkit's
own `prepare` / `lucene index` / `lucene search` steps) that are not judged relevant. Each epoch
every training query yields one group: a positive and `group_size - 1` negatives, sampled with the
seeded generator so a run is reproducible and resumable.
"""
from __future__ import annotations

import logging
import random
from contextlib import closing
from pathlib import Path

from ..core.readers import (
    InputError,
    check_unique,
    parse_number,
    read_corpus,
    read_qrels_rows,
    read_queries,
    read_rows,
    read_run,
    text_lines,
)
from ..models.base import Batch  # noqa: F401  (the batches this path makes)

log = logging.getLogger(__name__)


def read_teacher(path: str) -> dict[str, dict[str, float]]:
    """Teacher scores as {qid: {docid: score}}, from ``qid docid score`` lines or from a TREC run
    (``qid Q0 docid rank score tag``: e.g. a re-ranked, fused run of the training queries).
    Scores must be finite and a (query, document) pair may appear once."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    with closing(text_lines(Path(path))) as lines:
        width = next((len(line.split()) for _, line in lines if line.strip()), 3)
    if width == 6:
        return {qid: dict(ranking) for qid, ranking in read_run(path).items()}
    scores: dict[str, dict[str, float]] = {}
    seen: dict[tuple[str, str], int] = {}
    for line_no, (qid, docid, score) in read_rows(path, "qid docid score"):
        check_unique(seen, (qid, docid), line_no, f"{path}:{line_no}",
                     f"document {docid!r} has two scores for query {qid!r}")
        scores.setdefault(qid, {})[docid] = parse_number(path, line_no, "score", score)
    return scores


def shuffled_batches(keys: list, seed: int, epoch: int, batch_size: int) -> tuple[random.Random, list[list]]:
    """The epoch's generator and its batches of `keys` (shuffled, the last partial batch left out): a pure
    function of (seed, epoch), so that resuming replays the same order."""
    rng = random.Random(seed * 1_000_003 + epoch)
    order = list(keys)
    rng.shuffle(order)
    return rng, [order[start:start + batch_size] for start in range(0, len(order) - batch_size + 1, batch_size)]


def draw_negatives(rng: random.Random, pool: list, count: int) -> list:
    """`count` hard negatives from `pool`: without repetition where it holds enough, else with."""
    return rng.sample(pool, count) if len(pool) >= count else [rng.choice(pool) for _ in range(count)]


class TrainingData:
    """Validated training triples: every qrels line of a training query must name a document of the
    corpus; lines of other queries are left out, so a sample of the queries trains with the full qrels."""

    def __init__(self, queries: str, qrels: str, corpus: str, negatives: str, depth: int = 100,
                 teacher: str | None = None, teacher_scale: float = 1.0):
        self.queries = {q.id: q.text for q in read_queries(queries)}
        self.corpus = {d.id: d.text for d in read_corpus(corpus)}
        self.positives: dict[str, list[str]] = {}
        other_queries = 0
        for line_no, qid, docid, relevance in read_qrels_rows(qrels):
            if qid not in self.queries:  # training on a sample of the queries, with the full qrels file
                other_queries += 1
                continue
            if docid not in self.corpus:
                raise InputError(f"{qrels}:{line_no}: document {docid!r} is not in the corpus {corpus}")
            if relevance > 0:
                self.positives.setdefault(qid, []).append(docid)
        if not self.positives:
            raise InputError(f"{qrels}: no relevant (relevance > 0) pair for any query of {queries}")
        if other_queries:
            log.warning(f"{qrels}: {other_queries} lines name queries that are not in {queries}; they are left out")
        run = read_run(negatives)
        self.negatives: dict[str, list[str]] = {}
        for qid, positives in self.positives.items():
            pool = [d for d, _ in run.get(qid, [])[:depth] if d not in positives and d in self.corpus]
            if pool:
                self.negatives[qid] = pool
        missing = len(self.positives) - len(self.negatives)
        if not self.negatives:
            raise InputError(f"{negatives}: empty negatives pool: the run has no non-relevant document "
                             f"for any training query (is it a run of {queries}?)")
        if missing:
            log.warning(f"{missing} of {len(self.positives)} training queries have no hard negative in {negatives}; "
                        f"they are left out")
        self.query_ids = sorted(self.negatives)
        self.teacher = None
        if teacher:
            self.teacher = {q: {d: s * teacher_scale for d, s in scores.items()}
                            for q, scores in read_teacher(teacher).items()}
            missing = sum(d not in self.teacher.get(q, {}) for q, docs in self.positives.items() for d in docs)
            if missing:
                log.warning(f"{teacher}: {missing} relevant pairs have no teacher score; they count as 0")

    def __len__(self) -> int:
        return len(self.query_ids)

    def epoch_batches(self, epoch: int, seed: int, batch_size: int, group_size: int) -> list[Batch]:
        """The epoch's batches, a pure function of (seed, epoch): resuming replays the same order."""
        rng, chunks = shuffled_batches(self.query_ids, seed, epoch, batch_size)
        batches = []
        for qids in chunks:
            docids = []
            for qid in qids:
                negatives = draw_negatives(rng, self.negatives[qid], group_size - 1)
                docids += [rng.choice(self.positives[qid])] + negatives
            teacher = None
            if self.teacher is not None:
                teacher = [[self.teacher.get(q, {}).get(d, 0.0) for d in docids[i * group_size:(i + 1) * group_size]]
                           for i, q in enumerate(qids)]
            batches.append(Batch([self.queries[q] for q in qids], [self.corpus[d] for d in docids],
                                 group_size, teacher, qids, docids))
        return batches
