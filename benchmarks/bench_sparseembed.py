"""Benchmark: SparseEmbed re-ranking against dense MaxSim (ColBERT-style) on the same candidates.

    python benchmarks/bench_sparseembed.py --store STORE --run RUN --queries Q.tsv --corpus CORPUS \\
        [--queries-limit 50] [--hits 100 1000] [--threads 1]

For the first --queries-limit queries of RUN and each --hits depth, one query at a time after a
warm-up query, on --threads torch threads:
- SparseEmbed: the `sparseembed` re-ranker exactly as `python -m lsr_pyserini.rerank` runs it
  (query forward pass, then the candidates' term embeddings read from the memory-mapped store);
- MaxSim: the same backbone's last hidden states as token embeddings (H dimensions, float16,
  contiguous with per-document offsets, memory-mapped from a scratch file like the store), score =
  sum over query tokens of the largest dot product with the document's tokens, computed with
  numpy on the same candidates (query forward pass through the backbone only).
Printed: milliseconds per query (query encoding, scoring, total) for both and the speed-up, and
bytes per document of the SparseEmbed store against float16 token embeddings of every corpus
document (tokens counted with the same tokenizer and document length).

The regression's outputs make a ready input:

    python -m lsr_pyserini.regress eval/regressions/scifact-sparseembed.yaml --work /tmp/se
    python benchmarks/bench_sparseembed.py --store /tmp/se/store --run /tmp/se/run.sparse.txt \\
        --queries ../shared/data/scifact/queries.test.tsv --corpus ../shared/data/scifact/corpus.jsonl.gz
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.readers import read_corpus, read_queries, read_run  # noqa: E402
from lsr_pyserini.rerankers import build_reranker, candidates_of  # noqa: E402


class MaxSim:
    """Token embeddings of the given documents (float16, memory-mapped) and MaxSim scoring."""

    def __init__(self, encoder, texts: dict[str, str], max_length: int, scratch: Path, batch_size: int = 16):
        import torch

        self.encoder, self.max_length = encoder, max_length
        ids = sorted(texts)
        rows, lengths = [], []
        with torch.inference_mode():
            for start in range(0, len(ids), batch_size):
                batch = [texts[d] for d in ids[start:start + batch_size]]
                for hidden, n in self.token_states(batch):
                    rows.append(hidden.astype(np.float16))
                    lengths.append(n)
        self.row = {d: i for i, d in enumerate(ids)}
        self.offsets = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64)
        matrix = np.concatenate(rows)
        path = scratch / "tokens.f16"
        matrix.tofile(path)
        self.tokens = np.memmap(path, dtype=np.float16, mode="r", shape=matrix.shape)

    def token_states(self, texts: list[str]):
        """(L x H float32 token embeddings, L) per text: the backbone's last hidden states."""
        model = self.encoder.model
        encoded = model.tokenizer(texts, padding=True, truncation=True, max_length=self.max_length,
                                  return_tensors="pt")
        states = model.mlm.base_model(**encoded).last_hidden_state
        mask = encoded["attention_mask"].bool()
        return [(states[i][mask[i]].float().numpy(), int(mask[i].sum())) for i in range(len(texts))]

    def encode_query(self, text: str) -> np.ndarray:
        import torch

        with torch.inference_mode():
            return self.token_states([text])[0][0]

    def scores(self, query: np.ndarray, docids: list[str]) -> np.ndarray:
        rows = np.fromiter((self.row[d] for d in docids), dtype=np.int64, count=len(docids))
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        lengths = ends - starts
        positions = np.arange(lengths.sum()) + np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
        similarities = self.tokens[positions].astype(np.float32) @ query.T  # tokens x query tokens
        first = np.concatenate([[0], np.cumsum(lengths)[:-1]])
        return np.maximum.reduceat(similarities, first, axis=0).sum(axis=1)


