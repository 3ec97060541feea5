"""Pyserini's named topics (`--topics msmarco-passage-dev-subset`, `beir-v1.0.0-scifact-test`, ...)
where a topics file is read: a `--topics` value that is no file and no path is handed to Pyserini's
`get_topics`, as Pyserini's own `search` does, and its queries read as a `qid<TAB>text` file's.

Pyserini knows a name by its `topics_mapping` (543 names in Pyserini 1.6); Anserini reads a
topic set from its cache (~/.cache/pyserini/topics-and-qrels) and otherwise downloads it once.
A name Pyserini does not know is left to the caller (an ir_datasets id, say); a known name that
cannot be fetched (offline, no cached copy) is one InputError line saying so. The query text is the
topic's `title` field, the one Pyserini's search reads by default (`--topic-field title`).

Asking Pyserini starts the JVM (core/jvm.py), so a name is asked only once it is no file and reads
as no path; PyTerrier's and the service's query frames never come here.
"""
from __future__ import annotations

import re

from .errors import InputError

TOPIC_FIELD = "title"  # Pyserini's search: --topic-field title
# Pyserini's names: letters, digits, dots, dashes and underscores (no '/', which ir_datasets ids have)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _pyserini():
    """(topics_mapping, get_topics), the JVM started first as this toolkit starts it."""
    from .jvm import start_jvm

    start_jvm()
    from pyserini.search._base import get_topics, topics_mapping

    return topics_mapping, get_topics


def is_named_topics(source: str) -> bool:
    """Whether `source` is one of Pyserini's topics names (starts the JVM when it could be one)."""
    if not isinstance(source, str) or not _NAME.fullmatch(source):
        return False
    try:
        mapping, _ = _pyserini()
    except ImportError:  # pragma: no cover - Pyserini is a dependency
        return False
    return source in mapping


def pyserini_queries(source: str) -> list[tuple[str, str]] | None:
    """`named_topics(source)` when `source` is one of Pyserini's names, else None (the one call
    core/readers.py makes for a `--topics` value that is no file)."""
    return named_topics(source) if is_named_topics(source) else None


def named_topics(name: str) -> list[tuple[str, str]]:
    """(qid, text) of Pyserini's topics `name`, in Pyserini's order; InputError in one line when the
    name is unknown or its topics cannot be fetched."""
    mapping, get_topics = _pyserini()
    if name not in mapping:
        raise InputError(f"{name}: not one of Pyserini's topics names (e.g. msmarco-passage-dev-subset, "
                         f"beir-v1.0.0-scifact-test)")
    try:
        topics = get_topics(name)
    except Exception as err:  # jnius.JavaException (a failed download), OSError, ValueError
        cause = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        cause = re.sub(r"^JVM exception occurred: (java\.\w+\.)*\w+: ", "", cause)
        raise InputError(f"{name}: Pyserini's topics cannot be fetched ({cause}); fetch them once online "
                         f"(they are kept in ~/.cache/pyserini), or give a qid<TAB>text file") from None
    queries = []
    for qid, fields in topics.items():
        text = fields.get(TOPIC_FIELD)
        if text is None:
            text = next((value for value in fields.values() if isinstance(value, str)), "")
        queries.append((str(qid), " ".join(str(text).split())))
    if not queries:
        raise InputError(f"{name}: Pyserini's topics hold no queries")
    return queries
