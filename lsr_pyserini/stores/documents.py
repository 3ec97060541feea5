"""Documents by id from the JsonVectorCollection shards `encode corpus` writes: each record holds the
document's text (`contents`), its title alone where the corpus gave one (`title`; shards written
before it was kept have none) and its integer impacts (`vector`).

An impact index does not store its documents (`lucene index --impact` without `--storeRaw`), nor
does Seismic; the shards they were built from do. `ShardDocuments(folder)` reads every shard once,
keeping only where each record starts and ends (file, byte offset, length), and then reads one
record per lookup. Thread-safe: an uncompressed shard is read with `os.pread` on a descriptor kept
open (no seek, no shared position), a gzipped one through a handle of the lookup's own. A document's
fields are parsed without its vector where the record ends with it, as `encode corpus` writes them
(a SciFact record's vector is most of its bytes: ten documents in 0.1 ms instead of 0.5).
"""
from __future__ import annotations

import gzip
import json
import os
import re
import threading
from pathlib import Path

from ..core.errors import InputError

LEADING_ID = re.compile(rb'^\{"id": ("(?:[^"\\]|\\.)*")')
# the vector as the last key: inside a JSON string a quote is escaped, so this is only ever the key
VECTOR_KEY = b', "vector": {'


class ShardDocuments:
    def __init__(self, folder: str | Path):
        from .vectors import vector_files

        self.folder = Path(folder)
        self.files = vector_files(self.folder)
        self._offsets: dict[str, tuple[int, int, int]] | None = None
        self._descriptors: dict[int, int] = {}  # shard number -> descriptor kept open (uncompressed shards)
        self._lock = threading.Lock()

    def _positions(self) -> dict[str, tuple[int, int, int]]:
        with self._lock:
            if self._offsets is None:
                offsets: dict[str, tuple[int, int, int]] = {}
                for number, path in enumerate(self.files):
                    with self._open(path) as handle:
                        position = handle.tell()
                        for line in iter(handle.readline, b""):
                            if line.strip():
                                offsets.setdefault(self._docid(line, path), (number, position, len(line)))
                            position = handle.tell()
                self._offsets = offsets
            return self._offsets

    def _line(self, number: int, offset: int, length: int) -> bytes:
        path = self.files[number]
        if path.suffix == ".gz":
            with self._open(path) as handle:
                handle.seek(offset)
                return handle.readline()
        descriptor = self._descriptors.get(number)
        if descriptor is None:
            with self._lock:
                descriptor = self._descriptors.get(number)
                if descriptor is None:
                    descriptor = self._descriptors[number] = os.open(path, os.O_RDONLY)
        return os.pread(descriptor, length, offset)

    def close(self) -> None:
        with self._lock:
            descriptors, self._descriptors = list(self._descriptors.values()), {}
        for descriptor in descriptors:
            os.close(descriptor)

    def __del__(self):
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass

    @staticmethod
    def _open(path: Path):
        return gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb")

    @staticmethod
    def _docid(line: bytes, path: Path) -> str:
        """The record's id: read from the line's start where the writer puts it (a million records
        need not be parsed whole), else from the whole record."""
        leading = LEADING_ID.match(line)
        try:
            if leading:
                return json.loads(leading.group(1))
            return str(json.loads(line)["id"])
        except (ValueError, KeyError, TypeError):
            raise InputError(f"{path}: a line that is not a JsonVectorCollection record") from None

    def __contains__(self, docid: str) -> bool:
        return docid in self._positions()

    def __len__(self) -> int:
        return len(self._positions())

    def record(self, docid: str) -> dict | None:
        """The shard record of `docid` (`id`[, `title`], `contents`, `vector`), or None when no shard has it."""
        found = self._positions().get(docid)
        return None if found is None else json.loads(self._line(*found))

    def text(self, docid: str) -> str | None:
        document = self.document(docid)
        return None if document is None else document["contents"]

    def document(self, docid: str) -> dict | None:
        """`{"contents"[, "title"]}` of `docid` (see `document_fields`), or None when no shard has it.
        The record is parsed up to its vector where the vector is its last key and `contents` comes
        before it (as `encode corpus` writes); whole otherwise."""
        found = self._positions().get(docid)
        if found is None:
            return None
        line = self._line(*found)
        cut = line.rfind(VECTOR_KEY)
        if cut > 0 and line.rstrip().endswith(b"}}"):  # the vector's object closes the record
            try:
                fields = json.loads(line[:cut] + b"}")
            except ValueError:
                fields = None
            if isinstance(fields, dict) and "contents" in fields:
                return document_fields(fields)
        return document_fields(json.loads(line))

    def vector(self, docid: str) -> dict | None:
        record = self.record(docid)
        return None if record is None else dict(record.get("vector") or {})


def document_fields(record) -> dict:
    """What the search service shows of a stored record (a shard's, or an index's raw JSON):
    `contents`, and `title` where the record has a non-empty one."""
    found = {"contents": str(record.get("contents", ""))}
    title = record.get("title")
    if isinstance(title, str) and title:
        found["title"] = title
    return found
