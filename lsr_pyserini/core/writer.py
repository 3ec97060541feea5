"""The one writer every encoder shares: integer impacts, corpus shards, query files, manifests.

Corpus output is a folder of JsonVectorCollection (or, for plain text, JsonCollection) shards (`part-00000.jsonl`, ...) that
`pyserini.index.lucene --collection JsonVectorCollection --impact --pretokenized` indexes as it
is. Anserini reads every file below that folder, so nothing else lives there: the manifest is the
sibling file `DIR.manifest.json` and shards are first written to the sibling folder `DIR.partial/`
and moved into DIR only when complete, fsynced and their SHA-256 recorded in the manifest
(`CheckedParts`). An interrupted run (Ctrl-C, a kill, a full disk) therefore leaves only complete
shards, and running the same command again checks them and resumes after them. The folder is
claimed and locked first (`core/outputs.py`).
"""
from __future__ import annotations

import itertools
import json
import logging
from pathlib import Path
from typing import BinaryIO, Callable, Iterator

from .environment import environment
from .errors import InputError, Interrupted, disk_full
from .outputs import OutputKind, atomic_write, claim_output, sha256_file, written_aside
from .readers import Document

log = logging.getLogger(__name__)

SHARD_PATTERN = "part-{:05d}.jsonl"
DEFAULT_SHARD_SIZE = 10_000
# `pyserini.search.lucene` reads any topics path containing one of these with a special reader.
TOPIC_PATH_TRAPS = ("cacm", "beir")


def to_impacts(vector: dict[str, float], impact_scale: float) -> dict[str, int]:
    """Integer impacts round(weight * impact_scale); terms that round to 0 are dropped."""
    impacts = {}
    for term, weight in vector.items():
        impact = int(round(weight * impact_scale))
        if impact > 0:
            if not term or any(ch.isspace() for ch in term):
                raise InputError(f"term {term!r} is empty or contains whitespace: Lucene would split it")
            impacts[term] = impact
    return impacts



quantize = to_impacts  # its name before the int8 kernels took the word (kernels/int8.py)

def query_line(qid: str, impacts: dict[str, int]) -> str:
    """`qid<TAB>terms`, each term repeated by its impact (what `pyserini.search.lucene --impact` reads)."""
    terms = " ".join(" ".join([term] * impact) for term, impact in impacts.items())
    return f"{qid}\t{terms}\n"


# what `--output-format` offers, as Pyserini's search: TREC `qid Q0 docid rank score tag`, or MS MARCO
# `qid<TAB>docid<TAB>rank` (pyserini/output_writer.py's MsMarcoWriter: no score, no tag, rank from 1)
OUTPUT_FORMATS = ("trec", "msmarco")
OUTPUT_FORMAT_HELP = "run format: trec (qid Q0 docid rank score tag) or msmarco (qid<TAB>docid<TAB>rank, as " \
                     "Pyserini's --output-format msmarco) (default: trec)"


def run_lines(run: dict[str, list[tuple[str, float]]], tag: str, output_format: str = "trec") -> Iterator[str]:
    """Run lines, each query's list in the given order: TREC `qid Q0 docid rank score tag`, or with
    `output_format` "msmarco" `qid<TAB>docid<TAB>rank` (Pyserini's MS MARCO run)."""
    if output_format not in OUTPUT_FORMATS:
        raise InputError(f"output format {output_format!r}: expected one of {', '.join(OUTPUT_FORMATS)}")
    if not tag or any(ch.isspace() for ch in tag):
        raise InputError(f"run tag {tag!r} is empty or contains whitespace")
    for qid, ranking in run.items():
        for rank, (docid, score) in enumerate(ranking, start=1):
            yield f"{qid}\t{docid}\t{rank}\n" if output_format == "msmarco" else \
                f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"


def manifest_path(out_dir: Path) -> Path:
    return out_dir.with_name(out_dir.name + ".manifest.json")


