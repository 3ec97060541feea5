"""What a topics file is, checked against the index before a search: a run of an impact index
searched with raw query text, or with another encoder's queries, scores nothing meaningful and says
nothing (SciFact's SPLADE-tiny index searched with the raw test queries: nDCG@10 0.2451, not 0.6436).

`encode queries` writes QUERIES.tsv.lsr.json beside its query file (`record_encoded_topics`): what
it wrote (`encoded-queries`), the encoder's settings and a digest of the file, so that a record
outlives no edit of the file. `check_topics` reads it:

- a search that takes encoded queries (`query_kind` "impacts": `lucene search --impact` without
  `--encoder`, `search --encoded`, `seismic search`, `milvus search`) refuses a recorded file of
  another encoder than the index's documents', and an unrecorded file whose lines do not look like
  encoded terms (each term repeated by its impact) unless `allow_unrecorded`;
- a search that encodes query text itself or ranks it with BM25 (`query_kind` "text") refuses a
  recorded file of encoded queries.

Each refusal is one InputError line naming the file and the index; nothing is loaded or written.
"""
from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path

from .errors import InputError

log = logging.getLogger(__name__)

TOPICS_RECORD = ".lsr.json"  # QUERIES.tsv.lsr.json, beside the query file
ENCODED_QUERIES = "encoded-queries"
# the kinds of query an engine takes (its `query_kind`) and a query side makes, defined here only:
# integer impacts {term: int}, text (or a {term: boost} bag for BM25), a float32 vector
IMPACTS, TEXT, VECTOR = "impacts", "text", "vector"
# what a query encoder and the documents' must share for the query's terms to mean the documents'
# (as engines/base.py's QUERY_SIDE; lengths and cuts of one side may differ)
# (`pooling`: SPLADE's max/sum; `pooling_mode`: a dense encoder's cls/mean)
SAME_ENCODER = ("family", "model", "pooling", "pooling_mode")
# total terms / distinct terms of a file's queries at or above which its lines read as encoded
# terms (each term repeated by its integer impact, x100 for most presets): the raw query files of
# ../shared/data give 1.04 (SciFact test), 1.03 (SciFact train), 1.07 (Vaswani), 1.13 (CACM's long
# queries), the sample's 1.0; hand-written impact queries such as `a b b / c / a a b` 1.4
ENCODED_REPETITION = 1.25
UNRECORDED_FLAG = "--unrecorded-topics"
# the id column's name in a header line of a topics TSV (`query-id<TAB>text`, BEIR's and ir_datasets'
# exports, pandas' to_csv): the file's first line with one of these as its id is a header, skipped
# with a warning, not a query
HEADER_IDS = frozenset({"qid", "query-id", "query_id", "queryid", "query", "id", "_id", "topic", "topic_id"})


def is_header(qid: str, first: bool) -> bool:
    """Whether a topics line whose id column reads `qid` is a header (the file's first line only)."""
    return first and qid.strip().lower() in HEADER_IDS


def header_warning(path, line_no: int, qid: str) -> str:
    return f"{path}:{line_no}: {qid.strip()!r} reads as a header (the id column's name), not a query: skipped"


def topics_record_path(topics: str | Path) -> Path:
    topics = Path(topics)
    return topics.with_name(topics.name + TOPICS_RECORD)


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def record_encoded_topics(topics: str | Path, settings: dict, queries: int) -> None:
    """Beside the query file `encode queries` just wrote: what it is, the encoder's `settings` and
    the file's digest (`check_topics` trusts the record only while the file is unchanged)."""
    from .outputs import atomic_write

    topics = Path(topics)
    encoder = {key: value for key, value in settings.items() if isinstance(value, (str, int, float, bool))}
    record = {"kind": ENCODED_QUERIES, "encoder": encoder, "queries": queries, "sha256": _digest(topics)}
    atomic_write(topics_record_path(topics), [json.dumps(record, indent=2) + "\n"])


def topics_record(topics: str | Path) -> dict | None:
    """The record `encode queries` wrote beside `topics`, when it still describes this file."""
    path = topics_record_path(topics)
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict) or record.get("kind") != ENCODED_QUERIES:
        return None
    try:
        if record.get("sha256") != _digest(Path(topics)):
            log.warning(f"{path}: describes an earlier {Path(topics).name} (the file changed since "
                        f"`encode queries` wrote it); not used")
            return None
    except OSError:
        return None
    return record


PACKAGE_REFERENCES = ("python-package:", "gguf-package:")  # a preset's model shipped inside a wheel


def shown_setting(encoder: dict, key: str) -> str:
    """A setting as a message names it: a model shipped inside the package by the preset the user
    typed (`preset 'splade-tiny'`), not by its internal reference (`python-package:cognition/model`)."""
    value = encoder.get(key)
    name = encoder.get("preset") or encoder.get("name")
    if key == "model" and name and str(value).startswith(PACKAGE_REFERENCES):
        return f"preset {name!r}"
    return f"{key} {value!r}"


