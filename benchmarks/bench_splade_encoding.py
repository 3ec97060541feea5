"""Benchmark: this toolkit's SPLADE document encoder against sentence-transformers' SparseEncoder.

Both sides load the same SPLADE-tiny checkpoint (the `splade-tiny` preset's model), read the same
first N SciFact documents (title + ' ' + text), truncate to the same max length and encode in
length-sorted batches of the same size, with torch's default CPU threads. Each side encodes one
warm-up batch first, then the whole set is timed. sentence-transformers is timed on `encode()`
alone (sparse tensors out); turning its tensors into {term: weight} dicts is not timed, which
favours it, whereas our timing includes building the dicts.

Printed: documents/second for each side, the speed-up (ours / sentence-transformers) and how the
integer impacts round(weight * 100) agree, counted over every (document, term) pair that has a
non-zero impact on either side.

    python benchmarks/bench_splade_encoding.py [--docs 512] [--max-length 256] [--batch-size 32]

The corpus is read in place from ../shared/data/scifact (or $LSR_PYSERINI_DATA_ROOT/scifact).
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
from pathlib import Path

import torch

DATA_ROOT = Path(os.environ.get("LSR_PYSERINI_DATA_ROOT", Path(__file__).resolve().parents[2] / "shared" / "data"))
CORPUS = DATA_ROOT / "scifact" / "corpus.jsonl.gz"
PRESET = "splade-tiny"
IMPACT_SCALE = 100


def read_texts(path: Path, limit: int) -> list[str]:
    texts = []
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        for line in handle:
            if len(texts) == limit:
                break
            doc = json.loads(line)
            texts.append(f"{doc.get('title', '')} {doc.get('text', '')}".strip())
    return texts


def timed(encode, texts: list[str], batch_size: int):
    encode(texts[:batch_size])  # warm-up batch
    start = time.perf_counter()
    result = encode(texts)
    return result, time.perf_counter() - start


def build_ours(max_length: int):
    from lsr_pyserini.encoders import build_encoder
    from lsr_pyserini.core.presets import load_preset

    return build_encoder({**load_preset(PRESET), "doc_max_length": max_length})


def build_sentence_transformers(max_length: int):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import MLMTransformer, SpladePooling

    from lsr_pyserini.core.presets import load_preset, resolve_model

    path = resolve_model(load_preset(PRESET)["model"])
    mlm = MLMTransformer(path, max_seq_length=max_length)
    # log(1 + ReLU(logits)), padding positions zeroed before ReLU, max over positions: as ours.
    pooling = SpladePooling(pooling_strategy="max", activation_function="relu")
    return SparseEncoder(modules=[mlm, pooling], device="cpu")


def compare(ours: list[dict], theirs: list[dict]) -> tuple[int, int, int]:
    """(pairs non-zero on either side, pairs off by exactly 1, pairs off by more than 1)."""
    from lsr_pyserini.core.writer import to_impacts

    total = off_by_one = larger = 0
    for a, b in zip(ours, theirs):
        a, b = to_impacts(a, IMPACT_SCALE), to_impacts(b, IMPACT_SCALE)
        for term in a.keys() | b.keys():
            diff = abs(a.get(term, 0) - b.get(term, 0))
            total += 1
            off_by_one += diff == 1
            larger += diff > 1
    return total, off_by_one, larger


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--docs", type=int, default=512,
                        help="encode the first N documents of the SciFact corpus (default: 512)")
    parser.add_argument("--max-length", type=int, default=256,
                        help="tokens kept per document, on both sides (default: 256)")
    parser.add_argument("--batch-size", type=int, default=32,
                        help="documents per forward pass, on both sides; also the warm-up size (default: 32)")
    args = parser.parse_args()
    if not CORPUS.is_file():
        sys.exit(f"missing {CORPUS}: this benchmark needs the SciFact corpus there")

    texts = read_texts(CORPUS, args.docs)
    print(f"{len(texts)} SciFact documents, max length {args.max_length}, batch {args.batch_size}, "
          f"torch threads {torch.get_num_threads()}")

    from lsr_pyserini.core.length_order import encode_in_length_order

    ours_encoder = build_ours(args.max_length)
    ours, ours_s = timed(lambda t: encode_in_length_order(ours_encoder.encode_documents, t, args.batch_size),
                         texts, args.batch_size)

    st = build_sentence_transformers(args.max_length)
    longest = max(texts, key=len)
    assert st.preprocess([longest])["input_ids"].shape[1] <= args.max_length, "sentence-transformers did not truncate"
    sparse, st_s = timed(lambda t: st.encode(t, batch_size=args.batch_size, convert_to_sparse_tensor=True),
                         texts, args.batch_size)
    theirs = [dict(pairs) for pairs in st.decode(sparse)]

    ours_rate, st_rate = len(texts) / ours_s, len(texts) / st_s
    print(f"lsr_pyserini:          {ours_rate:8.1f} docs/s ({ours_s:.2f} s)")
    print(f"sentence-transformers: {st_rate:8.1f} docs/s ({st_s:.2f} s)")
    print(f"speed-up: {ours_rate / st_rate:.2f}x (target >= 2x)")

    total, off_by_one, larger = compare(ours, theirs)
    share = 100 * off_by_one / max(total, 1)
    print(f"compared {total} (document, term) pairs with a non-zero impact on either side; "
          f"off by more than 1: {larger} ({100 * larger / max(total, 1):.3f}%)")
    print(f"weights: off-by-one on {share:.3f}% of terms (allowed <= 0.1%), larger differences: {larger}")


if __name__ == "__main__":
    main()
