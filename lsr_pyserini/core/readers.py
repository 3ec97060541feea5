"""Readers for corpora, queries and qrels, with one clear error per bad input.

Every reader yields plain records and raises :class:`InputError` with ``file:line: problem`` on
bad input (any bytes: not UTF-8, a damaged gzip stream, malformed lines), so command-line tools
can print one line and exit non-zero. Files are UTF-8, optionally gzip-compressed (``*.gz``);
``\r\n`` line ends and a byte-order mark are accepted. Ids are strings without whitespace (TREC
files separate fields by whitespace); scores are finite numbers.

Corpus sources: a JSONL or JSONL.GZ file (``_id``/``id``/``docid`` plus ``title``/``text``/
``contents``), a BEIR folder (``corpus.jsonl[.gz]`` inside), or an ``ir_datasets`` id.
Query sources: a ``qid<TAB>text`` TSV file, or an ``ir_datasets`` id. A source that is no file
is taken for an ``ir_datasets`` id (e.g. ``beir/scifact/test``) unless it looks like a path
(it starts with ``/``, ``.`` or ``~``, or ends in ``.jsonl``, ``.gz``, ``.json``, ``.tsv``, ``.txt``).
"""
from __future__ import annotations

import gzip
import json
import logging
import math
import os
import re
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from .errors import InputError
from .hits import Run

log = logging.getLogger(__name__)

ID_FIELDS = ("_id", "id", "docid")
TEXT_FIELDS = ("title", "text", "contents")


@dataclass(frozen=True)
class Document:
    id: str
    text: str  # title and text joined (`document_text`): what is encoded and indexed
    line: int = 0  # line in the source file (0 when the source has no lines)
    title: str = ""  # the record's title alone ("" when it has none), which `text` begins with

    def record(self, **more) -> dict:
        """The shard record of the document: `id`, `title` where it has one (shown apart from the
        text by the search service), `contents`, then `more` (e.g. `vector`)."""
        return {"id": self.id, **({"title": self.title} if self.title else {}), "contents": self.text, **more}


@dataclass(frozen=True)
class Query:
    id: str
    text: str


_PATH_SUFFIXES = (".jsonl", ".gz", ".json", ".tsv", ".txt")
_DECIMAL = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_NON_FINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_JSON_TYPES = {dict: "an object", list: "an array", bool: "true/false", float: "a decimal number"}


def _shown(value: str, limit: int = 40) -> str:
    """``repr`` of a value for a one-line message (escapes included), cut after ``limit`` characters."""
    return repr(value if len(value) <= limit else value[:limit] + "...")


def _open_binary(path: Path):
    try:
        return gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")
    except OSError as err:
        raise InputError(f"{path}: cannot read: {err.strerror or err}") from None


