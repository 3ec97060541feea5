"""The one writer every encoder shares: integer impacts, corpus shards, query files, manifests.

Corpus output is a folder of JsonVectorCollection (or, for plain text, JsonCollection) shards (`part-00000.jsonl`, ...) that
`pyserini.index.lucene --collection JsonVectorCollection --impact --pretokenized` indexes as it
is. Anserini reads every file below that folder, so nothing else lives there: the manifest is the
sibling file `DIR.manifest.json` and shards are first written to the sibling folder `DIR.partial/`
and moved into DIR only when complete. An interrupted run therefore leaves only complete shards,
and running the same command again resumes after the last complete shard.
"""
from __future__ import annotations

import itertools
import json
import os
import shutil
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .errors import InputError, Interrupted
from .readers import Document

SHARD_PATTERN = "part-{:05d}.jsonl"
DEFAULT_SHARD_SIZE = 10_000
# `pyserini.search.lucene` reads any topics path containing one of these with a special reader.
TOPIC_PATH_TRAPS = ("cacm", "beir")


def quantize(vector: dict[str, float], impact_scale: float) -> dict[str, int]:
    """Integer impacts round(weight * impact_scale); terms that round to 0 are dropped."""
    impacts = {}
    for term, weight in vector.items():
        impact = int(round(weight * impact_scale))
        if impact > 0:
            if not term or any(ch.isspace() for ch in term):
                raise InputError(f"term {term!r} is empty or contains whitespace: Lucene would split it")
            impacts[term] = impact
    return impacts


def query_line(qid: str, impacts: dict[str, int]) -> str:
    """`qid<TAB>terms`, each term repeated by its impact (what `pyserini.search.lucene --impact` reads)."""
    terms = " ".join(" ".join([term] * impact) for term, impact in impacts.items())
    return f"{qid}\t{terms}\n"


def run_lines(run: dict[str, list[tuple[str, float]]], tag: str) -> Iterator[str]:
    """TREC run lines `qid Q0 docid rank score tag`, each query's list in the given order."""
    if not tag or any(ch.isspace() for ch in tag):
        raise InputError(f"run tag {tag!r} is empty or contains whitespace")
    for qid, ranking in run.items():
        for rank, (docid, score) in enumerate(ranking, start=1):
            yield f"{qid} Q0 {docid} {rank} {score:.6f} {tag}\n"


