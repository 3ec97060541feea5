"""Reading what `encode` writes, for every engine that is not Lucene (Seismic, Milvus, PISA, the
benchmarks): the JsonVectorCollection shards of `encode corpus` (`read_vectors`, checked line by
line) and the impact query TSV of `encode queries` (`read_impact_queries`: each term repeated by its
integer impact, what `lucene search --impact` reads)."""
from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from pathlib import Path
from typing import Iterator

import numpy as np

from ..core.errors import InputError


def vector_files(folder: Path) -> list[Path]:
    """The files Anserini's JsonVectorCollection reads below `folder`, in name order."""
    if not folder.is_dir():
        raise InputError(f"{folder}: no such folder of JsonVectorCollection shards")
    if any(folder.glob("segments_*")):  # its lsr_index.json is the index's record, not a shard
        raise InputError(f"{folder}: no .jsonl/.json shards in it (a Lucene index; give the `encode corpus` shards)")
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")
                   and p.name.endswith((".json", ".jsonl", ".json.gz", ".jsonl.gz")))
    if not files:
        raise InputError(f"{folder}: no .jsonl/.json shards in it")
    return files


NUMBER_TYPES = frozenset((int, float))


def read_vectors(folder: Path, progress=None) -> Iterator[tuple[str, dict]]:
    """(docid, {term: impact}) of every document of the shards, checked line by line; `progress`
    (a tqdm-like bar) is advanced by the bytes read."""
    seen: set[str] = set()
    done = 0  # bytes of the shards already read
    for path in vector_files(folder):
        yield from read_vector_file(path, seen, progress, done)
        done += path.stat().st_size
        if progress is not None:
            progress.update(done - progress.n)


def read_vector_file(path: Path, seen: set[str] | None = None, progress=None,
                     done: int = 0) -> Iterator[tuple[str, dict]]:
    """(docid, {term: impact}) of one shard; a docid already in `seen` (which collects them) is
    refused; `progress` is set to `done` plus the bytes of this shard read."""
    seen = set() if seen is None else seen
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if progress is not None and not line_no % 1024:
                progress.update(done + _raw_position(handle) - progress.n)
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError:
                raise InputError(f"{path}:{line_no}: not a JSON line") from None
            if not isinstance(record, dict) or "id" not in record or not isinstance(record.get("vector"), dict):
                raise InputError(f"{path}:{line_no}: expected a JsonVectorCollection record "
                                 "{\"id\", \"vector\": {term: impact}}")
            docid = str(record["id"])
            if docid in seen:
                raise InputError(f"{path}:{line_no}: duplicate document id {docid!r}")
            seen.add(docid)
            vector = record["vector"]
            if not _valid_at_c_speed(vector):
                _check_vector(vector, f"{path}:{line_no}")
            yield docid, vector


def vector_bytes(folder: Path) -> int:
    """Bytes on disk of the shards `read_vectors` reads (the progress bar's total)."""
    return sum(path.stat().st_size for path in vector_files(folder))


def _raw_position(handle) -> int:
    """Bytes of the shard on disk read so far (compressed bytes of a .gz)."""
    binary = handle.buffer
    return (getattr(binary, "fileobj", None) or binary).tell()


def _valid_at_c_speed(vector: dict) -> bool:
    """True when every impact is a finite int/float >= 0 and every term a non-empty string without
    whitespace, checked with whole-vector operations (a document of 250 terms in microseconds);
    False sends the vector to `_check_vector`, which names the first bad entry."""
    if not vector:
        return True
    if not set(map(type, vector.values())) <= NUMBER_TYPES:  # bool, str, None, lists are not numbers
        return False
    weights = np.fromiter(vector.values(), dtype=np.float64, count=len(vector))
    if not (np.isfinite(weights).all() and weights.min() >= 0):
        return False
    joined = " ".join(vector)  # terms are str (JSON object keys); whitespace is only the separators
    parts = joined.split()
    return len(parts) == len(vector) and sum(map(len, parts)) == len(joined) - len(vector) + 1


def _check_vector(vector: dict, where: str) -> None:
    for term, impact in vector.items():
        if isinstance(impact, bool) or not isinstance(impact, (int, float)) or not math.isfinite(impact) \
                or impact < 0:
            raise InputError(f"{where}: term {term!r} has impact {impact!r}: expected a number >= 0")
        if not term or any(ch.isspace() for ch in term):
            raise InputError(f"{where}: term {term!r} is empty or contains whitespace")


def parse_query_line(line: str, where: str) -> tuple[str, dict[str, int]]:
    """`qid<TAB>terms`, each term repeated by its integer impact (core/writer.py `query_line`),
    back to (qid, {term: impact})."""
    qid, sep, text = line.rstrip("\n").partition("\t")
    if not sep or not qid.strip():
        raise InputError(f"{where}: expected 'qid<TAB>terms repeated by impact'")
    return qid.strip(), dict(Counter(text.split()))  # first-seen order; counted in C (a query holds thousands)


def read_impact_queries(path: str) -> list[tuple[str, dict[str, int]]]:
    """The query TSV `encode queries` writes (what the Lucene path reads), as (qid, {term: impact})."""
    file = Path(path)
    if not file.is_file():
        raise InputError(f"{path}: no such query file")
    queries, seen = [], set()
    with open(file, encoding="utf-8") as handle:
        for line_no, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            qid, impacts = parse_query_line(line, f"{path}:{line_no}")
            if qid in seen:
                raise InputError(f"{path}:{line_no}: duplicate query id {qid!r}")
            seen.add(qid)
            queries.append((qid, impacts))
    if not queries:
        raise InputError(f"{path}: no queries")
    return queries


def check_shards(folder: Path) -> dict | None:
    """The manifest `encode corpus` wrote beside the shards in `folder` (None when there is none: shards
    made elsewhere), after checking that it describes exactly these files: one line, before any work,
    for an encoding still under way and for shards that are not the manifest's (another encoder's
    shards copied in, a shard replaced)."""
    from ..core.writer import manifest_path

    files = vector_files(folder)
    path = manifest_path(folder)
    if not path.is_file():
        return None
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
        recorded = {f"part-{int(number):05d}.jsonl": int(entry["bytes"]) for number, entry in manifest["shards"].items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        raise InputError(f"{path}: unreadable manifest of the shards in {folder}") from None
    if manifest.get("status") != "complete":
        raise InputError(f"{folder}: its encoding is not finished ({path} says {manifest.get('status')!r}): "
                         f"run `encode corpus` again to complete it")
    found = {str(file.relative_to(folder)): file.stat().st_size for file in files}
    for name, size in found.items():
        if recorded.get(name) != size:
            raise InputError(f"{folder / name}: not a shard of {path} (another encoding's shard, or changed): "
                             f"keep one encoder's shards in one folder")
    missing = sorted(set(recorded) - set(found))
    if missing:
        raise InputError(f"{folder}: shard {missing[0]} of {path} is missing")
    return manifest
