"""What every writer does before and while it writes an output: claim it, lock it, write it durably.

* `claim_output(path, kind, overwrite)` comes first, before any model is run. It locks the output
  and looks at what is already there: nothing, or an empty file or folder (used as it is); this
  kind of output (resumed by a resumable writer, else replaced only with --overwrite); anything
  else (refused, even with --overwrite: the toolkit never removes what it did not write). A
  refusal is one `InputError` line.
* The lock (`OutputLock`) is `fcntl.flock` on the hidden sibling `.NAME.lock`, which records the
  holder's pid, host and command. The OS drops it when the process ends, however it ends; a lock
  file left by a killed process is taken over with a one-line "stale lock" warning. A second
  process claiming the same output is refused, naming the holder.
* `written_aside` writes a file under a temporary name, flushes and fsyncs it, and only then
  renames it into place, so a file is complete or absent (`atomic_write` writes lines that way).
* Scratch folders beside an output (`NAME.partial/`, `NAME.building/`) carry a marker file; only
  a marked (or empty) one is ever removed.
"""
from __future__ import annotations

import atexit
import fcntl
import hashlib
import itertools
import json
import logging
import os
import shutil
import socket
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import InputError

log = logging.getLogger(__name__)

SCRATCH_MARK = ".lsr-pyserini-scratch"
SNIFF_LINES = 100  # lines of an existing file read to recognise its kind


@dataclass(frozen=True)
class OutputKind:
    """What an output is: `description` for messages ("a TREC run"), whether it is a folder,
    `recognise(path)`: whether an existing path is this kind of output, and `siblings`: suffixes
    of files beside it that belong to it (a shard folder's `.manifest.json`)."""

    description: str
    folder: bool
    recognise: Callable[[Path], bool]
    siblings: tuple[str, ...] = ()


def line_kind(description: str, check_line: Callable[[str], bool]) -> OutputKind:
    """A text file whose first SNIFF_LINES non-blank lines all pass `check_line`."""
    def recognise(path: Path) -> bool:
        if not path.is_file():
            return False
        try:
            with open(path, encoding="utf-8") as handle:
                lines = [line.rstrip("\n") for line in itertools.islice(handle, SNIFF_LINES)]
            return all(check_line(line) for line in lines if line.strip())
        except (OSError, UnicodeDecodeError, ValueError):
            return False

    return OutputKind(description, folder=False, recognise=recognise)


def json_file_kind(description: str, name: str, check: Callable[[object], bool], folder: bool = True) -> OutputKind:
    """A folder holding the JSON file `name` (or, with folder=False, a JSON file) that passes `check`."""
    def recognise(path: Path) -> bool:
        file = path / name if folder else path
        try:
            if file.stat().st_size > 64 * 2**20:
                return False
            return bool(check(json.loads(file.read_text(encoding="utf-8"))))
        except (OSError, UnicodeDecodeError, ValueError):
            return False

    return OutputKind(description, folder=folder, recognise=recognise)


def _is_run_line(line: str) -> bool:
    fields = line.split()
    if len(fields) == 6:  # TREC: qid Q0 docid rank score tag
        int(fields[3]), float(fields[4])
        return True
    if len(fields) == 3:  # MS MARCO (pyserini --output-format msmarco): qid docid rank
        int(fields[2])
        return True
    return False


def _is_csv_table(path: Path) -> bool:
    import csv

    try:
        with open(path, newline="", encoding="utf-8") as handle:
            widths = {len(row) for row in itertools.islice(csv.reader(handle), SNIFF_LINES) if row}
    except (OSError, UnicodeDecodeError, csv.Error):
        return False
    return len(widths) == 1 and widths.pop() >= 2


TREC_RUN = line_kind("a run file (TREC or MS MARCO format)", _is_run_line)
QUERY_FILE = line_kind("a query file (qid<TAB>text lines)", lambda line: "\t" in line)
JSON_LINES = line_kind("a JSON-lines file", lambda line: isinstance(json.loads(line), dict))
CSV_TABLE = OutputKind("a CSV table", folder=False, recognise=_is_csv_table)
JSON_TABLE = json_file_kind("a JSON table (a list of rows)", "", lambda data: isinstance(data, list)
                            and all(isinstance(row, dict) for row in data), folder=False)
LUCENE_INDEX = OutputKind("a Lucene index", folder=True,
                          recognise=lambda path: path.is_dir() and any(path.glob("segments_*")))


# -- locks ---------------------------------------------------------------------------------------

_HELD: dict[str, "OutputLock"] = {}


