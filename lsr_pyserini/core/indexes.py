"""What kind of Lucene index a folder holds, told from files alone (no JVM, no model).

- An index built by `lucene index` has `INDEX.lsr.json` beside it: its `kind` (**impact** when
  built with `--impact`, else **bm25**), and for `encode corpus` shards their manifest and their
  quantisation (a record with a shards manifest and no kind, from before kinds were recorded, is
  an impact index).
- A WordPiece index of `bm25aug index` has `INDEX/lsr_tokenizer.json`: **bm25**, or **impact** for
  its `--scoring bow` ablation.
- Any other Lucene index (a `segments_N` file) is of **unknown** kind: Lucene records an impact
  field and a BM25 field alike (`DOCS_AND_FREQS` with norms; positions only where asked for), so
  callers go by what they were given (an encoder or not).
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from .errors import InputError
from .outputs import LUCENE_INDEX

ENCODING_RECORD = ".lsr.json"  # INDEX.lsr.json, beside the index: Lucene's folder holds Lucene's files only
IMPACT, BM25, UNKNOWN = "impact", "bm25", "unknown"
TOKENIZER_RECORD = "lsr_tokenizer.json"  # a WordPiece BM25 index's tokenizer (kernels/wordpiece_bm25.py)


def is_remote(index: str | Path) -> bool:
    """Whether `index` is a server's address (`http://host:19530`: a Milvus cluster), not a path."""
    return bool(re.match(r"^[a-z][a-z0-9+.-]*://", str(index)))


def is_lucene_index(path: str | Path) -> bool:
    return LUCENE_INDEX.recognise(Path(path))


def encoding_record_path(index: str | Path) -> Path:
    index = Path(index)
    return index.with_name(index.name + ENCODING_RECORD)


def encoding_record(index: str | Path) -> dict | None:
    """INDEX.lsr.json (written when the index was built from `encode corpus` shards), or None."""
    path = encoding_record_path(index)
    if not path.is_file():
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
        return kind if kind in (IMPACT, BM25) else UNKNOWN

    tokenizer = folder / TOKENIZER_RECORD
    if tokenizer.is_file():
        try:
            scoring = json.loads(tokenizer.read_text(encoding="utf-8")).get("scoring", "bm25")
        except (OSError, ValueError, AttributeError):
            raise InputError(f"{tokenizer}: unreadable tokenizer record") from None
        return IMPACT if scoring == "bow" else BM25
    return UNKNOWN


def shards_folder(index: str | Path) -> Path | None:
    """The JsonVectorCollection shards an impact index was built from (its record names their
    manifest, `SHARDS.manifest.json`), when they are still there."""
    record = encoding_record(index) or {}
    manifest = record.get("shards_manifest")
    if not manifest or not str(manifest).endswith(".manifest.json"):
        return None
    folder = Path(str(manifest)[: -len(".manifest.json")])
    return folder if folder.is_dir() else None
