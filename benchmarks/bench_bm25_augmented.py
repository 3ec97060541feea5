"""Benchmark: latency that learned BM25 query augmentation adds per query, against plain BM25.

    python benchmarks/bench_bm25_augmented.py --model MODEL --index INDEX --queries Q.tsv [--queries-limit 100] [--hits 1000]

In one run, one query at a time (the latency a search service sees), on the same WordPiece BM25
index (`python -m lsr_pyserini.bm25aug index`) with Lucene BM25 (k1=0.9, b=0.4):
- plain: the query's WordPiece tokens searched as they are;
- augmented: the model rewrites the query (encoder forward pass, boosts quantised as the
  `bm25aug queries` command does) and Lucene searches the longer, boosted query.
Printed: milliseconds per query for each part, the added latency (encoder + longer query) and the
ratio to plain BM25, and the average number of augmented tokens (distinct tokens of the generated
query that are not in the original query). Both searches are warmed up on the first query.

A trained model and its index from the regression make a ready input:

    python -m lsr_pyserini.regress eval/regressions/scifact-bm25-augmented.yaml --work /tmp/bm25aug
    python benchmarks/bench_bm25_augmented.py --model /tmp/bm25aug/model --index /tmp/bm25aug/index.wp \\
        --queries ../shared/data/scifact/queries.test.tsv
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from lsr_pyserini.core.presets import model_path  # noqa: E402
from lsr_pyserini.core.readers import read_queries  # noqa: E402
from lsr_pyserini.models.bm25aug.model import BM25AugEncoder, QueryAugmenter  # noqa: E402
from lsr_pyserini.kernels.wordpiece_bm25 import check_index_tokenizer, pretokenize  # noqa: E402
from lsr_pyserini.core.writer import to_impacts, query_line  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", required=True, help="a `train bm25aug` output folder")
    parser.add_argument("--index", required=True, help="WordPiece BM25 index (bm25aug index)")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--queries-limit", type=int, default=100, help="queries timed (default: 100)")
    parser.add_argument("--hits", type=int, default=1000, help="hits retrieved per query (default: 1000)")
    parser.add_argument("--boost-scale", type=float, default=100, help="as `bm25aug queries` (default: 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    from lsr_pyserini.core.jvm import start_jvm

    start_jvm()
    from pyserini.analysis import JWhiteSpaceAnalyzer
    from pyserini.search.lucene import LuceneSearcher

    model = QueryAugmenter.load(model_path(args.model))
    check_index_tokenizer(args.index, model.tokenizer, args.model)
    encoder = BM25AugEncoder(model, min_weight=0.5 / args.boost_scale)
    searcher = LuceneSearcher(args.index)
    searcher.set_analyzer(JWhiteSpaceAnalyzer())
    searcher.set_bm25(0.9, 0.4)
    queries = list(read_queries(args.queries))[: args.queries_limit + 1]

    plain_ms, encode_ms, search_ms, augmented = [], [], [], []
    for position, query in enumerate(queries):
        tokens = pretokenize(model.tokenizer, [query.text])[0]
        started = time.perf_counter()
        searcher.search(" ".join(tokens), k=args.hits)
        plain_done = time.perf_counter()
        with torch.inference_mode():
            vector = encoder.encode_queries([query.text])[0]
        text = query_line(query.id, to_impacts(vector, args.boost_scale)).split("\t", 1)[1].strip()
        encoded = time.perf_counter()
        searcher.search(text, k=args.hits)
        finished = time.perf_counter()
        if position == 0:
            continue  # warm-up
        plain_ms.append(1000 * (plain_done - started))
        encode_ms.append(1000 * (encoded - plain_done))
        search_ms.append(1000 * (finished - encoded))
        augmented.append(len(set(text.split()) - set(tokens)))

    plain = statistics.mean(plain_ms)
    added = statistics.mean(encode_ms) + statistics.mean(search_ms) - plain
    print(f"queries timed            {len(plain_ms)} (hits {args.hits}; torch threads {args.threads})")
    print(f"plain WordPiece BM25     {plain:.2f} ms/query (median {statistics.median(plain_ms):.2f})")
    print(f"query encoder            {statistics.mean(encode_ms):.2f} ms/query (median {statistics.median(encode_ms):.2f})")
    print(f"augmented query search   {statistics.mean(search_ms):.2f} ms/query (median {statistics.median(search_ms):.2f})")
    print(f"added latency            {added:.2f} ms/query ({(plain + added) / plain:.2f}x plain BM25)")
    print(f"augmented tokens         {statistics.mean(augmented):.1f} per query (distinct, not in the query)")


if __name__ == "__main__":
    main()