def timed(encode, score, queries: list[str], candidates: list[list[str]]):
    encode_ms, score_ms = [], []
    for position, (text, docs) in enumerate(zip(queries, candidates)):
        started = time.perf_counter()
        query = encode(text)
        encoded = time.perf_counter()
        score(query, docs)
        finished = time.perf_counter()
        if position:  # the first query warms up
            encode_ms.append(1000 * (encoded - started))
            score_ms.append(1000 * (finished - encoded))
    return statistics.mean(encode_ms), statistics.mean(score_ms)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--store", required=True, help="SparseEmbed store (encode corpus --dense-store)")
    parser.add_argument("--run", required=True, help="first-stage TREC run with >= max(--hits) candidates per query")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--corpus", required=True, help="the corpus the store was built from (for MaxSim)")
    parser.add_argument("--queries-limit", type=int, default=50, help="queries timed (default: 50)")
    parser.add_argument("--hits", type=int, nargs="+", default=[100, 1000], help="depths (default: 100 1000)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    texts = {q.id: q.text for q in read_queries(args.queries)}
    first_stage = candidates_of(read_run(args.run), max(args.hits))
    qids = [q for q in first_stage if q in texts][: args.queries_limit + 1]
    reranker = build_reranker("sparseembed", args.store, {})
    store = reranker.store
    missing = reranker.missing({d for q in qids for d, _ in first_stage[q]})
    if missing:
        sys.exit(f"error: {len(missing)} candidates are not in the store, e.g. {missing[0]!r}")
    encoder = reranker.encoder
    max_length = encoder.max_length["documents"]
    corpus = {d.id: d.text for d in read_corpus(args.corpus)}
    needed = {d for q in qids for d, _ in first_stage[q]}
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="bench-maxsim-") as scratch:
        maxsim = MaxSim(encoder, {d: corpus[d] for d in needed}, max_length, Path(scratch))
        print(f"MaxSim token embeddings of {len(needed)} candidate documents built in "
              f"{time.perf_counter() - started:.0f} s (not timed below)")
        print(f"queries timed: {len(qids) - 1}; torch threads: {args.threads}; SparseEmbed H' = {store.dim}, "
              f"MaxSim H = {maxsim.tokens.shape[1]}")
        for hits in args.hits:
            candidates = [[d for d, _ in first_stage[q]][:hits] for q in qids]
            queries = [texts[q] for q in qids]

            def encode_sparseembed(text):
                return encoder.terms_and_embeddings([text], "queries")[0]

            se = timed(encode_sparseembed, lambda q, docs: store.scores(q[1], q[2], docs), queries, candidates)
            ms = timed(maxsim.encode_query, maxsim.scores, queries, candidates)
            print(f"{hits:>5} candidates  SparseEmbed {se[0] + se[1]:7.2f} ms/query (encode {se[0]:.2f}, score "
                  f"{se[1]:.2f})   MaxSim {ms[0] + ms[1]:7.2f} ms/query (encode {ms[0]:.2f}, score {ms[1]:.2f})   "
                  f"speed-up {(ms[0] + ms[1]) / (se[0] + se[1]):.1f}x total, {ms[1] / se[1]:.1f}x scoring")
    tokenizer = encoder.model.tokenizer
    tokens = sum(len(ids) for ids in tokenizer(list(corpus.values()), truncation=True,
                                               max_length=max_length)["input_ids"])
    maxsim_bytes = tokens * maxsim.tokens.shape[1] * 2
    store_bytes = store.size_bytes()
    documents = len(store.docids)
    print(f"store size per document: SparseEmbed {store_bytes / documents:.0f} bytes "
          f"({len(store.terms) / documents:.1f} terms x ({store.terms.dtype.itemsize} id + {store.mask_bytes} mask "
          f"bytes) + {len(store.values) / documents:.1f} non-zero float16 components, offsets and ids)   "
          f"float16 token embeddings {maxsim_bytes / len(corpus):.0f} bytes "
          f"({tokens / len(corpus):.1f} tokens x {maxsim.tokens.shape[1]} x 2 bytes)   "
          f"{maxsim_bytes / len(corpus) / (store_bytes / documents):.1f}x smaller")


if __name__ == "__main__":
    main()
