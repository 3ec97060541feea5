"""The registry of training families: each family module registers its builder here."""
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
