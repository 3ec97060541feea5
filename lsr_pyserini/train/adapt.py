"""Adapt a SPLADE checkpoint to a corpus from its text alone: no queries, no judgements.

Three steps, each a pure function of the corpus, the base and the seed:

1. **Corpus statistics** for the exact-match side (models/exact_match.py): the corpus's own document
   frequencies and average length over the terms of Lucene's English analyzer, so that the adapted model's
   impacts carry BM25 beside the neural weights: one index, one query, the sum of both scores.
2. **Pseudo-queries** from the corpus itself: a passage's title where it reads as a heading (two
   words or more with letters, not the passage's whole text), else a span of 4 to 12 words of its
   text; each with its own passage as the positive and hard negatives from the exact-match side's
   BM25 ranking of the whole corpus (its top `NEGATIVE_DEPTH`, passages sharing the positive's title
   or holding the query's words left out: they may be relevant too; random passages for a query
   that BM25 finds nothing else for).
3. **Training the neural side inside the sum**: the contrastive loss (in-batch and hard negatives)
   is computed on `exact_match_weight` x BM25 + the model's score, so the model learns what BM25
   misses rather than what it already finds; FLOPS regularisers keep the impacts sparse.

The training loop is the toolkit's one loop (train/loop.py): progress bar, checkpoints, exact
resumption after a kill, the same model for the same seed and thread count.
"""
from __future__ import annotations

import random
import re
import time
from dataclasses import dataclass

import numpy as np
import torch

from ..core.errors import InputError
from ..core.readers import read_corpus
from ..models.base import Batch
from ..models.exact_match import ExactMatch, analyze
from .data import draw_negatives, shuffled_batches

NEGATIVE_DEPTH = 30  # hard negatives drawn from the BM25 top 30 of the corpus (the positive excluded)
SPAN_WORDS = (4, 12)
MAX_TITLE_SHARE = 3
WORD = re.compile(r"[^\W\d_]{2,}")


@dataclass
class PseudoQuery:
    text: str
    positive: int  # index of its passage
    kind: str  # "title" or "span"
    rest: str  # the passage without the query's words: the positive the model trains on


def heading(title: str, text: str, shared: int) -> bool:
    """A title that reads as a query: two or more words with letters, the title of at most
    `MAX_TITLE_SHARE` passages (not a manual's name), and not the passage's whole text."""
    return len(WORD.findall(title)) >= 2 and shared <= MAX_TITLE_SHARE and len(text) > len(title) + 20


def pseudo_queries(titles: list[str], bodies: list[str], count: int, seed: int) -> list[PseudoQuery]:
    """`count` pseudo-queries from passages drawn with the seeded generator (each passage once), in
    the inverse cloze task's way: the query is cut out of its passage (a heading-like title, else a
    span of its text), and the rest of the passage is the positive, so that the query's own words
    are not what finds it."""
    from collections import Counter

    shared = Counter(titles)
    rng = random.Random(seed)
    order = list(range(len(bodies)))
    rng.shuffle(order)
    queries = []
    for index in order:
        if len(queries) == count:
            break
        title, body = titles[index], bodies[index]
        if title and heading(title, body, shared[title]):
            queries.append(PseudoQuery(title, index, "title", body))
            continue
        words = body.split()
        if len(words) < SPAN_WORDS[0] + 8:
            continue
        length = rng.randint(SPAN_WORDS[0], min(SPAN_WORDS[1], len(words) - 8))
        start = rng.randint(0, len(words) - length)
        rest = " ".join(([title] if title else []) + words[:start] + words[start + length:])
        queries.append(PseudoQuery(" ".join(words[start:start + length]), index, "span", rest))
    return queries


class ExactIndex:
    """The exact-match side's BM25 weights of every passage as a sparse matrix (terms x passages),
    to rank the corpus for a pseudo-query."""

    def __init__(self, exact: ExactMatch, term_ids: list[np.ndarray]):
        from scipy import sparse

        rows, cols, values = [], [], []
        for doc, ids in enumerate(term_ids):
            tokens, weights = exact.id_weights(ids)
            rows.append(tokens)
            cols.append(np.full(len(tokens), doc))
            values.append(weights)
        self.matrix = sparse.csr_matrix((np.concatenate(values).astype(np.float32),
                                         (np.concatenate(rows), np.concatenate(cols))),
                                        shape=(len(exact.idf), len(term_ids)))

    def top(self, ids: list[int], k: int) -> list[int]:
        if not ids:
            return []
        tokens, counts = np.unique(np.asarray(ids, dtype=np.int64), return_counts=True)
        scores = np.asarray(self.matrix[tokens].T @ counts.astype(np.float32)).ravel()
        k = min(k, len(scores))
        best = np.argpartition(-scores, k - 1)[:k]
        best = best[np.lexsort((best, -scores[best]))]  # score, then passage order: ties broken the same way
        return [int(d) for d in best if scores[d] > 0]


