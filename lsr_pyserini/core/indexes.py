"""What kind of Lucene index a folder holds: told by the record the toolkit keeps inside the folder,
else examined in the index itself.

- An index built by `lucene index` holds `INDEX/lsr_index.json`: its `kind` (**impact** when built
  with `--impact`, else **bm25**), and for `encode corpus` shards their encoder, their quantisation
  and their manifest (relative to the index folder and absolute, so that a copied, moved or renamed
  folder still finds them where they are). Being inside the folder, the record travels with it.
  Lucene leaves the file alone: its IndexFileDeleter only deletes its own files (`segments_N`,
  `_N.*`). Indexes built before kept it beside the folder (`INDEX.lsr.json`); that place is still read.
  (A record with a shards manifest and no kind, from before kinds were recorded: an impact index.)
- A WordPiece index of `bm25aug index` has `INDEX/lsr_tokenizer.json`: **bm25**, or **impact** for
  its `--scoring bow` ablation.
- Any other Lucene index (a `segments_N` file) is examined (`examine_lucene_index`, on the JVM).
  Lucene records an impact field and a BM25 field alike (`DOCS_AND_FREQS` with norms), but the norms
  differ: Anserini's `-impact` indexes under its ImpactSimilarity, whose norm is 1 for every
  document, while BM25's similarity stores each document's length (a norm above 1 for any document
  of two terms or more). Norms of 1 with a term frequency above 1 somewhere: **impact**; a norm above
  1: **bm25**; every norm and every frequency 1 (or no `contents` field): **unknown**, and callers
  go by what they were given (an encoder or not).
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .errors import InputError
from .outputs import LUCENE_INDEX

INDEX_RECORD = "lsr_index.json"  # INDEX/lsr_index.json, inside the index: it travels with the folder
LEGACY_RECORD = ".lsr.json"  # INDEX.lsr.json, beside the index, as indexes built before kept it
IMPACT, BM25, UNKNOWN = "impact", "bm25", "unknown"
TOKENIZER_RECORD = "lsr_tokenizer.json"  # a WordPiece BM25 index's tokenizer (kernels/wordpiece_bm25.py)
EXAMINED_DOCUMENTS = 10_000  # norms read per index (from its first documents) when it has no record
CONTENTS = "contents"
EXAMINED_TERMS = 2_000  # terms read from an impact index with no record, checked against the encoder's vocabulary


def is_remote(index: str | Path) -> bool:
    """Whether `index` is a server's address (`http://host:19530`: a Milvus cluster), not a path."""
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", str(index)))


def is_lucene_index(path: str | Path) -> bool:
    return LUCENE_INDEX.recognise(Path(path))


def encoding_record_path(index: str | Path) -> Path:
    """Where the record of an index is written: inside its folder."""
    return Path(index) / INDEX_RECORD


def legacy_record_path(index: str | Path) -> Path:
    """INDEX.lsr.json beside the folder: where indexes built before kept their record."""
    index = Path(index)
    return index.with_name(index.name + LEGACY_RECORD)


def record_file(index: str | Path) -> Path | None:
    """The record file an index has: inside its folder, else beside it (an older index), else None."""
    for path in (encoding_record_path(index), legacy_record_path(index)):
        if path.is_file():
            return path
    return None


def record_description(index: str | Path) -> str:
    """How a message names the record: `lsr_index.json in it` or `NAME.lsr.json beside it`."""
    path = record_file(index)
    if path is None:
        return "examined"
    return f"{path.name} in it" if path.parent == Path(index) else f"{path.name} beside it"


def encoding_record(index: str | Path) -> dict | None:
    """The index's record (inside its folder, else beside it as older indexes kept it), or None."""
    path = record_file(index)
    if path is None:
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise InputError(f"{path}: unreadable (truncated?): build the index again") from None
    return record if isinstance(record, dict) else None


def lucene_index_kind(index: str | Path) -> str:
    """IMPACT, BM25 or UNKNOWN for a Lucene index folder; InputError naming the folder otherwise."""
    folder = Path(index)
    if not folder.exists():
        raise InputError(f"{index}: no such index folder")
    if not is_lucene_index(folder):
        raise InputError(f"{index}: not a Lucene index (no segments_N file in it)")
    record = encoding_record(folder)
    if record is not None:
        kind = record.get("kind", IMPACT if record.get("shards_manifest") else UNKNOWN)
        if kind in (IMPACT, BM25):
            return kind
        return examine_lucene_index(folder)

    tokenizer = folder / TOKENIZER_RECORD
    if tokenizer.is_file():
        try:
            scoring = json.loads(tokenizer.read_text(encoding="utf-8")).get("scoring", "bm25")
        except (OSError, ValueError, AttributeError):
            raise InputError(f"{tokenizer}: unreadable tokenizer record") from None
        return IMPACT if scoring == "bow" else BM25
    return examine_lucene_index(folder)


