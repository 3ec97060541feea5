"""Training: one data path and one loop shared by every model family.

`python -m lsr_pyserini.train FAMILY ...` (see `__main__.py`). A family is a torch module with
`loss(batch, step) -> (loss, {name: value})` and `save(folder)`, registered in `FAMILIES`.
"""
from __future__ import annotations

from typing import Callable

FAMILIES: dict[str, Callable] = {}


def register(family: str, add_arguments: Callable, default_base: str = "splade-tiny", reads_teacher: bool = False):
    """Register a family's builder with its command-line options, the checkpoint it starts from by
    default and whether its loss reads `--teacher` scores (read by `__main__.py` as
    `builder.add_arguments`, `builder.default_base` and `builder.reads_teacher`)."""
    def decorator(builder):
        builder.add_arguments = add_arguments
        builder.default_base = default_base
        builder.reads_teacher = reads_teacher
        FAMILIES[family] = builder
        return builder

    return decorator


def load_families() -> dict[str, Callable]:
    from . import bgem3, bm25aug, sparseembed, splade, ssr, tilde, tildev2  # noqa: F401  (each registers itself)

    return FAMILIES