class AdaptData:
    """Pseudo-queries with their passages and hard negatives, in the shape train/loop.py reads
    (`len`, `epoch_batches`)."""

    def __init__(self, queries: list[PseudoQuery], texts: list[str], negatives: list[list[int]]):
        keep = [i for i, pool in enumerate(negatives) if pool]
        self.queries = [queries[i] for i in keep]
        self.negatives = [negatives[i] for i in keep]
        self.texts = texts

    def __len__(self) -> int:
        return len(self.queries)

    def epoch_batches(self, epoch: int, seed: int, batch_size: int, group_size: int) -> list[Batch]:
        rng, chunks = shuffled_batches(range(len(self.queries)), seed, epoch, batch_size)
        batches = []
        for chosen in chunks:
            docs = []
            for i in chosen:
                docs += [self.queries[i].positive] + draw_negatives(rng, self.negatives[i], group_size - 1)
            texts = [self.queries[chosen[i // group_size]].rest if i % group_size == 0 else self.texts[d]
                     for i, d in enumerate(docs)]
            batches.append(Batch([self.queries[i].text for i in chosen], texts, group_size,
                                 None, [str(i) for i in chosen], [str(d) for d in docs]))
        return batches


def mine_negatives(exact: ExactMatch, index: ExactIndex, queries: list[PseudoQuery], titles: list[str],
                   texts: list[str], seed: int, progress=None) -> list[list[int]]:
    """Each pseudo-query's hard negatives: its BM25 top `NEGATIVE_DEPTH` without its passage, the
    passages sharing its passage's title and those holding the query's words verbatim; `NEGATIVE_DEPTH`
    passages drawn at random (seeded) where BM25 leaves none."""
    rng = random.Random(seed + 1)
    pools = []
    for query, terms in zip(queries, analyze([q.text for q in queries])):
        ids = [exact.ids[t] for t in terms if t in exact.ids]
        own_title = titles[query.positive]
        pool = [d for d in index.top(ids, NEGATIVE_DEPTH + 1) if d != query.positive
                and not (own_title and titles[d] == own_title) and query.text not in texts[d]][:NEGATIVE_DEPTH]
        if not pool:
            others = [d for d in rng.sample(range(len(texts)), min(len(texts), NEGATIVE_DEPTH + 1))
                      if d != query.positive]
            pool = others[:NEGATIVE_DEPTH]
        pools.append(pool)
        if progress is not None:
            progress.update(1)
    return pools


class FusedSplade(torch.nn.Module):
    """A SPLADE family module whose contrastive loss sees exact_match_weight x BM25 + the model's score."""

    device_ready = True

    def __init__(self, family, exact: ExactMatch):
        super().__init__()
        self.family = family  # the SPLADE training module (models/splade/training.py): its weights are trained
        self.exact = exact

    def loss(self, batch: Batch, step: int):
        bm25 = self.exact.scores(batch.queries, batch.documents)
        return self.family.loss(batch, step, extra=self.exact.weight * bm25)

    def parameter_groups(self, lr: float) -> list[dict]:
        return self.family.parameter_groups(lr)

    def save(self, folder) -> None:
        self.family.save(folder)
        self.exact.save(folder)


def read_passages(corpus: str, progress=None) -> tuple[list[str], list[str], list[str]]:
    """(texts as encoded, titles, bodies) of a corpus."""
    texts, titles, bodies = [], [], []
    for doc in read_corpus(corpus):
        texts.append(doc.text)
        titles.append(doc.title)
        bodies.append(doc.text[len(doc.title):].strip() if doc.title and doc.text.startswith(doc.title) else doc.text)
        if progress is not None:
            progress.update(1)
    if not texts:
        raise InputError(f"{corpus}: no document")
    return texts, titles, bodies


def step_seconds(family, batch: Batch) -> float:
    """Seconds of one training step, estimated from a forward pass without gradients, drawing no random
    number: twice that pass (on SciFact, 400 steps of SPLADE-tiny took 1,312 s where three times the
    pass predicted 38 min: the backward pass costs about as much as the forward one here)."""
    splade = family.splade
    was_training = family.training
    family.eval()
    started = time.perf_counter()
    with torch.no_grad():
        splade.represent(batch.queries, "queries")
        splade.represent(batch.documents, "documents")
    family.train(was_training)
    return 2.0 * (time.perf_counter() - started)


def analyzed(texts: list[str], progress=None, batch: int = 1024):
    """Each passage's analyzed terms (Lucene's default English analyzer), in order, batch by batch."""
    for start in range(0, len(texts), batch):
        yield from analyze(texts[start:start + batch])
        if progress is not None:
            progress.update(min(batch, len(texts) - start))


def adapt(args, say=None) -> dict:
    """Adapt `args.base` to `args.corpus` into `args.output` (the `adapt` command's flags); a summary.
    `say`: where the estimate of the training's time goes before it starts (a command's stderr)."""
    import math
    from types import SimpleNamespace

    from tqdm import tqdm

    from ..models.registry import load_families, schema_of
    from ..models.resolve import base_settings, family_of
    from ..models.shared_settings import FLOPS_WARMUP
    from ..models.splade.training import SpladeFamily
    from .loop import claim_training_output, seed_everything, train

    claim_training_output(args.output, args.overwrite)  # refused before anything is read
    load_families()
    if family_of(args.base) != "splade":
        raise InputError(f"--base {args.base}: adapt starts from a SPLADE preset or checkpoint, not a "
                         f"{family_of(args.base)!r} one")
    started = time.time()
    quiet = args.quiet
    config = base_settings("splade", args.base)
    config.update(exact_match="bm25", exact_match_weight=args.exact_match_weight, query_mode=args.query_mode)
    config = {"model": config["model"], **schema_of("splade").checked(
        {k: v for k, v in config.items() if k not in ("model", "family", "name")}, "adapted model")}
    seed_everything(args.seed)
    with tqdm(desc="reading passages", unit="passage", disable=quiet, dynamic_ncols=True) as bar:
        texts, titles, bodies = read_passages(args.corpus, bar)
    initial = None
    if args.query_mode == "tokenizer":  # inference-free queries: the table starts from the corpus's IDF
        from ..core.hf import load_tokenizer
        from ..core.presets import resolve_model
        from ..kernels.wordpiece_bm25 import corpus_idf

        with tqdm(total=len(texts), desc="token IDF", unit="passage", disable=quiet, dynamic_ncols=True) as bar:
            initial = corpus_idf(load_tokenizer(resolve_model(config["model"])), texts, progress=bar)
    family = SpladeFamily(config["model"], SimpleNamespace(model_config=config, lambda_d=args.lambda_d,
                                                           lambda_q=args.lambda_q,
                                                           flops_warmup_steps=FLOPS_WARMUP.default,
                                                           margin_mse_weight=0.0,
                                                           query_weights_lr=args.query_weights_lr),
                          initial_query_weights=initial)
    config.update(family.decided_settings())  # the checkpoint's config names the learned table
    with tqdm(total=len(texts), desc="corpus statistics", unit="passage", disable=quiet, dynamic_ncols=True) as bar:
        exact, ids = ExactMatch.from_terms(analyzed(texts, bar), config["k1"], config["b"], args.exact_match_weight)
    queries = pseudo_queries(titles, bodies, args.pseudo_queries, args.seed) if args.steps else []
    negatives = []
    if queries:
        index = ExactIndex(exact, ids)
        with tqdm(total=len(queries), desc="hard negatives", unit="query", disable=quiet, dynamic_ncols=True) as bar:
            negatives = mine_negatives(exact, index, queries, titles, texts, args.seed, bar)
        del index
    del ids
    data = AdaptData(queries, texts, negatives)
    if args.steps and len(data) < args.batch_size:
        raise InputError(f"{args.corpus}: {len(data)} pseudo-queries with hard negatives are fewer than one batch "
                         f"of {args.batch_size}: the corpus is too small to train on (--steps 0 adds its statistics "
                         f"only)")
    model = FusedSplade(family, exact)
    encoding_length = family.splade.max_length["documents"]
    family.splade.max_length["documents"] = min(args.doc_max_length, encoding_length)
    steps_per_epoch = max(1, len(data) // args.batch_size)
    epochs = max(1, math.ceil(args.steps / steps_per_epoch))
    if args.steps and say is not None:
        first = data.epoch_batches(0, args.seed, args.batch_size, args.group_size)[0]
        estimate = step_seconds(family, first) * args.steps
        kinds = sum(q.kind == "title" for q in data.queries)
        say(f"{len(texts)} passages, {len(data)} pseudo-queries ({kinds} titles, {len(data) - kinds} spans); "
            f"training {args.steps} steps: about {max(1, round(estimate / 60))} min on this CPU")
    settings = {k: v for k, v in vars(args).items() if k not in ("quiet", "save_every", "threads", "overwrite")}
    summary = train(model, data, args.output, settings, epochs=epochs, batch_size=args.batch_size,
                    group_size=args.group_size, lr=args.lr, seed=args.seed, warmup_ratio=0.1,
                    max_steps=args.steps, save_every=args.save_every, quiet=quiet, overwrite=args.overwrite,
                    label="adapting", config=("splade", config))
    family.splade.max_length["documents"] = encoding_length  # the checkpoint's config kept the base's
    return {"passages": len(texts), "pseudo_queries": len(data), "steps": summary["steps"],
            "seconds": round(time.time() - started, 1)}
