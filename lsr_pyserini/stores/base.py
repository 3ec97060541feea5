"""The one ending every store writer shares: build the store aside, rename it into place.

`StoreWriter` builds a store in the sibling folder `STORE.building/` and renames it to `STORE`
only when every file is written, so a reader never sees a half-written store. `ShardedStoreWriter`
adds the resumable part: one part file per corpus shard in `STORE.partial/` (the shard writer's
interface: `is_complete`, `adopt`, `write_shard`, `abandon`), gathered into the store at the end.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.writer import atomic_write


def write_manifest(path: Path, manifest: dict) -> None:
    """A store's JSON manifest, written atomically."""
    atomic_write(path, [json.dumps(manifest, indent=2, sort_keys=True) + "\n"])


def read_manifest(path: Path, not_a_store: str) -> dict:
    """A store's JSON manifest; InputError `not_a_store` when it is absent, one line when malformed."""
    if not path.is_file():
        raise InputError(not_a_store)
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise InputError(f"{path}: malformed JSON ({err.msg})") from None


def store_size(path: str) -> tuple[int, int]:
    """(bytes on disk, documents) of any store folder: every store lists its documents in
    docids.txt, one id a line."""
    folder = Path(path)
    docids = folder / "docids.txt"
    if not docids.is_file():
        raise InputError(f"{path}: not a store folder (no docids.txt)")
    with open(docids, "rb") as handle:
        documents = sum(1 for _ in handle)
    return sum(f.stat().st_size for f in folder.rglob("*") if f.is_file()), documents


class StoreWriter:
    """Writes a store folder once: files go to STORE.building/, renamed to STORE when complete."""

    def __init__(self, path: str):
        self.path = Path(str(path).rstrip("/\\") or str(path))

    def begin(self) -> Path:
        """A fresh, empty STORE.building/ folder to write the store's files into."""
        building = self.path.with_name(self.path.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        return building

    def publish(self, building: Path) -> None:
        """Replace STORE by the completed building folder."""
        if self.path.exists():
            shutil.rmtree(self.path)
        os.replace(building, self.path)


class ShardedStoreWriter(StoreWriter):
    """A store filled shard by shard in STORE.partial/ (resumable) and built by `finish`.

    Refuses to replace a complete store unless `overwrite`, and to resume parts written with other
    settings. Subclasses write a shard with `write_part` and gather the parts in `finish`.
    """

    kind = "store"

    def __init__(self, path: str, settings: dict, overwrite: bool = False):
        super().__init__(path)
        self.partial = self.path.with_name(self.path.name + ".partial")
        self.settings = settings
        if overwrite:
            for folder in (self.path, self.partial):
                if folder.is_dir():
                    shutil.rmtree(folder)
        if self.path.exists():
            raise InputError(f"{self.path}: {self.kind} already exists: choose another folder or pass --overwrite")
        settings_file = self.partial / "settings.json"
        if self.partial.is_dir():
            try:
                previous = json.loads(settings_file.read_text())
            except (OSError, json.JSONDecodeError):
                previous = None
            if previous != settings:
                raise InputError(f"{self.partial}: holds vectors encoded with other settings "
                                 f"(or unreadable): pass --overwrite to start again")
        self.partial.mkdir(parents=True, exist_ok=True)
        atomic_write(settings_file, [json.dumps(settings, sort_keys=True)])

    def _part(self, index: int) -> Path:
        return self.partial / f"part-{index:05d}.npz"

    def parts(self) -> list[Path]:
        return sorted(self.partial.glob("part-*.npz"))

    def is_complete(self, index: int) -> bool:
        return self._part(index).is_file()

    def adopt(self, index: int) -> None:
        """Nothing to do: a complete part is read back by `finish`."""

    def write_part(self, index: int, **arrays: np.ndarray) -> None:
        """Save one shard's arrays as a complete part (written aside, then renamed)."""
        tmp = self.partial / f".part-{index:05d}.tmp.npz"
        np.savez(tmp, **arrays)
        os.replace(tmp, self._part(index))

    def documents_done(self) -> int:
        """Documents in complete parts (this run's and earlier ones)."""
        total = 0
        for part in self.parts():
            with np.load(part) as data:
                total += len(data["docids"])
        return total

    def abandon(self) -> None:
        for tmp in self.partial.glob(".part-*.tmp.npz"):
            tmp.unlink(missing_ok=True)

    def check_count(self, documents: int, expected: int, what: str) -> None:
        if documents != expected:
            raise InputError(f"{self.partial}: holds {documents} of {expected} {what} "
                             f"(was an earlier run made without this store?): pass --overwrite to start again")

    def publish(self, building: Path) -> None:
        super().publish(building)
        shutil.rmtree(self.partial, ignore_errors=True)