def describe_encoder(encoder: dict | None) -> str:
    """'splade preset splade-tiny' or 'splade model M' for messages."""
    if not encoder:
        return "an unrecorded encoder"
    parts = [str(encoder.get("family", "?"))]
    if encoder.get("model") is not None:
        parts.append(shown_setting(encoder, "model").replace("'", ""))
    if encoder.get("pooling") not in (None, "max"):
        parts.append(f"pooling {encoder['pooling']}")
    if encoder.get("pooling_mode") is not None:
        parts.append(f"pooling_mode {encoder['pooling_mode']}")
    return " ".join(parts)


def encoder_argument(encoder: dict | None) -> str:
    """What `--encoder` takes to encode as `encoder` did: its preset's name, its checkpoint folder, else ENCODER."""
    from .presets import available_presets

    encoder = encoder or {}
    name, model = encoder.get("preset") or encoder.get("name"), encoder.get("model")
    if name and (model is None or str(model).startswith(PACKAGE_REFERENCES) or name in available_presets()):
        return str(name)
    return str(model) if model is not None and Path(str(model)).is_dir() else "ENCODER"


def same_setting(key: str, recorded, given) -> bool:
    """Whether a recorded document-side setting equals the query encoder's (models by their folder)."""
    if key != "model" or recorded == given:
        return recorded == given
    from .presets import resolve_model

    try:
        return Path(resolve_model(str(recorded))).resolve() == Path(resolve_model(str(given))).resolve()
    except InputError:
        return False


def other_encoder_key(documents: dict, queries: dict, keys: tuple[str, ...] = SAME_ENCODER) -> str | None:
    """The first setting of `keys` both record and that differs (None: the same encoder); records of
    before are read in today's names first (core/records.py)."""
    from .records import current_record

    documents, queries = current_record(documents), current_record(queries)
    for key in keys:
        if key in documents and key in queries and not same_setting(key, documents[key], queries[key]):
            return key
    return None


def repetition(lines: list[str]) -> float:
    """Total terms / distinct terms per query, over the file: 1 for text, the mean impact for encoded queries."""
    total = distinct = 0
    for line in lines:
        terms = line.partition("\t")[2].split()
        total, distinct = total + len(terms), distinct + len(set(terms))
    return total / distinct if distinct else 1.0


def _first_query(lines: list[str]) -> str:
    for line_no, line in enumerate(lines, start=1):
        text = line.partition("\t")[2].strip()
        if text:
            return f"line {line_no}: {text[:40]!r}{'...' if len(text) > 40 else ''}"
    return "no query text"


def check_topics(path: str | Path, document_side: dict | None, query_kind: str, allow_unrecorded: bool = False,
                 index: str = "the index") -> None:
    """Refuse, in one InputError line naming `path` and `index`, a topics file that does not fit the
    search: `query_kind` IMPACTS (the file is searched as encoded queries) or TEXT (the searcher
    encodes or BM25-ranks query text); `document_side`: the encoder the index's documents were
    encoded with, where it records one. A path that is not a file (a Pyserini topics name) is left
    to the searcher. `allow_unrecorded`: search an unrecorded file that reads as text anyway."""
    path = Path(path)
    if not path.is_file():
        return
    record = topics_record(path)
    if query_kind == TEXT:
        if record is not None:
            raise InputError(f"{path} holds queries already encoded by `encode queries` "
                             f"({describe_encoder(record.get('encoder'))}), but {index} is searched with query "
                             f"text here: give the query text file, or search the encoded file as impacts "
                             f"(`lucene search --impact` without --encoder, `search --encoded`)")
        return
    if record is not None:
        queries = record.get("encoder") or {}
        key = other_encoder_key(document_side or {}, queries)
        if key is not None:
            raise InputError(f"{path} holds queries encoded with {describe_encoder(queries)}, but {index}'s "
                             f"documents were encoded with {describe_encoder(document_side)} ({key} differs): "
                             f"encode the queries with the documents' encoder")
        return
    with open(path, encoding="utf-8", errors="replace") as handle:
        lines = [line for line in handle if line.strip()]
    if not any(line.partition("\t")[2].strip() for line in lines) or any("\t" not in line for line in lines):
        return  # no query, or a line that is not qid<TAB>...: the search's reader names it
    if repetition(lines) >= ENCODED_REPETITION:
        log.warning(f"{path}: no record of `encode queries` beside it ({topics_record_path(path).name}); "
                    f"its encoder cannot be checked against {index}'s")
        return
    if allow_unrecorded:
        return
    documents = f" of {describe_encoder(document_side)}" if document_side else ""
    raise InputError(f"{path} reads as query text ({_first_query(lines)}), not as the queries `encode queries` "
                     f"writes, but {index} is searched with impacts{documents}: encode the queries first "
                     f"(`python -m lsr_pyserini.encode queries --encoder {encoder_argument(document_side)} --input {path} "
                     f"--output QUERIES.tsv`), or give "
                     f"{UNRECORDED_FLAG} to search this file as it is")
