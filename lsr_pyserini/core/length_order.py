"""Batching shared by every encoding loop: texts of similar length go through the model together."""
from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")


def encode_in_length_order(encode: Callable[[list[str]], list[T]], texts: list[str], batch_size: int,
                           progress=None) -> list[T]:
    """Encode texts in batches of similar length (less padding); results in the input order."""
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    results: list = [None] * len(texts)
    for start in range(0, len(order), batch_size):
        batch = order[start:start + batch_size]
        for i, vector in zip(batch, encode([texts[i] for i in batch])):
            results[i] = vector
        if progress is not None:
            progress.update(len(batch))
    return results