def _is_shard_folder(path: Path) -> bool:
    """Whether DIR.manifest.json beside `path` is this writer's manifest."""
    try:
        manifest = json.loads(manifest_path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return isinstance(manifest, dict) and isinstance(manifest.get("settings"), dict) and "shards" in manifest


SHARD_FOLDER = OutputKind("a shard folder (with DIR.manifest.json beside it)", folder=True,
                          recognise=_is_shard_folder, siblings=(".manifest.json",))


class CheckedParts:
    """The complete parts (0, 1, ...) of a resumable output, each with its SHA-256 on record.

    A part is written aside in `tmp_folder`, flushed and fsynced; its checksum and `stats` are then
    recorded (`save`, which writes the record atomically) and only then is it renamed to
    `folder/pattern.format(index)`. So a file under a part's final name is always complete, and a
    part whose rename was lost to a crash is simply written again. On resume every recorded part
    is read back: one that is missing is written again; one that no longer matches its checksum
    (truncated, damaged) is reported in one line, removed and written again.
    """

    def __init__(self, folder: Path, tmp_folder: Path, pattern: str, recorded: dict, save: Callable[[], None]):
        self.folder, self.tmp_folder, self.pattern, self.save = folder, tmp_folder, pattern, save
        self.entries: dict[str, dict] = {}
        unchecked = []
        for key, entry in recorded.items():
            path = self.path(int(key))
            if not path.is_file():
                continue
            if "sha256" not in entry:  # recorded by a version that kept no checksums
                unchecked.append(path)
            elif entry["sha256"] != sha256_file(path):
                log.warning(f"{path}: does not match the SHA-256 recorded when it was written (truncated or damaged); "
                            f"writing it again")
            else:
                self.entries[key] = entry
                continue
            path.unlink()
        if unchecked:
            log.warning(f"{folder}: {len(unchecked)} part(s) have no SHA-256 on record (written by an older version); "
                        f"writing them again")

    def path(self, index: int) -> Path:
        return self.folder / self.pattern.format(index)

    def is_complete(self, index: int) -> bool:
        return str(index) in self.entries

    def write(self, index: int, write: Callable[[BinaryIO], None], **stats) -> None:
        """Write part `index` with `write(handle)` (binary), record it, rename it into place."""
        key = str(index)

        def record(tmp: Path) -> None:
            self.entries[key] = {"sha256": sha256_file(tmp), "bytes": tmp.stat().st_size, **stats}
            self.save()

        tmp = self.tmp_folder / f".{self.pattern.format(index)}.tmp"
        try:
            with written_aside(self.path(index), tmp=tmp, before_rename=record) as handle:
                write(handle)
        except BaseException:
            self.entries.pop(key, None)  # perhaps recorded, but not renamed into place: not complete
            raise

    def ordered(self) -> list[Path]:
        """The complete parts' files in index order."""
        return [self.path(int(key)) for key in sorted(self.entries, key=int)]

    def total(self, stat: str) -> int:
        return sum(entry[stat] for entry in self.entries.values())


class ShardWriter:
    """Writes corpus shards into `out_dir`, resumable, with a manifest beside the folder."""

    def __init__(self, out_dir: str, settings: dict, overwrite: bool = False):
        self.claim = claim_output(out_dir, SHARD_FOLDER, overwrite, resumable=True)
        self.out_dir = self.claim.path
        self.manifest = manifest_path(self.out_dir)
        self.settings = settings
        if overwrite:
            self.claim.clear()
        recorded = self._recorded_shards()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.partial_dir = self.claim.scratch(".partial")
        self.parts = CheckedParts(self.out_dir, self.partial_dir, SHARD_PATTERN, recorded,
                                  lambda: self._write_manifest({"status": "running"}))
        self._write_manifest({"status": "running"})

    @property
    def shards(self) -> dict[str, dict]:
        """Complete shards: index -> {"documents", "nonzeros", "sha256", "bytes"}."""
        return self.parts.entries

    def _recorded_shards(self) -> dict:
        """The shards an earlier run recorded; refuses one made with other settings."""
        if not self.manifest.is_file():
            return {}
        try:
            previous = json.loads(self.manifest.read_text())
        except (OSError, json.JSONDecodeError):
            raise InputError(f"{self.manifest}: unreadable manifest: pass --overwrite to start again") from None
        if previous.get("settings") != self.settings:
            changed = sorted(k for k in set(previous.get("settings", {})) | set(self.settings)
                             if previous.get("settings", {}).get(k) != self.settings.get(k))
            raise InputError(f"{self.out_dir}: holds shards encoded with other settings "
                             f"({', '.join(changed)} {'differs' if len(changed) == 1 else 'differ'}): "
                             f"choose another --output or pass --overwrite")
        return previous.get("shards", {})

    def _write_manifest(self, extra: dict) -> None:
        data = {"settings": self.settings, "shards": self.shards, **extra}
        atomic_write(self.manifest, [json.dumps(data, indent=2, sort_keys=True) + "\n"])

    def shard_path(self, index: int) -> Path:
        return self.parts.path(index)

    def is_complete(self, index: int) -> bool:
        return self.parts.is_complete(index)

    def write_shard(self, index: int, records: list[dict]) -> None:
        """Write one complete shard of JSON records (`id`, `contents`[, `vector`]) and move it into place."""
        def write(handle) -> None:
            for record in records:
                handle.write((json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8"))

        self.parts.write(index, write, documents=len(records),
                         nonzeros=sum(len(r.get("vector", ())) for r in records))

    def documents_done(self) -> int:
        return self.parts.total("documents")

    def totals(self) -> tuple[int, int]:
        """(documents, non-zero terms) over all complete shards, this run's and earlier ones."""
        return self.parts.total("documents"), self.parts.total("nonzeros")

    def finish(self, summary: dict) -> None:
        # the environment is recorded, not compared: only "settings" decide whether shards resume
        self._write_manifest({"status": "complete", "environment": environment(), **summary})
        self.abandon()
        self.claim.release()

    def abandon(self) -> None:
        """Drop DIR.partial (a half-written shard is removed as it fails); complete shards stay."""
        self.claim.drop_scratch(".partial")


class WithDenseStore:
    """A sparse shard writer and a store writer filled shard by shard from the same forward pass.

    The store's part of a shard is written before its sparse shard, so a complete sparse shard
    always has its store part and resuming stays correct. Records are (sparse records, store records)."""

    def __init__(self, sparse: ShardWriter, store):
        self.sparse, self.store = sparse, store

    def is_complete(self, index: int) -> bool:
        return self.sparse.is_complete(index) and self.store.is_complete(index)

    def write_shard(self, index: int, records) -> None:
        sparse_records, store_records = records
        self.store.write_shard(index, store_records)
        self.sparse.write_shard(index, sparse_records)

    def documents_done(self) -> int:
        return self.sparse.documents_done()

    def abandon(self) -> None:
        self.store.abandon()
        self.sparse.abandon()


def pending_shards(docs: Iterator[Document], writer, shard_size: int, progress) -> Iterator[tuple[int, list[Document]]]:
    """(index, documents) of each shard `writer` does not yet hold complete, in order; the shards an
    earlier run completed are skipped (and counted on `progress`)."""
    for index in itertools.count():
        shard = list(itertools.islice(docs, shard_size))
        if not shard:
            return
        if writer.is_complete(index):
            progress.update(len(shard))
            continue
        yield index, shard


def write_corpus_shards(docs: Iterator[Document], writer, shard_size: int,
                        to_records: Callable[[list[Document]], object], progress, total: int, output: str,
                        encode_shards: Callable[[Iterator[tuple[int, list[Document]]]],
                                                Iterator[tuple[int, list[Document], object]]] | None = None) -> int:
    """Cut `docs` into shards, skip those an earlier run completed, write the rest.

    `writer` is a ShardWriter or anything with its interface (`is_complete`, `write_shard`,
    `documents_done`, `abandon`); `to_records` turns one shard of documents into its records (and advances
    `progress`). `encode_shards`, when given, replaces that one-shard-at-a-time loop: it takes the
    pending (index, documents) pairs and yields (index, documents, records) in the same order, having
    encoded them elsewhere (worker processes, Ray actors: `core/parallel.py`); this process stays the
    one writer. Returns the number of documents written by this run. A shard is written aside and
    renamed only when complete, so on Ctrl-C (`Interrupted`) or a full disk (`InputError`) the
    one-line message says how many of the `total` documents are in complete shards of `output`
    and that the same command resumes.
    """
    if encode_shards is None:
        def encode_shards(pending):
            return ((index, shard, to_records(shard)) for index, shard in pending)
    written = 0
    try:
        for index, shard, records in encode_shards(pending_shards(docs, writer, shard_size, progress)):
            writer.write_shard(index, records)
            written += len(shard)
    except KeyboardInterrupt:
        writer.abandon()
        progress.close()
        raise Interrupted(f"interrupted: {writer.documents_done()} of {total} documents are in complete shards "
                          f"for {output}; run the same command again to resume") from None
    except OSError as err:
        if disk_full(err) is None:
            raise
        writer.abandon()
        progress.close()
        raise InputError(f"{disk_full(err)}: {writer.documents_done()} of {total} documents are in complete shards "
                         f"for {output}; free space and run the same command again to resume") from None
    return written
