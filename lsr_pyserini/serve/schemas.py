"""The service's fixed limits and the pieces of request and response schema its front ends share
(rest.py, rest_pyserini2.py, mcp.py, and the index names of served.py): one place for each, so the
REST routes, Pyserini 2's routes and the MCP tools refuse the same things.

    INDEX_NAME_CHARS  64   an index name (the served config's names, every route's and tool's index)
    DOCID_CHARS       512  a document id (documents routes, explain's docids, eval_hits' hits)
    QID_CHARS         256  a query id (search and batch `qid`, get_qrels / eval_hits `query_id`)

The limits a service sets for itself (hits, query characters, batch size, body bytes) are
`ServiceConfig`'s fields (served.py), read by the same front ends.
"""
from __future__ import annotations

from pydantic import BaseModel, Field
from pydantic_core import PydanticCustomError

INDEX_NAME_CHARS = 64
DOCID_CHARS = 512
QID_CHARS = 256


class TermContribution(BaseModel):
    """One matching term of a hit (core.hits.TermMatch), in REST and MCP answers alike."""

    term: str
    query_weight: float
    document_weight: float
    contribution: float = Field(description="this term's part of the score")


def not_blank(value: str) -> str:
    """A query text's validator: spaces alone are refused like an empty query (they matched nothing,
    or ten arbitrary documents)."""
    if not value.strip():
        raise PydanticCustomError("string_blank", "String should have a character other than white space")
    return value


def is_union_tag(part) -> bool:
    """Whether a pydantic error location part names a member of a union ('constrained-str',
    'QueryObject', 'list[...]') rather than a field or a position."""
    return isinstance(part, str) and (part in ("str", "int", "list") or "-" in part or "[" in part
                                      or part[:1].isupper())
