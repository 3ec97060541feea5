"""Readers for corpora, queries and qrels, with one clear error per bad input.

Every reader yields plain records and raises :class:`InputError` with ``file:line: problem`` on
bad input, so command-line tools can print one line and exit non-zero.

Corpus sources: a JSONL or JSONL.GZ file (``_id``/``id``/``docid`` plus ``title``/``text``/
``contents``), a BEIR folder (``corpus.jsonl[.gz]`` inside), or an ``ir_datasets`` id.
Query sources: a ``qid<TAB>text`` TSV file, or an ``ir_datasets`` id.
"""
from __future__ import annotations

import gzip
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import InputError

ID_FIELDS = ("_id", "id", "docid")
TEXT_FIELDS = ("title", "text", "contents")


@dataclass(frozen=True)
class Document:
    id: str
    text: str
    line: int = 0  # line in the source file (0 when the source has no lines)


@dataclass(frozen=True)
class Query:
    id: str
    text: str


def _open_text(path: Path):
    try:
        if path.name.endswith(".gz"):
            return gzip.open(path, "rt", encoding="utf-8")
        return open(path, "r", encoding="utf-8")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None


def _resolve_corpus_file(source: str) -> Path | None:
    path = Path(source)
    if path.is_dir():
        for name in ("corpus.jsonl", "corpus.jsonl.gz"):
            if (path / name).is_file():
                return path / name
        raise InputError(f"{path}: folder has no corpus.jsonl or corpus.jsonl.gz (BEIR layout)")
    if path.exists():
        return path
    if os.sep in source or source.endswith((".jsonl", ".gz", ".json", ".tsv")):
        raise InputError(f"{source}: no such file or folder")
    return None  # maybe an ir_datasets id


def document_text(record: dict) -> str:
    """Title and text joined by one space; ``contents`` when the record has it instead."""
    parts = []
    for field in ("title", "text"):
        value = record.get(field)
        if isinstance(value, str) and value.strip():
            parts.append(value.strip())
    if not parts and isinstance(record.get("contents"), str):
        parts.append(record["contents"].strip())
    return " ".join(parts)


def _parse_jsonl_corpus(path: Path) -> Iterator[Document]:
    with _open_text(path) as handle:
        try:
            for line_no, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    record = json.loads(line)
                except json.JSONDecodeError as err:
                    raise InputError(f"{path}:{line_no}: malformed JSON ({err.msg})") from None
                if not isinstance(record, dict):
                    raise InputError(f"{path}:{line_no}: expected a JSON object")
                doc_id = next((record[f] for f in ID_FIELDS if record.get(f) not in (None, "")), None)
                if doc_id is None:
                    raise InputError(f"{path}:{line_no}: missing document id (one of {', '.join(ID_FIELDS)})")
                if not any(f in record for f in TEXT_FIELDS):
                    raise InputError(f"{path}:{line_no}: no text field (one of {', '.join(TEXT_FIELDS)})")
                yield Document(str(doc_id), document_text(record), line_no)
        except (OSError, EOFError, UnicodeDecodeError) as err:
            raise InputError(f"{path}: cannot read: {err}") from None


def _ir_datasets(source: str, kind: str):
    try:
        import ir_datasets
    except ImportError:
        raise InputError(f"{source}: not a file, and ir_datasets is not installed: pip install 'lsr-pyserini[ir-datasets]'") from None
    try:
        dataset = ir_datasets.load(source)
    except KeyError:
        raise InputError(f"{source}: no such file, folder or ir_datasets id") from None
    has = getattr(dataset, f"has_{kind}")
    if not has():
        raise InputError(f"{source}: ir_datasets id has no {kind}")
    return dataset


def read_corpus(source: str) -> Iterator[Document]:
    """Documents from a JSONL(.gz) file, a BEIR folder or an ir_datasets id, in file order."""
    path = _resolve_corpus_file(source)
    if path is not None:
        yield from _parse_jsonl_corpus(path)
        return
    for doc in _ir_datasets(source, "docs").docs_iter():
        record = doc._asdict()
        text = document_text(record) or str(getattr(doc, "default_text", lambda: "")())
        yield Document(str(doc.doc_id), text)


