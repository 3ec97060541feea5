"""Benchmark SSR against the dense late interaction it approximates, on the same candidates.

    python benchmarks/bench_ssr.py --codes CODES --tokens TOKENS --run RUN --queries Q.tsv \
        [--index LUCENE_INDEX] [--model SSR_MODEL] [--hits 1000] [--queries-limit 100] [--threads 1]

For the first --queries-limit queries of RUN (top --hits candidates each), after one warm-up
query, one query at a time, on --threads torch threads (default 1), prints:
- re-ranking time per query of SSR-tok (codes from the code store) and of dense MaxSim (float16
  token embeddings from the token store, converted per query; and again with all embeddings held
  as float32 in RAM), query encoding excluded (both run the same backbone over the query; SSR
  also runs its SAE), and the ratios MaxSim / SSR-tok (> 1: SSR is faster);
- the code store's and the Lucene index's sizes against the float16 token embeddings (ratio
  embeddings / SSR: the target is >= 4);
- the SAE training time recorded by `ssr fit` in the model folder (default: the code store's model).

The SciFact regression leaves every input in its work folder:

    python -m lsr_pyserini.regress eval/regressions/scifact-ssr.yaml --work /tmp/ssr
    python benchmarks/bench_ssr.py --codes /tmp/ssr/codes --tokens /tmp/ssr/tokens --run /tmp/ssr/run.ssr.txt \\
        --queries ../shared/data/scifact/queries.test.tsv --index /tmp/ssr/index.ssr
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np  # noqa: E402

from lsr_pyserini.core.readers import read_queries, read_run  # noqa: E402
from lsr_pyserini.commands.rerank import candidates_of  # noqa: E402
from lsr_pyserini.rerankers import build_reranker  # noqa: E402


def folder_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def time_scoring(reranker, qids, texts, first_stage) -> list[float]:
    """Milliseconds per query for scoring its candidates (queries encoded beforehand)."""
    encoded = reranker.encode_queries([texts[q] for q in qids])
    times = []
    for position, (qid, query) in enumerate(zip(qids, encoded)):
        docs = [d for d, _ in first_stage[qid]]
        started = time.perf_counter()
        reranker.score_encoded(query, docs)
        if position:  # the first query warms up (pages the memory-mapped store in)
            times.append(1000 * (time.perf_counter() - started))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--codes", required=True, help="SSR code store (ssr index)")
    parser.add_argument("--tokens", required=True, help="token store of the same corpus (ssr embed)")
    parser.add_argument("--run", required=True, help="first-stage TREC run")
    parser.add_argument("--queries", required=True, help="qid<TAB>text TSV")
    parser.add_argument("--index", help="Lucene index of the pseudo-terms, for its size (default: not reported)")
    parser.add_argument("--model", help="SSR model folder for the training time (default: the code store's)")
    parser.add_argument("--hits", type=int, default=1000, help="candidates per query (default: 1000)")
    parser.add_argument("--queries-limit", type=int, default=100, help="queries timed (default: 100)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    args = parser.parse_args()
    import torch

    torch.set_num_threads(args.threads)
    texts = {q.id: q.text for q in read_queries(args.queries)}
    first_stage = candidates_of(read_run(args.run), args.hits)
    qids = [q for q in first_stage if q in texts][: args.queries_limit + 1]
    ssr = build_reranker("ssr", args.codes, {"cls_weight": 0.0})
    maxsim = build_reranker("maxsim", args.tokens, {})
    for reranker in (ssr, maxsim):
        missing = reranker.missing({d for q in qids for d, _ in first_stage[q]})
        if missing:
            sys.exit(f"error: {len(missing)} candidates are not in {reranker.store.path}, e.g. {missing[0]!r}")
    ssr_ms = time_scoring(ssr, qids, texts, first_stage)
    maxsim_ms = time_scoring(maxsim, qids, texts, first_stage)
    # the same MaxSim with every embedding already float32 in memory (4x the float16 store in RAM)
    float16_tokens = maxsim.store.arrays["tokens"]
    maxsim.store.arrays["tokens"] = np.asarray(float16_tokens, dtype=np.float32)
    maxsim32_ms = time_scoring(maxsim, qids, texts, first_stage)
    maxsim.store.arrays["tokens"] = float16_tokens
    candidates = statistics.mean(len(first_stage[q]) for q in qids[1:])

    tokens = maxsim.store
    embeddings = tokens.arrays["tokens"]
    embedding_bytes = embeddings.size * 2  # float16
    code_bytes = folder_bytes(Path(args.codes))
    print(f"queries timed        {len(ssr_ms)} ({candidates:.0f} candidates each, {args.threads} torch thread(s))")
    print(f"SSR-tok re-ranking   {statistics.mean(ssr_ms):.1f} ms/query (median {statistics.median(ssr_ms):.1f})")
    print(f"dense MaxSim         {statistics.mean(maxsim_ms):.1f} ms/query (median {statistics.median(maxsim_ms):.1f})")
    print(f"dense MaxSim, fp32   {statistics.mean(maxsim32_ms):.1f} ms/query (median "
          f"{statistics.median(maxsim32_ms):.1f}; embeddings pre-converted to float32 in RAM)")
    print(f"speed-up             {statistics.mean(maxsim_ms) / statistics.mean(ssr_ms):.2f}x against the float16 store, "
          f"{statistics.mean(maxsim32_ms) / statistics.mean(ssr_ms):.2f}x against float32 in RAM (MaxSim / SSR-tok time)")
    print(f"token embeddings     {embedding_bytes / 2**20:.1f} MiB float16 ({embeddings.shape[0]} tokens x "
          f"{embeddings.shape[1]} dimensions)")
    print(f"code store           {code_bytes / 2**20:.1f} MiB ({embedding_bytes / code_bytes:.2f}x smaller; "
          f"K={ssr.coder.model.token_sae.k} codes per token)")
    if args.index:
        index_bytes = folder_bytes(Path(args.index))
        print(f"Lucene index         {index_bytes / 2**20:.1f} MiB ({embedding_bytes / index_bytes:.2f}x smaller)")
        print(f"index + code store   {(index_bytes + code_bytes) / 2**20:.1f} MiB "
              f"({embedding_bytes / (index_bytes + code_bytes):.2f}x smaller)")
    model_dir = Path(args.model or ssr.store.manifest["model"])
    training = json.loads((model_dir / "ssr_config.json").read_text()).get("training", {})
    for name in ("token_sae", "cls_sae"):
        log = training.get(name)
        if log:
            print(f"{name + ' training':<21}{log['seconds']:.0f} s ({log['steps']} steps x {log['batch_size']} vectors, "
                  f"normalised MSE {log['final_nmse']}, {log['dead_latents']} dead latents)")


if __name__ == "__main__":
    main()
