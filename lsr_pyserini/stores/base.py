"""The one ending every store writer shares: build the store aside, rename it into place.

`StoreWriter` claims the store's folder first (`core/outputs.py`: locked; an existing store of
the same kind is replaced only with --overwrite, anything else is never touched), builds the store
in the marked sibling folder `STORE.building/` and renames it to `STORE` only when every file is
written, so a reader never sees a half-written store. `ShardedStoreWriter` adds the resumable
part: one part file per corpus shard in `STORE.partial/` (the shard writer's interface:
`is_complete`, `write_shard`, `documents_done`, `abandon`), each checksummed in
`STORE.partial/progress.json` (`core.writer.CheckedParts`), gathered into the store at the end.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.environment import environment
from ..core.errors import InputError
from ..core.outputs import OutputKind, atomic_write, claim_output, folder_bytes, json_file_kind
from ..core.writer import CheckedParts

PROGRESS_FILE = "progress.json"


def range_positions(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Positions starts[i] .. starts[i] + lengths[i] - 1 of every range, concatenated in order."""
    return np.arange(lengths.sum()) + np.repeat(starts - np.cumsum(lengths) + lengths, lengths)


def write_manifest(path: Path, manifest: dict, record_environment: bool = True) -> None:
    """A store's JSON manifest, written atomically, with the environment it was built in (thread
    count, library versions: `core/environment.py`) under "environment", beside the settings and
    never compared with them."""
    if record_environment and "environment" not in manifest:
        manifest = {**manifest, "environment": environment()}
    atomic_write(path, [json.dumps(manifest, indent=2, sort_keys=True) + "\n"])


def read_manifest(path: Path, not_a_store: str) -> dict:
    """A store's JSON manifest; InputError `not_a_store` when it is absent, one line when malformed."""
    if not path.is_file():
        raise InputError(not_a_store)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: malformed JSON ({err.msg})") from None


def store_kind(description: str, manifest_file: str, check: Callable[[dict], bool]) -> OutputKind:
    """The kind of a store folder recognised by its manifest file passing `check`."""
    return json_file_kind(description, manifest_file, lambda manifest: isinstance(manifest, dict) and check(manifest))


def store_size(path: str) -> tuple[int, int]:
    """(bytes on disk, documents) of any store folder: every store lists its documents in
    docids.txt, one id a line."""
    folder = Path(path)
    docids = folder / "docids.txt"
    if not docids.is_file():
        raise InputError(f"{path}: not a store folder (no docids.txt)")
    with open(docids, "rb") as handle:
        documents = sum(1 for _ in handle)
    return folder_bytes(folder), documents


class StoreWriter:
    """Writes a store folder once: files go to STORE.building/, renamed to STORE when complete.
    Subclasses set `output_kind` (or pass `kind`)."""

    output_kind: OutputKind

    def __init__(self, path: str, overwrite: bool = False, kind: OutputKind | None = None):
        self.claim = claim_output(path, kind or self.output_kind, overwrite)
        self.path = self.claim.path

    def begin(self) -> Path:
        """A fresh, empty STORE.building/ folder to write the store's files into."""
        self.claim.drop_scratch(".building")
        return self.claim.scratch(".building")

    def publish(self, building: Path) -> None:
        """Replace STORE by the completed building folder (and drop STORE.partial)."""
        self.claim.replace_with(building)
        self.claim.drop_scratch(".partial")
        self.claim.release()


class ShardedStoreWriter(StoreWriter):
    """A store filled shard by shard in STORE.partial/ (resumable) and built by `finish`.

    Refuses to replace a complete store unless `overwrite`, and to resume parts written with other
    settings. Subclasses write a shard with `write_part` and gather `parts()` in `finish`.
    """

    def __init__(self, path: str, settings: dict, overwrite: bool = False):
        super().__init__(path, overwrite)
        self.settings = settings
        if overwrite:
            self.claim.drop_scratch(".partial")
        self.partial = self.claim.scratch(".partial")
        self.parts_record = CheckedParts(self.partial, self.partial, "part-{:05d}.npz", self._recorded_parts(),
                                         self._save_progress)
        self._save_progress()

    def _recorded_parts(self) -> dict:
        progress = self.partial / PROGRESS_FILE
        if not progress.is_file():
            return {}
        try:
            previous = json.loads(progress.read_text())
        except (OSError, json.JSONDecodeError):
            previous = None
        if not isinstance(previous, dict) or previous.get("settings") != self.settings:
            raise InputError(f"{self.partial}: holds the parts of a run on other input or settings "
                             f"(or unreadable): pass --overwrite to start again")
        return previous.get("parts", {})

    def _save_progress(self) -> None:
        write_manifest(self.partial / PROGRESS_FILE, {"settings": self.settings, "parts": self.parts_record.entries},
                       record_environment=False)

    def parts(self) -> list[Path]:
        """The complete parts, in shard order."""
        return self.parts_record.ordered()

    def is_complete(self, index: int) -> bool:
        return self.parts_record.is_complete(index)

    def write_part(self, index: int, **arrays: np.ndarray) -> None:
        """Save one shard's arrays as a complete part (written aside, checksummed, then renamed)."""
        self.parts_record.write(index, lambda handle: np.savez(handle, **arrays), documents=len(arrays["docids"]))

    def documents_done(self) -> int:
        """Documents in complete parts (this run's and earlier ones)."""
        return self.parts_record.total("documents")

    def abandon(self) -> None:
        """Nothing to drop: STORE.partial holds the complete parts (a half-written one is removed as it fails)."""

    def check_count(self, documents: int, expected: int, what: str) -> None:
        if documents != expected:
            raise InputError(f"{self.partial}: holds {documents} of {expected} {what} "
                             f"(was an earlier run made without this store?): pass --overwrite to start again")
