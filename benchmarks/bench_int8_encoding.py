"""Benchmark: SPLADE document encoding in float32 against `--quantize int8`, in one process.

Both encoders load the `splade-tiny` preset's checkpoint; the first N SciFact documents are cut
into length-sorted batches and each batch is encoded by one encoder then the other, alternating
which goes first, so that both see the same load on a shared machine. Printed: load time and
documents/second (wall and CPU time) for each, the ratio, and how many (document, term) integer
impacts round(weight x 100) are equal, over the union of both sides' non-zero terms.

    python benchmarks/bench_int8_encoding.py [--docs 256] [--max-length 256] [--batch-size 32] [--threads 1]

The whole-process figure (`time python -m lsr_pyserini.encode corpus ... --quantize int8`) is in
docs/quantization.md. The corpus is read from ../shared/data/scifact (or $LSR_PYSERINI_DATA_ROOT).
"""
from __future__ import annotations

import argparse
import itertools
import os
import time
from pathlib import Path

import torch

DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", Path(__file__).resolve().parents[2] / "shared" / "data"))
CORPUS = DATA_ROOT / "scifact" / "corpus.jsonl.gz"


def read_texts(limit: int) -> list[str]:
    """The first `limit` documents' texts, read as `encode corpus` reads them."""
    from lsr_pyserini.core.readers import read_corpus

    return [doc.text for doc in itertools.islice(read_corpus(str(CORPUS)), limit)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=256)
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    from lsr_pyserini.core.presets import load_preset
    from lsr_pyserini.core.writer import to_impacts
    from lsr_pyserini.encoders import build_encoder

    encoders, load = {}, {}
    for mode in ("none", "int8"):
        start = time.perf_counter()
        encoders[mode] = build_encoder({**load_preset("splade-tiny"), "doc_max_length": args.max_length,
                                        "quantize": mode})
        load[mode] = time.perf_counter() - start
    texts = sorted(read_texts(args.docs), key=len)
    batches = [texts[i:i + args.batch_size] for i in range(0, len(texts), args.batch_size)]
    for encoder in encoders.values():
        encoder.encode_documents(batches[0])  # warm-up
    wall = {mode: 0.0 for mode in encoders}
    cpu = dict(wall)
    vectors = {mode: [] for mode in encoders}
    for i, batch in enumerate(batches):
        for mode in (("none", "int8") if i % 2 == 0 else ("int8", "none")):
            w, c = time.perf_counter(), time.process_time()
            vectors[mode].extend(encoders[mode].encode_documents(batch))
            wall[mode] += time.perf_counter() - w
            cpu[mode] += time.process_time() - c
    pairs = equal = 0
    for a, b in zip(vectors["none"], vectors["int8"]):
        a, b = to_impacts(a, 100), to_impacts(b, 100)
        pairs += len(a.keys() | b.keys())
        equal += sum(a.get(t) == b.get(t) for t in a.keys() | b.keys())
    for mode in encoders:
        print(f"{mode:5s} load {load[mode]:.2f} s  {len(texts) / wall[mode]:.1f} docs/s wall  "
              f"{len(texts) / cpu[mode]:.1f} docs/CPU-s")
    print(f"int8 / float32: {wall['none'] / wall['int8']:.2f}x wall, {cpu['none'] / cpu['int8']:.2f}x CPU; "
          f"equal impacts {equal}/{pairs} = {equal / max(pairs, 1):.4f}; "
          f"backend {encoders['int8'].describe().get('quantize_backend')}")


if __name__ == "__main__":
    main()