_examined: dict[tuple, str] = {}


def examine_lucene_index(folder: Path) -> str:
    """IMPACT, BM25 or UNKNOWN from the `contents` field's norms and term frequencies (module
    docstring); remembered per folder and commit. Starts the JVM."""
    commits = sorted(p.name for p in Path(folder).glob("segments_*"))
    key = (str(Path(folder).resolve()), tuple(commits),
           tuple(os.stat(Path(folder) / name).st_mtime_ns for name in commits))
    if key not in _examined:
        from .jvm import on_jvm_thread

        _examined[key] = on_jvm_thread(_examine, str(folder))
    return _examined[key]


def _examine(folder: str) -> str:
    from jnius import JavaException, autoclass

    try:
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
            autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(folder)))
    except JavaException:
        return UNKNOWN  # unreadable: whoever opens it says so
    try:
        seen, no_more = 0, 2147483647  # DocIdSetIterator.NO_MORE_DOCS
        for leaf in reader.leaves().toArray():
            norms = leaf.reader().getNormValues(CONTENTS)
            if norms is None:
                continue
            while seen < EXAMINED_DOCUMENTS and norms.nextDoc() != no_more:
                if norms.longValue() != 1:
                    return BM25  # a document length: BM25's similarity
                seen += 1
        if seen == 0:
            return UNKNOWN
        postings = reader.getSumDocFreq(CONTENTS)
        return IMPACT if reader.getSumTotalTermFreq(CONTENTS) > postings else UNKNOWN
    finally:
        reader.close()


def index_terms(folder: str | Path, limit: int = EXAMINED_TERMS) -> list[str]:
    """About `limit` terms of the `contents` field, spread over each segment's term dictionary
    (every n-th term, so that a prefix of one alphabet does not stand for all). Starts the JVM."""
    from .jvm import on_jvm_thread

    return on_jvm_thread(_index_terms, str(folder), limit)


def _index_terms(folder: str, limit: int) -> list[str]:
    from jnius import autoclass

    reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
        autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(folder)))
    try:
        leaves = reader.leaves().toArray()
        found = set()
        for leaf in leaves:  # each segment's dictionary, sampled evenly
            terms = leaf.reader().terms(CONTENTS)
            if terms is None or terms.size() <= 0:
                continue
            share = max(1, limit // len(leaves))
            step, iterator, position, taken = max(1, int(terms.size()) // share), terms.iterator(), 0, 0
            while taken < share:
                term = iterator.next()
                if term is None:
                    break
                if position % step == 0:
                    found.add(term.utf8ToString())
                    taken += 1
                position += 1
        return sorted(found)
    finally:
        reader.close()


def shards_manifest(index: str | Path) -> Path | None:
    """The manifest (`SHARDS.manifest.json`) of the `encode corpus` shards an impact index was built
    from, as its record names it (relative to the index folder, else absolute), when it is there."""
    record = encoding_record(index) or {}
    candidates = []
    if record.get("shards_manifest_relative"):
        candidates.append(Path(index) / str(record["shards_manifest_relative"]))
    if record.get("shards_manifest"):
        candidates.append(Path(str(record["shards_manifest"])))
    for manifest in candidates:
        if str(manifest).endswith(".manifest.json") and manifest.is_file():
            return manifest
    return None


def shards_folder(index: str | Path) -> Path | None:
    """The JsonVectorCollection shards an impact index was built from, when they are still there."""
    manifest = shards_manifest(index)
    if manifest is None:
        return None
    folder = Path(str(manifest)[: -len(".manifest.json")])
    return folder if folder.is_dir() else None


def input_location(folder: Path | str, index: Path | str) -> dict:
    """How an index's manifest names the shards it was built from: `input` (absolute) and
    `input_relative` (relative to the index folder), so that an index moved together with its shards
    (a folder of both, copied or archived) still finds them, and one moved alone finds them where
    they were."""
    folder = Path(folder).resolve()
    return {"input": str(folder), "input_relative": os.path.relpath(folder, Path(index).resolve())}


def recorded_input(index: Path | str, manifest: dict) -> Path:
    """The shards folder an index's manifest names: relative to the index where they are there,
    else the absolute path it recorded (indexes of before record only that)."""
    relative = manifest.get("input_relative")
    if relative:
        beside = Path(index) / str(relative)
        if beside.is_dir():
            return beside
    return Path(str(manifest.get("input", "")))


def shards_encoder_record(shards: dict | None) -> dict | None:
    """The encoder a shards' manifest (`encode corpus`) records, with the name of the preset it was
    given by (`preset`), for an index to keep inside its folder; None for shards made elsewhere."""
    settings = (shards or {}).get("settings") or {}
    encoder = settings.get("encoder")
    if not isinstance(encoder, dict):
        return None
    return {**encoder, "preset": settings["preset"]} if settings.get("preset") and "preset" not in encoder else encoder