def atomic_write(path: Path, lines: Iterable[str]) -> None:
    """Write to `path` through a temporary sibling so the file is either complete or absent."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        with open(tmp, "w", encoding="utf-8") as handle:
            handle.writelines(lines)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def manifest_path(out_dir: Path) -> Path:
    return out_dir.with_name(out_dir.name + ".manifest.json")


class ShardWriter:
    """Writes corpus shards into `out_dir`, resumable, with a manifest beside the folder."""

    def __init__(self, out_dir: str, settings: dict, overwrite: bool = False):
        self.out_dir = Path(out_dir.rstrip("/\\") or out_dir)
        self.partial_dir = self.out_dir.with_name(self.out_dir.name + ".partial")
        self.manifest = manifest_path(self.out_dir)
        self.settings = settings
        self.shards: dict[str, dict] = {}  # shard index -> {"documents": n, "nonzeros": n}
        if overwrite:
            self._clear()
        self._check_existing()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.partial_dir.mkdir(parents=True, exist_ok=True)
        self._write_manifest({"status": "running"})

    def _clear(self) -> None:
        for path in (self.out_dir, self.partial_dir):
            if path.is_dir():
                shutil.rmtree(path)
        self.manifest.unlink(missing_ok=True)

    def _check_existing(self) -> None:
        if not self.out_dir.exists():
            return
        if not self.out_dir.is_dir():
            raise InputError(f"{self.out_dir}: exists and is not a folder")
        if not any(self.out_dir.iterdir()):
            return
        if not self.manifest.is_file():
            raise InputError(f"{self.out_dir}: folder is not empty and has no {self.manifest.name} "
                             f"(not written by this tool): choose another --output or pass --overwrite")
        try:
            previous = json.loads(self.manifest.read_text())
        except (OSError, json.JSONDecodeError):
            raise InputError(f"{self.manifest}: unreadable manifest: pass --overwrite to start again") from None
        if previous.get("settings") != self.settings:
            changed = sorted(k for k in set(previous.get("settings", {})) | set(self.settings)
                             if previous.get("settings", {}).get(k) != self.settings.get(k))
            raise InputError(f"{self.out_dir}: holds shards encoded with other settings "
                             f"({', '.join(changed)} differ): choose another --output or pass --overwrite")
        self.shards = {k: v for k, v in previous.get("shards", {}).items() if self.is_complete(int(k))}

    def _write_manifest(self, extra: dict) -> None:
        data = {"settings": self.settings, "shards": self.shards, **extra}
        atomic_write(self.manifest, [json.dumps(data, indent=2, sort_keys=True) + "\n"])

    def shard_path(self, index: int) -> Path:
        return self.out_dir / SHARD_PATTERN.format(index)

    def is_complete(self, index: int) -> bool:
        return self.shard_path(index).is_file()

    def write_shard(self, index: int, records: list[dict]) -> None:
        """Write one complete shard of JSON records (`id`, `contents`[, `vector`]) and move it into place."""
        tmp = self.partial_dir / SHARD_PATTERN.format(index)
        with open(tmp, "w", encoding="utf-8") as handle:
            for record in records:
                handle.write(json.dumps(record, ensure_ascii=False) + "\n")
        os.replace(tmp, self.shard_path(index))
        self.shards[str(index)] = {"documents": len(records),
                                   "nonzeros": sum(len(r.get("vector", ())) for r in records)}
        self._write_manifest({"status": "running"})

    def adopt(self, index: int) -> None:
        """Count a shard completed by an earlier run (its stats are read back if the manifest lacks them)."""
        if str(index) not in self.shards:
            documents = nonzeros = 0
            with open(self.shard_path(index), encoding="utf-8") as handle:
                for line in handle:
                    documents += 1
                    nonzeros += len(json.loads(line).get("vector", ()))
            self.shards[str(index)] = {"documents": documents, "nonzeros": nonzeros}

    def documents_done(self) -> int:
        return self.totals()[0]

    def totals(self) -> tuple[int, int]:
        """(documents, non-zero terms) over all complete shards, this run's and earlier ones."""
        return (sum(s["documents"] for s in self.shards.values()),
                sum(s["nonzeros"] for s in self.shards.values()))

    def finish(self, summary: dict) -> None:
        self._write_manifest({"status": "complete", **summary})
        shutil.rmtree(self.partial_dir, ignore_errors=True)

    def abandon(self) -> None:
        """Drop the half-written shard of an interrupted run; complete shards stay."""
        shutil.rmtree(self.partial_dir, ignore_errors=True)


class WithDenseStore:
    """A sparse shard writer and a store writer filled shard by shard from the same forward pass.

    The store's part of a shard is written before its sparse shard, so a complete sparse shard
    always has its store part and resuming stays correct. Records are (sparse records, store records)."""

    def __init__(self, sparse: ShardWriter, store):
        self.sparse, self.store = sparse, store

    def is_complete(self, index: int) -> bool:
        return self.sparse.is_complete(index) and self.store.is_complete(index)

    def adopt(self, index: int) -> None:
        self.sparse.adopt(index)

    def write_shard(self, index: int, records) -> None:
        sparse_records, store_records = records
        self.store.write_shard(index, store_records)
        self.sparse.write_shard(index, sparse_records)

    def documents_done(self) -> int:
        return self.sparse.documents_done()

    def abandon(self) -> None:
        self.store.abandon()
        self.sparse.abandon()


def write_corpus_shards(docs: Iterator[Document], writer, shard_size: int,
                        to_records: Callable[[list[Document]], object], progress, total: int, output: str) -> int:
    """Cut `docs` into shards, skip those an earlier run completed, write the rest.

    `writer` is a ShardWriter or anything with its interface (`is_complete`, `adopt`,
    `write_shard`, `abandon`, `documents_done`); `to_records` turns one shard of documents into
    its records (and advances `progress`). Returns the number of documents written by this run.
    On Ctrl-C the half-written shard is dropped and `Interrupted` says how many of the `total`
    documents are in complete shards of `output` and how to resume.
    """
    written = 0
    try:
        for index in itertools.count():
            shard = list(itertools.islice(docs, shard_size))
            if not shard:
                break
            if writer.is_complete(index):
                writer.adopt(index)
                progress.update(len(shard))
                continue
            writer.write_shard(index, to_records(shard))
            written += len(shard)
    except KeyboardInterrupt:
        writer.abandon()
        progress.close()
        raise Interrupted(f"interrupted: {writer.documents_done()} of {total} documents are in complete shards "
                          f"for {output}; run the same command again to resume") from None
    return written
