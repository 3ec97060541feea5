"""The re-ranker interface: (queries, candidate document ids) in, one score per candidate out."""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Callable


class Reranker(ABC):
    """Scores candidates from precomputed document-side data held in a store.

    Built as ``Reranker(store_path, options)``; ``options`` holds the command line's settings
    (``model``, ``batch_size``, ...), each optional.
    """

    @abstractmethod
    def missing(self, docids: set[str]) -> list[str]:
        """The given document ids that the store does not hold (checked before any scoring)."""

    @abstractmethod
    def score(self, query_ids: list[str], query_texts: list[str],
              candidates: list[list[str]]) -> list[list[float]]:
        """One score per candidate, higher is better, in the candidates' order."""

    def describe(self) -> dict:
        """What determines the scores (for logs and run tags)."""
        return {}


RERANKERS: dict[str, Callable[[str, dict], Reranker]] = {}
OPTIONS: dict[str, list["Option"]] = {}


@dataclass(frozen=True)
class Option:
    """A re-ranker's own command-line option (`--cls-weight` -> options["cls_weight"]); `type` is
    its argparse type (numbers: one of `core.options`), applied to the Python API's value as well."""

    flag: str
    help: str
    type: Callable
    metavar: str | None = None

    @property
    def dest(self) -> str:
        return self.flag.lstrip("-").replace("-", "_")


def register(name: str, options: tuple[Option, ...] = ()):
    def decorator(builder):
        RERANKERS[name] = builder
        OPTIONS[name] = list(options)
        return builder

    return decorator