def _same_file(fd: int, path: Path) -> bool:
    try:
        on_disk = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _holder(fd: int) -> dict | None:
    """What the lock file says about the process that wrote it (None: empty file)."""
    text = os.pread(fd, 4096, 0).decode("utf-8", errors="replace").strip()
    if not text:
        return None
    try:
        holder = json.loads(text)
    except ValueError:
        holder = None
    return holder if isinstance(holder, dict) else {}


def _describe(holder: dict | None) -> str:
    if not holder:
        return "another process"
    return (f"pid {holder.get('pid', '?')} on {holder.get('host', '?')} since {holder.get('started', '?')}: "
            f"{holder.get('command', '?')}")


class OutputLock:
    """An exclusive lock on one output, held by this process until `release` or its end."""

    def __init__(self, target: Path):
        self.target = target
        self.path = target.with_name(f".{target.name}.lock")
        self.fd: int | None = None
        self.created: Path | None = None  # the first folder of the path the lock had to create

    @classmethod
    def acquire(cls, target: Path) -> "OutputLock":
        """Lock `target` (again: the same lock when this process already holds it)."""
        key = os.path.abspath(target)
        if key not in _HELD or _HELD[key].fd is None:
            lock = cls(target)
            lock._lock()
            _HELD[key] = lock
        return _HELD[key]

    def _lock(self) -> None:
        missing = [folder for folder in [self.path.parent, *self.path.parent.parents] if not folder.exists()]
        self.created = missing[-1] if missing else None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise InputError(f"{self.path.parent}: cannot create the folder ({err.strerror})") from None
        while True:
            try:
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
            except OSError as err:
                raise InputError(f"{self.path}: cannot create the lock file ({err.strerror})") from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _describe(_holder(fd))
                os.close(fd)
                raise InputError(f"{self.target}: in use by {holder} (lock {self.path}): wait for it to end "
                                 f"or stop it") from None
            if _same_file(fd, self.path):
                break
            os.close(fd)  # its holder removed it while we waited: lock the file now at that path
        previous = _holder(fd)
        if previous is not None:
            log.warning(f"{self.path}: stale lock left by {_describe(previous)} (that process has ended); taking it over")
        record = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.strftime("%Y-%m-%dT%H:%M:%S"),
                  "command": " ".join(sys.argv)}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(record) + "\n").encode(), 0)
        self.fd = fd

    def release(self) -> None:
        """Remove the lock file, then unlock (a waiter that opened the removed file tries again)."""
        if self.fd is None:
            return
        try:
            if _same_file(self.fd, self.path):
                self.path.unlink()
        except OSError:
            pass
        finally:
            os.close(self.fd)
            self.fd = None
        self._remove_created_folders()

    def _remove_created_folders(self) -> None:
        """The folders the lock created for an output that was never written (a command refused its
        input after claiming the output) are removed again while empty: a failure leaves nothing."""
        if self.created is None:
            return
        folder = self.path.parent
        while True:
            try:
                folder.rmdir()  # only an empty folder
            except OSError:
                return
            if folder == self.created:
                return
            folder = folder.parent


@atexit.register
def release_outputs() -> None:
    """Release every output lock this process holds (at exit; tests call it between commands)."""
    for lock in _HELD.values():
        lock.release()
    _HELD.clear()


# -- durable files and scratch folders -----------------------------------------------------------

def fsync_folder(folder: Path) -> None:
    """Make a rename inside `folder` durable."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


@contextmanager
def written_aside(path: Path, *, text: bool = False, tmp: Path | None = None,
                  before_rename: Callable[[Path], None] | None = None) -> Iterator:
    """A handle on a temporary file (`tmp`, default `.NAME.tmp` beside `path`); when the block ends
    the file is flushed and fsynced, `before_rename(tmp)` is called, and the file is renamed to
    `path`. On any error the temporary file is removed and `path` is left as it was; an OSError
    without a file name (a full disk, from `write`) is given the temporary file's."""
    tmp = tmp or path.with_name(f".{path.name}.tmp")
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with open(tmp, "w" if text else "wb", **({"encoding": "utf-8"} if text else {})) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        if before_rename:
            before_rename(tmp)
        os.replace(tmp, path)
        fsync_folder(path.parent)
    except BaseException as err:
        tmp.unlink(missing_ok=True)
        if isinstance(err, OSError) and not err.filename:
            err.filename = str(tmp)
        raise


def atomic_write(path: Path, lines: Iterable[str]) -> None:
    """Write text lines to `path` so that the file is either complete or absent."""
    with written_aside(Path(path), text=True) as handle:
        handle.writelines(lines)


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(2**20), b""):
            digest.update(block)
    return digest.hexdigest()


def _is_scratch(folder: Path) -> bool:
    return folder.is_dir() and ((folder / SCRATCH_MARK).is_file() or not any(folder.iterdir()))


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    else:
        path.unlink(missing_ok=True)


# -- claims --------------------------------------------------------------------------------------

