"""Documents by id from the JsonVectorCollection shards `encode corpus` writes: each record holds the
document's text (`contents`), its title alone where the corpus gave one (`title`; shards written
before it was kept have none) and its integer impacts (`vector`).

An impact index does not store its documents (`lucene index --impact` without `--storeRaw`), nor
does Seismic; the shards they were built from do. `ShardDocuments(folder)` reads every shard once,
keeping only where each record starts (file, byte offset), and then reads one record per lookup.
Thread-safe: each lookup opens its own file handle.
"""
from __future__ import annotations

import gzip
import json
import re
import threading
from pathlib import Path

from ..core.errors import InputError

LEADING_ID = re.compile(rb'^\{"id": ("(?:[^"\\]|\\.)*")')


class ShardDocuments:
    def __init__(self, folder: str | Path):
        from .vectors import vector_files

        self.folder = Path(folder)
        self.files = vector_files(self.folder)
        self._offsets: dict[str, tuple[int, int]] | None = None
        self._lock = threading.Lock()

    def _positions(self) -> dict[str, tuple[int, int]]:
        with self._lock:
            if self._offsets is None:
                offsets: dict[str, tuple[int, int]] = {}
                for number, path in enumerate(self.files):
                    with self._open(path) as handle:
                        position = handle.tell()
                        for line in iter(handle.readline, b""):
                            if line.strip():
                                offsets.setdefault(self._docid(line, path), (number, position))
                            position = handle.tell()
                self._offsets = offsets
            return self._offsets

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
        if found is None:
            return None
        number, offset = found
        with self._open(self.files[number]) as handle:
            handle.seek(offset)
            return json.loads(handle.readline())

    def text(self, docid: str) -> str | None:
        record = self.record(docid)
        return None if record is None else str(record.get("contents", ""))

    def document(self, docid: str) -> dict | None:
        """`{"contents"[, "title"]}` of `docid` (see `document_fields`), or None when no shard has it."""
        record = self.record(docid)
        return None if record is None else document_fields(record)

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
