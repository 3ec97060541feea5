"""Training: one data path and one loop shared by every model family.

`python -m lsr_pyserini.train FAMILY ...` (see `__main__.py`). A family registers its builder with
`models.registry.trainer`: a torch module with `loss(batch, step) -> (loss, {name: value})` and
`save(folder)`, its training options declared once as a schema.
"""
from __future__ import annotations

from typing import Callable

from ..models.registry import TRAINERS, load_families as _load


def load_families() -> dict[str, Callable]:
    _load()
    return TRAINERS