def text_lines(path: Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its end) of a UTF-8 file, gzip-compressed when named ``*.gz``.

    Lines end at ``\\n``, ``\\r\\n`` or a lone ``\\r`` (as Python's text files count them) and a
    leading byte-order mark is dropped. A byte that is not UTF-8 and a damaged gzip stream raise
    InputError naming the line they are on."""
    line_no = 0
    with _open_binary(path) as handle:
        try:
            for raw in handle:
                try:
                    text = raw.decode("utf-8")
                except UnicodeDecodeError as err:
                    bad_line = line_no + 1 + raw.count(b"\r", 0, err.start)
                    raise InputError(f"{path}:{bad_line}: not UTF-8 text (byte {raw[err.start]:#04x})") from None
                if line_no == 0:
                    text = text.removeprefix("\ufeff")
                text = text.removesuffix("\n").removesuffix("\r")
                for line in text.split("\r") if "\r" in text else (text,):
                    line_no += 1
                    yield line_no, line
        except (OSError, EOFError, zlib.error) as err:
            raise InputError(f"{path}:{line_no + 1}: cannot read: {err}") from None


def check_unique(seen: dict, key, position: int, where: str, what: str, unit: str = "line") -> None:
    """InputError ``where: what (first seen at UNIT N)`` when ``key`` was seen at another position."""
    first = seen.setdefault(key, position)
    if first != position:
        raise InputError(f"{where}: {what} (first seen at {unit} {first})")


def _check_unicode(text: str, where: str, what: str) -> None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as err:
        raise InputError(f"{where}: {what} has a lone surrogate {text[err.start]!r} (a \\u escape that is "
                         f"not a character)") from None


def checked_id(value, where: str, what: str) -> str:
    """A document or query id as TREC files hold it: a string or an integer, without whitespace."""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        kind = _JSON_TYPES.get(type(value), type(value).__name__)
        raise InputError(f"{where}: {what} must be a string or an integer, not {kind}")
    text = str(value)
    if not text:
        raise InputError(f"{where}: {what} is empty")
    if text.split() != [text]:
        raise InputError(f"{where}: {what} {_shown(text)} contains whitespace, which TREC files cannot hold")
    _check_unicode(text, where, what)
    return text


def _looks_like_a_path(source: str) -> bool:
    return source.startswith((os.sep, ".", "~")) or source.endswith(_PATH_SUFFIXES)


def _resolve_corpus_file(source: str) -> Path | None:
    path = Path(source)
    if path.is_dir():
        for name in ("corpus.jsonl", "corpus.jsonl.gz"):
            if (path / name).is_file():
                return path / name
        raise InputError(f"{path}: folder has no corpus.jsonl or corpus.jsonl.gz (BEIR layout)")
    if path.exists():
        return path
    if _looks_like_a_path(source):
        raise InputError(f"{source}: no such file or folder")
    return None  # maybe an ir_datasets id, such as beir/scifact


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


def document_title(record: dict) -> str:
    """The record's title stripped ("" when it has none): the start of `document_text`."""
    value = record.get("title")
    return value.strip() if isinstance(value, str) else ""


def _record_document(record: dict, where: str, line_no: int) -> Document:
    doc_id = next((record[f] for f in ID_FIELDS if record.get(f) not in (None, "")), None)
    if doc_id is None:
        raise InputError(f"{where}: missing document id (one of {', '.join(ID_FIELDS)})")
    doc_id = checked_id(doc_id, where, "document id")
    fields = [f for f in TEXT_FIELDS if f in record]
    if not fields:
        raise InputError(f"{where}: no text field (one of {', '.join(TEXT_FIELDS)})")
    for field in fields:
        if record[field] is not None and not isinstance(record[field], str):
            kind = _JSON_TYPES.get(type(record[field]), "a number")
            raise InputError(f"{where}: field {field!r} must be a string, not {kind}")
    text = document_text(record)
    _check_unicode(text, where, "text")
    return Document(doc_id, text, line_no, document_title(record))


def _parse_jsonl_corpus(path: Path) -> Iterator[Document]:
    for line_no, line in text_lines(path):
        if not line.strip():
            continue
        where = f"{path}:{line_no}"
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise InputError(f"{where}: malformed JSON ({err.msg})") from None
        except ValueError:  # an integer longer than Python converts
            raise InputError(f"{where}: malformed JSON (a number with too many digits)") from None
        except RecursionError:
            raise InputError(f"{where}: malformed JSON (nested too deeply)") from None
        if not isinstance(record, dict):
            raise InputError(f"{where}: expected a JSON object")
        yield _record_document(record, where, line_no)


def _ir_datasets(source: str, kind: str):
    try:
        import ir_datasets
    except ImportError:
        raise InputError(f"{source}: no such file or folder, and ir_datasets (for an ir_datasets id) is not "
                         f"installed: pip install 'lsr-pyserini[ir-datasets]'") from None
    try:
        dataset = ir_datasets.load(source)
    except KeyError:
        named = ", Pyserini topics name" if kind == "queries" else ""
        raise InputError(f"{source}: no such file, folder{named} or ir_datasets id") from None
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
    for position, doc in enumerate(_ir_datasets(source, "docs").docs_iter(), start=1):
        where = f"{source}: document {position}"
        fields = doc._asdict()
        text = document_text(fields) or str(getattr(doc, "default_text", lambda: "")())
        _check_unicode(text, where, "text")
        yield Document(checked_id(doc.doc_id, where, "document id"), text, title=document_title(fields))


def _resolve_queries_file(source: str) -> Path | None:
    path = Path(source)
    if path.is_file():
        return path
    if path.exists():
        raise InputError(f"{source}: not a file (expected a qid<TAB>text file)")
    if _looks_like_a_path(source):
        raise InputError(f"{source}: no such file")
    return None  # maybe an ir_datasets id, such as beir/scifact/test


def read_queries(source: str) -> Iterator[Query]:
    """Queries from a ``qid<TAB>text`` TSV file or an ir_datasets id; a query id seen twice is refused;
    a header line first (`query-id<TAB>text`: core/topics.py `is_header`) is skipped with a warning."""
    seen: dict[str, int] = {}
    path = _resolve_queries_file(source)
    if path is not None:
        from .topics import header_warning, is_header

        first = True
        for line_no, line in text_lines(path):
            if not line.strip():
                continue
            where = f"{path}:{line_no}"
            qid, sep, text = line.partition("\t")
            if sep and is_header(qid, first):
                log.warning(header_warning(path, line_no, qid))
                first = False
                continue
            first = False
            if not sep or not qid.strip():
                raise InputError(f"{where}: expected 'qid<TAB>query text'")
            qid = checked_id(qid.strip(), where, "query id")
            check_unique(seen, qid, line_no, where, f"duplicate query id {qid!r}")
            yield Query(qid, text.strip())
        return
    from .named_topics import pyserini_queries  # Pyserini's topics names (msmarco-passage-dev-subset, ...)

    named = pyserini_queries(source)
    if named is not None:
        yield from (Query(qid, text) for qid, text in named)
        return
    for position, query in enumerate(_ir_datasets(source, "queries").queries_iter(), start=1):
        where = f"{source}: query {position}"
        qid = checked_id(query.query_id, where, "query id")
        check_unique(seen, qid, position, where, f"duplicate query id {qid!r}", "query")
        text = (getattr(query, "text", None) or query.default_text()).strip()
        _check_unicode(text, where, "text")
        yield Query(qid, text)


def read_rows(path: str, layout: str) -> Iterator[tuple[int, list[str]]]:
    """(line number, fields) of a whitespace-separated file whose every line reads `layout`."""
    if not Path(path).is_file():
        raise InputError(f"{path}: no such file")
    width = len(layout.split())
    for line_no, line in text_lines(Path(path)):
        fields = line.split()
        if not fields:
            continue
        if len(fields) != width:
            raise InputError(f"{path}:{line_no}: expected '{layout}'")
        yield line_no, fields


def parse_number(path: str, line_no: int, name: str, value: str, kind=float):
    """``value`` as a finite float (an int with ``kind=int``) written in ASCII decimal notation.

    nan, inf, an exponent that overflows, other digits than 0-9 and underscores are refused."""
    where = f"{path}:{line_no}: {name} {_shown(value)}"
    if kind is int:
        if not _INTEGER.fullmatch(value):
            raise InputError(f"{where} is not an integer")
        try:
            return int(value)
        except ValueError:  # more digits than Python converts
            raise InputError(f"{where} has too many digits") from None
    if _DECIMAL.fullmatch(value):
        number = float(value)
        if math.isfinite(number):
            return number
        raise InputError(f"{where} is not a finite number (too large)")
    if _NON_FINITE.fullmatch(value):
        raise InputError(f"{where} is not a finite number")
    raise InputError(f"{where} is not a number")


def read_qrels_rows(path: str) -> list[tuple[int, str, str, int]]:
    """TREC qrels as (line number, qid, docid, relevance) rows; a pair judged twice is refused."""
    rows, seen = [], {}
    for line_no, (qid, _, docid, relevance) in read_rows(path, "qid 0 docid relevance"):
        check_unique(seen, (qid, docid), line_no, f"{path}:{line_no}",
                     f"document {docid!r} is judged twice for query {qid!r}")
        rows.append((line_no, qid, docid, parse_number(path, line_no, "relevance", relevance, int)))
    return rows


def read_qrels(path: str) -> dict[str, dict[str, int]]:
    """TREC qrels ``qid 0 docid relevance`` as {qid: {docid: relevance}}."""
    qrels: dict[str, dict[str, int]] = {}
    for _, qid, docid, relevance in read_qrels_rows(path):
        qrels.setdefault(qid, {})[docid] = relevance
    return qrels


def read_run(path: str) -> Run:
    """TREC run ``qid Q0 docid rank score tag`` as {qid: [(docid, score), ...]} in file order.

    Scores must be finite; a document listed twice for a query is refused (trec_eval refuses it)."""
    run: Run = {}
    seen: dict[tuple[str, str], int] = {}
    for line_no, (qid, _, docid, _, score, _) in read_rows(path, "qid Q0 docid rank score tag"):
        check_unique(seen, (qid, docid), line_no, f"{path}:{line_no}",
                     f"document {docid!r} appears twice for query {qid!r}")
        run.setdefault(qid, []).append((docid, parse_number(path, line_no, "score", score)))
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
            check_unique(seen, doc.id, doc.line or position, f"{self.source}:{doc.line or position}",
                         f"duplicate document id {doc.id!r}", "line" if doc.line else "document")
            self.empty += not doc.text.strip()
        self.count = len(seen)
        return self


def checked_corpus(source: str) -> CorpusCheck:
    """Validate the corpus once before encoding (ids, duplicates) and warn about empty texts."""
    check = CorpusCheck(source).run()
    if check.count == 0:
        raise InputError(f"{source}: corpus has no documents")
    if check.empty:
        log.warning(f"{check.empty} of {check.count} documents have empty text; they are encoded anyway")
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