@dataclass
class Claim:
    """A locked output. `present`: a recognised output of this kind is already there."""

    path: Path
    kind: OutputKind
    present: bool
    overwrite: bool
    lock: OutputLock

    def scratch(self, suffix: str) -> Path:
        """The marked scratch folder NAME+suffix beside the output (an earlier run's is kept)."""
        folder = self.path.with_name(self.path.name + suffix)
        if folder.exists() and not _is_scratch(folder):
            raise InputError(f"{folder}: exists and was not made by this tool: move it away")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / SCRATCH_MARK).touch()
        return folder

    def drop_scratch(self, suffix: str) -> None:
        """Remove the scratch folder NAME+suffix: only when marked, empty, or this kind of output."""
        folder = self.path.with_name(self.path.name + suffix)
        if not folder.exists():
            return
        if not (_is_scratch(folder) or self.kind.recognise(folder)):
            raise InputError(f"{folder}: exists and was not made by this tool: move it away")
        shutil.rmtree(folder)

    def clear(self) -> None:
        """Remove the existing output, its sibling files and scratch folders (with --overwrite)."""
        if self.present and not self.overwrite:
            raise RuntimeError(f"{self.path}: clearing an existing output needs overwrite")
        if self.present:
            _remove(self.path)
            for suffix in self.kind.siblings:
                self.path.with_name(self.path.name + suffix).unlink(missing_ok=True)
            self.present = False
        for suffix in (".partial", ".building"):
            self.drop_scratch(suffix)

    def replace_with(self, built: Path) -> None:
        """Move the complete file or folder `built` to the output's path, replacing what the claim
        found there; a folder is swapped in through a hidden `.NAME.replaced`."""
        if self.present and not self.overwrite:
            raise RuntimeError(f"{self.path}: replacing an existing output needs overwrite")
        if built.is_dir():
            (built / SCRATCH_MARK).unlink(missing_ok=True)
        else:
            with open(built, "rb+") as handle:  # written by another program: make it durable first
                os.fsync(handle.fileno())
        if built.is_dir() and self.path.exists():
            old = self.path.with_name(f".{self.path.name}.replaced")
            if old.exists():  # left by a run that died between the two renames below
                if not self.kind.recognise(old):
                    raise InputError(f"{old}: exists and was not made by this tool: move it away")
                _remove(old)
            os.replace(self.path, old)
            os.replace(built, self.path)
            fsync_folder(self.path.parent)
            _remove(old)
        else:
            os.replace(built, self.path)
            fsync_folder(self.path.parent)
        self.present = True

    def write_lines(self, lines: Iterable[str]) -> None:
        """Write the (single-file) output atomically."""
        if self.present and not self.overwrite:
            raise RuntimeError(f"{self.path}: replacing an existing output needs overwrite")
        atomic_write(self.path, lines)
        self.present = True

    def release(self) -> None:
        self.lock.release()


def _state(path: Path, kind: OutputKind) -> str:
    """'absent', 'empty' (an empty file or folder), 'ours' (recognised) or 'foreign'."""
    siblings = [path.with_name(path.name + suffix) for suffix in kind.siblings]
    if not (path.exists() or path.is_symlink() or any(s.exists() for s in siblings)):
        return "absent"
    if not any(s.exists() for s in siblings) and not path.is_symlink():
        if kind.folder and path.is_dir() and not any(path.iterdir()):
            return "empty"
        if not kind.folder and path.is_file() and path.stat().st_size == 0:
            return "empty"
    return "ours" if kind.recognise(path) else "foreign"


def claim_output(path: str | Path, kind: OutputKind, overwrite: bool, resumable: bool = False) -> Claim:
    """Lock the output `path` and check what is there (see the module's docstring). `resumable`:
    an existing output of this kind is accepted without --overwrite (its writer resumes it or
    refuses other settings). Claiming a path again in the same process is allowed (same lock)."""
    target = Path(str(path).rstrip("/\\") or str(path))
    lock = OutputLock.acquire(target)
    state = _state(target, kind)
    if state == "foreign":
        also = " even with --overwrite" if overwrite else ""
        raise InputError(f"{target}: exists and was not written by this tool (it is not {kind.description}): "
                         f"refusing to replace it{also}; choose another path")
    if state == "ours" and not (overwrite or resumable):
        raise InputError(f"{target}: {kind.description} already exists: pass --overwrite to replace it, "
                         f"or choose another path")
    return Claim(target, kind, present=state == "ours", overwrite=overwrite, lock=lock)


def folder_bytes(folder: str | Path) -> int:
    """Bytes on disk of every file under `folder` (an index's or a store's size)."""
    return sum(file.stat().st_size for file in Path(folder).rglob("*") if file.is_file())
