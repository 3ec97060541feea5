"""Per-token stores SSR writes at encoding time and re-rankers read: a folder of numpy arrays.

    STORE/manifest.json   {"format", "kind": "tokens"|"codes", "documents", "tokens", ...}
    STORE/docids.txt      one document id a line, in row order
    STORE/offsets.npy     int64, documents + 1: document i owns token rows offsets[i]:offsets[i+1]
    STORE/<name>.npy      token-row arrays (one row per ordinary token) and document-row arrays

A *token store* (kind ``tokens``) holds the backbone's float16 token embeddings (``tokens``) and
pooled vectors (``pooled``): the dense MaxSim baseline and the SAE's training input. A *code
store* (kind ``codes``) holds each token's K active SAE neurons (``token_index`` uint16/int32) and
activations (``token_value`` float16), and the same for the pooled vector (``cls_index``,
``cls_value``): what SSR re-ranking reads. Arrays are memory-mapped on reading. The folder is
built as STORE.building and renamed, so it is complete or absent.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.outputs import atomic_write
from .base import StoreWriter, read_manifest, store_kind, write_manifest

STORE_FORMAT = "lsr-pyserini-token-store/1"
MANIFEST, DOCIDS, OFFSETS = "manifest.json", "docids.txt", "offsets.npy"
TOKEN_STORES = {kind: store_kind(f"an SSR {kind} store", MANIFEST,
                                 lambda manifest, kind=kind: manifest.get("format") == STORE_FORMAT
                                 and manifest.get("kind") == kind)
                for kind in ("tokens", "codes")}


class TokenRowsWriter(StoreWriter):
    """Collects documents (id, {name: token rows}, {name: document row}) and writes the store once."""

    def __init__(self, path: str, kind: str, settings: dict, overwrite: bool = False):
        super().__init__(path, overwrite, kind=TOKEN_STORES[kind])
        self.kind, self.settings = kind, settings
        self.docids: list[str] = []
        self.lengths: list[int] = []
        self.token_parts: dict[str, list[np.ndarray]] = {}
        self.doc_parts: dict[str, list[np.ndarray]] = {}

    def add(self, docid: str, token_rows: dict[str, np.ndarray], doc_rows: dict[str, np.ndarray]) -> None:
        lengths = {len(rows) for rows in token_rows.values()}
        if len(lengths) != 1:
            raise ValueError(f"token arrays of {docid!r} differ in length: {sorted(lengths)}")
        self.docids.append(docid)
        self.lengths.append(lengths.pop())
        for name, rows in token_rows.items():
            self.token_parts.setdefault(name, []).append(rows)
        for name, row in doc_rows.items():
            self.doc_parts.setdefault(name, []).append(row)

    def finish(self, summary: dict | None = None) -> dict:
        building = self.begin()
        offsets = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=offsets[1:])
        np.save(building / OFFSETS, offsets)
        for name, parts in self.token_parts.items():
            np.save(building / f"{name}.npy", np.concatenate(parts))
        for name, parts in self.doc_parts.items():
            np.save(building / f"{name}.npy", np.stack(parts))
        atomic_write(building / DOCIDS, (f"{d}\n" for d in self.docids))
        manifest = {"format": STORE_FORMAT, "kind": self.kind, **self.settings, "documents": len(self.docids),
                    "tokens": int(offsets[-1]), "token_arrays": sorted(self.token_parts),
                    "document_arrays": sorted(self.doc_parts), **(summary or {})}
        write_manifest(building / MANIFEST, manifest)
        self.publish(building)
        return manifest


class TokenRows:
    """A token or code store opened for reading (arrays memory-mapped)."""

    def __init__(self, path: str, kind: str):
        self.path = Path(path)
        self.manifest = read_manifest(self.path / MANIFEST, f"{path}: not an SSR {kind} store (no {MANIFEST})")
        if self.manifest.get("format") != STORE_FORMAT or self.manifest.get("kind") != kind:
            raise InputError(f"{path}: a {self.manifest.get('kind')!r} store, not an SSR {kind} store")
        self.docids = (self.path / DOCIDS).read_text(encoding="utf-8").splitlines()
        self.offsets = np.load(self.path / OFFSETS)
        if len(self.offsets) != len(self.docids) + 1:
            raise InputError(f"{path}: {len(self.docids)} document ids for {len(self.offsets) - 1} offsets")
        self.row = {docid: i for i, docid in enumerate(self.docids)}
        self.arrays = {name: np.load(self.path / f"{name}.npy", mmap_mode="r")
                       for name in self.manifest["token_arrays"] + self.manifest["document_arrays"]}

    def missing(self, docids) -> list[str]:
        return [d for d in docids if d not in self.row]

    def row_ranges(self, docids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(starts, ends): document docids[i] owns token rows starts[i]:ends[i] of the token arrays."""
        rows = np.fromiter((self.row[d] for d in docids), dtype=np.int64, count=len(docids))
        return self.offsets[rows], self.offsets[rows + 1]

    def gather(self, docids: list[str], names: list[str]) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        """Token rows of the given documents, concatenated; returns (per-document start offsets, arrays)."""
        starts, ends = self.row_ranges(docids)
        lengths = ends - starts
        bounds = np.zeros(len(docids) + 1, dtype=np.int64)
        np.cumsum(lengths, out=bounds[1:])
        return bounds, {name: np.concatenate([self.arrays[name][s:e] for s, e in zip(starts, ends)])
                        for name in names}

    def document_rows(self, docids: list[str], name: str) -> np.ndarray:
        return np.asarray(self.arrays[name][[self.row[d] for d in docids]])

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())
