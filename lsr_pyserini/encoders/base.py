"""The sparse encoder interface and the Hugging Face loading helpers every family shares."""
from __future__ import annotations

import os
from abc import ABC, abstractmethod

from ..data import InputError

SparseVector = dict[str, float]


class SparseEncoder(ABC):
    """Maps a batch of texts to a batch of non-negative `{term: weight}` vectors."""

    @abstractmethod
    def encode_documents(self, texts: list[str]) -> list[SparseVector]:
        """Document-side vectors, one per text, in the same order."""

    @abstractmethod
    def encode_queries(self, texts: list[str]) -> list[SparseVector]:
        """Query-side vectors, one per text, in the same order."""

    def describe(self) -> dict:
        """Settings that determine the output, recorded in manifests (JSON-serialisable)."""
        return {}


def model_error(reference: str, err: Exception) -> InputError:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1"
    hint = " (HF_HUB_OFFLINE=1 is set: pass a local folder with --model)" if offline else ""
    detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
    return InputError(f"cannot load model {reference!r}: {detail}{hint}")


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(path)
    except Exception as err:  # transformers raises many types for a bad folder or hub id
        raise model_error(path, err) from None


FAMILY_FILE = "lsr_family.json"


def check_family(path: str, expected: str) -> None:
    """Refuse a checkpoint this toolkit trained for another model family."""
    import json
    from pathlib import Path

    marker = Path(path) / FAMILY_FILE
    if marker.is_file():
        family = json.loads(marker.read_text()).get("family")
        if family != expected:
            raise InputError(f"checkpoint {path} was trained as a {family!r} model, not {expected!r}")


def write_family(path, family: str, **details) -> None:
    import json
    from pathlib import Path

    (Path(path) / FAMILY_FILE).write_text(json.dumps({"family": family, **details}, indent=2) + "\n")


def load_quietly(loader, path: str, what: str, **kwargs):
    """`loader.from_pretrained(path, **kwargs)` with transformers' load report silenced (weights a
    head-less class does not use are expected); InputError when the checkpoint lacks weights."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        model, info = loader.from_pretrained(path, output_loading_info=True, **kwargs)
    except Exception as err:
        raise model_error(path, err) from None
    finally:
        hf_logging.set_verbosity(verbosity)
    missing = sorted(info.get("missing_keys", ()))
    if missing:
        raise InputError(f"model {path!r}: {what} (missing {', '.join(missing[:3])}"
                         f"{', ...' if len(missing) > 3 else ''})")
    return model
