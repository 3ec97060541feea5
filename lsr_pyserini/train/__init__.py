"""Training: one data path and one loop shared by every model family.

`python -m lsr_pyserini.train FAMILY ...` (see `__main__.py`). A family is a torch module with
`loss(batch, step) -> (loss, {name: value})` and `save(folder)`, registered in `FAMILIES`.
"""
from __future__ import annotations

from typing import Callable

from .base import FAMILIES, register  # noqa: F401  (the registry, filled by each family module)

def load_families() -> dict[str, Callable]:
    from . import bgem3, bm25aug, sparseembed, splade, ssr, tilde, tildev2  # noqa: F401  (each registers itself)

    return FAMILIES