def read_queries(source: str) -> Iterator[Query]:
    """Queries from a ``qid<TAB>text`` TSV file or an ir_datasets id."""
    path = Path(source)
    if path.exists() or os.sep in source or source.endswith((".tsv", ".txt", ".gz")):
        if not path.is_file():
            raise InputError(f"{source}: no such file")
        with _open_text(path) as handle:
            try:
                for line_no, line in enumerate(handle, start=1):
                    line = line.rstrip("\r\n")
                    if not line.strip():
                        continue
                    qid, sep, text = line.partition("\t")
                    if not sep or not qid.strip():
                        raise InputError(f"{path}:{line_no}: expected 'qid<TAB>query text'")
                    yield Query(qid.strip(), text.strip())
            except UnicodeDecodeError as err:
                raise InputError(f"{path}: cannot read: {err}") from None
        return
    for query in _ir_datasets(source, "queries").queries_iter():
        text = getattr(query, "text", None) or query.default_text()
        yield Query(str(query.query_id), text)


def read_rows(path: str, layout: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a whitespace-separated file whose every line reads `layout`."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    width = len(layout.split())
    with _open_text(Path(path)) as handle:
        for line_no, line in enumerate(handle, start=1):
            fields = line.split()
            if not fields:
                continue
            if len(fields) != width:
                raise InputError(f"{path}:{line_no}: expected '{layout}'")
            yield line_no, fields


def parse_number(path: str, line_no: int, name: str, value: str, kind=float):
    try:
        return kind(value)
    except ValueError:
        what = "an integer" if kind is int else "a number"
        raise InputError(f"{path}:{line_no}: {name} {value!r} is not {what}") from None


def read_qrels_rows(path: str) -> list[tuple[int, str, str, int]]:
    """TREC qrels as (line number, qid, docid, relevance) rows."""
    return [(line_no, f[0], f[2], parse_number(path, line_no, "relevance", f[3], int))
            for line_no, f in read_rows(path, "qid 0 docid relevance")]


def read_qrels(path: str) -> dict[str, dict[str, int]]:
    """TREC qrels ``qid 0 docid relevance`` as {qid: {docid: relevance}}."""
    qrels: dict[str, dict[str, int]] = {}
    for _, qid, docid, relevance in read_qrels_rows(path):
        qrels.setdefault(qid, {})[docid] = relevance
    return qrels


def read_run(path: str) -> dict[str, list[tuple[str, float]]]:
    """TREC run ``qid Q0 docid rank score tag`` as {qid: [(docid, score), ...]} in rank order."""
    run: dict[str, list[tuple[str, float]]] = {}
    for line_no, f in read_rows(path, "qid Q0 docid rank score tag"):
        run.setdefault(f[0], []).append((f[2], parse_number(path, line_no, "score", f[4])))
    return run


class CorpusCheck:
    """Streams a corpus once to validate it: duplicate ids and the count of empty texts."""

    def __init__(self, source: str):
        self.source = source
        self.count = 0
        self.empty = 0

    def run(self) -> "CorpusCheck":
        seen: dict[str, int] = {}
        for position, doc in enumerate(read_corpus(self.source), start=1):
            if doc.id in seen:
                where = "line" if doc.line else "document"
                raise InputError(
                    f"{self.source}:{doc.line or position}: duplicate document id {doc.id!r} "
                    f"(first seen at {where} {seen[doc.id]})"
                )
            seen[doc.id] = doc.line or position
            self.empty += not doc.text.strip()
        self.count = len(seen)
        return self


def checked_corpus(source: str) -> CorpusCheck:
    """Validate the corpus once before encoding (ids, duplicates) and warn about empty texts."""
    from .cli import warn

    check = CorpusCheck(source).run()
    if check.count == 0:
        raise InputError(f"{source}: corpus has no documents")
    if check.empty:
        warn(f"{check.empty} of {check.count} documents have empty text; they are encoded anyway")
    return check


def input_identity(source: str) -> dict:
    """What manifests record of an input: its resolved path, size and modification time."""
    path = Path(source)
    if path.is_dir():
        path = next((path / n for n in ("corpus.jsonl", "corpus.jsonl.gz") if (path / n).is_file()), path)
    if path.is_file():
        stat = path.stat()
        return {"input": str(path.resolve()), "input_bytes": stat.st_size, "input_mtime_ns": stat.st_mtime_ns}
    return {"input": source}
