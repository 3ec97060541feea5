"""The TILDE store: per-passage TILDE outputs written at expansion time (`expand --store`), read by
the TILDE-QL re-ranker."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..core.environment import environment
from ..core.errors import InputError
from ..core.outputs import atomic_write
from .base import StoreWriter, store_kind

META_FILE = "tilde.json"
TILDE_STORE = store_kind("a TILDE store", META_FILE, lambda meta: "vocab_size" in meta and "documents" in meta)

# `tilde.json`'s "passage_terms" in a store whose passage terms are whole passages (TILDE-DL reads
# them); stores written before had them cut at 64 tokens and lack this value.
PASSAGE_TERMS = "all tokens"


class TildeStore:
    """Per-passage TILDE outputs written at expansion time, read by the TILDE-QL re-ranker.

    Layout of the folder: `docids.txt`; `log_likelihoods.f16`, a float16 documents x |V| matrix of
    log P(t|d) read through a memory map (re-ranking touches only the candidates' rows);
    `passage_terms.i32` + `passage_offsets.i64`, each passage's scored token ids over the whole
    passage (for TILDE-DL);
    `tilde.json`, the model and sizes. Written by `TildeStoreWriter`.
    """

    META = META_FILE

    def __init__(self, folder: str):
        self.folder = Path(folder)
        meta_path = self.folder / self.META
        if not meta_path.is_file():
            raise InputError(f"{folder}: not a TILDE store (no {self.META}; build it with `expand --store`)")
        self.meta = json.loads(meta_path.read_text())
        self.docids = (self.folder / "docids.txt").read_text(encoding="utf-8").splitlines()
        self.row = {docid: i for i, docid in enumerate(self.docids)}
        shape = (len(self.docids), int(self.meta["vocab_size"]))
        expected = shape[0] * shape[1] * 2
        actual = (self.folder / "log_likelihoods.f16").stat().st_size
        if actual != expected:
            raise InputError(f"{self.folder / 'log_likelihoods.f16'}: {actual} bytes, expected {expected} "
                             f"(truncated or from another model)")
        self.log_likelihoods = np.memmap(self.folder / "log_likelihoods.f16", dtype=np.float16, mode="r", shape=shape)
        self.terms = np.fromfile(self.folder / "passage_terms.i32", dtype=np.int32)
        self.offsets = np.fromfile(self.folder / "passage_offsets.i64", dtype=np.int64)

    def missing(self, docids) -> list[str]:
        return [d for d in docids if d not in self.row]

    def passage_terms(self, docid: str):
        row = self.row[docid]
        return self.terms[self.offsets[row]:self.offsets[row + 1]]


class TildeStoreWriter(StoreWriter):
    """Claims the store folder up front (before the model runs); `write` builds it into
    `DIR.building` and renames it into place when complete."""

    output_kind = TILDE_STORE

    def write(self, docids: list[str], log_likelihoods: list, passage_terms: list[list[int]], meta: dict) -> None:
        building = self.begin()
        atomic_write(building / "docids.txt", (f"{d}\n" for d in docids))
        matrix = np.memmap(building / "log_likelihoods.f16", dtype=np.float16, mode="w+",
                           shape=(len(docids), int(meta["vocab_size"])))
        for row, values in enumerate(log_likelihoods):
            matrix[row] = values.numpy()
        matrix.flush()
        del matrix
        np.asarray([t for terms in passage_terms for t in terms], dtype=np.int32).tofile(building / "passage_terms.i32")
        np.cumsum([0] + [len(t) for t in passage_terms], dtype=np.int64).tofile(building / "passage_offsets.i64")
        atomic_write(building / META_FILE, [json.dumps({**meta, "documents": len(docids), "environment": environment()}, indent=2) + "\n"])
        self.publish(building)
