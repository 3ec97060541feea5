"""The MCP front end: Pyserini's MCP tools (`pyserini.server.mcp.tools`; the same names and
argument names for what both do) over the backend the REST routes use, plus `explain`.

    search(query, index_name, k)             [{rank, docid, score, text, title}]  (title: null where none)
    get_document(docid, index_name)          {docid, text, title}
    list_indexes(index_type)                 [names]   (index_type impact|tf|dense, or all)
    get_index(index_name)                    the index's status (as GET /v1/indexes/{name}/status)
    explain(query, index_name, docids | k)   [{docid, rank, score, explained, terms: [{term,
                                             query_weight, document_weight, contribution}]}]
    fuse_search_results(results1, results2, hits)          [{docid, score}]
    get_qrels(index_name, query_id)                        {docid: relevance}
    eval_hits(index_name, metric, query_id, hits, cutoff)  the metric's value

The last three are Pyserini 2.3's (`pyserini/server/mcp/tools.py`, `extension.py`, `utils.py`
EVAL_METRICS): the same names, argument names and defaults. fuse_search_results fuses with the
toolkit's fusion (core/fusion.py): each document's score is the mean of its min-max normalised
scores in the two lists (a list's lowest where it is absent); Pyserini's centred normalisation gives
twice that less one, the same order. get_qrels and eval_hits read the qrels of the index's config
entry (`qrels: PATH`); eval_hits runs trec_eval (core/evaluation.py) with Pyserini's arguments for
ndcg, recall, map or recip_rank at the cutoff.

Queries go through the backend's micro-batcher, as REST queries do, under the same bounds (k up to
`max_hits`, queries up to `max_query_chars`). Every refusal is a ToolError of one line (an unknown
index or document, an argument out of bounds, a full queue); an unexpected failure reaches the
client as "Error calling tool NAME" only, its traceback in the service's log.
"""
import functools
import logging
from typing import Annotated, Any, Literal, Optional, Union

import anyio
from fastmcp import FastMCP
from fastmcp.exceptions import ToolError
from fastmcp.exceptions import ValidationError as ArgumentsError
from fastmcp.server.middleware import Middleware
from pydantic import BaseModel, Field
from pydantic import ValidationError as PydanticValidationError

from .. import __version__
from ..core.errors import InputError
from ..core.evaluation import CUTOFF_METRICS
from ..core.fusion import fuse
from .backend import Backend, NotReady
from .batching import Overloaded
from .schemas import DOCID_CHARS, INDEX_NAME_CHARS, QID_CHARS, TermContribution, is_union_tag

logger = logging.getLogger(__name__)
READ_ONLY = {"readOnlyHint": True, "idempotentHint": True, "openWorldHint": False}


class QueryObject(BaseModel):
    """A query as Pyserini's MCP `search` takes it."""

    query_txt: str
    qid: str = ""


Title = Annotated[Optional[str], Field(description="the document's title alone, where the index keeps it apart "
                                                  "(what the toolkit writes begins the text with it)")]


class SearchHit(BaseModel):
    rank: int
    docid: str
    score: float
    text: str = Field(description="the document's text ('' where the index keeps none)")
    title: Title = None


class Document(BaseModel):
    docid: str
    text: str
    title: Title = None


class ExplainedHit(BaseModel):
    docid: str
    rank: Optional[int] = Field(None, description="its rank in the top k (None for a docid given)")
    score: Optional[float] = Field(None, description="its score (None for a given docid of a re-ranked index)")
    first_stage_score: Optional[float] = Field(None, description="the first stage's score, when re-ranked")
    explained: str = Field(description="what the terms explain: 'score', or 'first_stage' for a re-ranked index")
    terms: list[TermContribution] = Field(description="the matching terms, largest contribution first")


class ScoredDocument(BaseModel):
    """A search result as Pyserini's fuse_search_results takes and gives it (its DenseSearchResult)."""

    docid: str
    score: float


def refusal(message: str) -> ToolError:
    return ToolError(message, log_level=logging.DEBUG)  # the client's mistake, not the service's


def refusals(tool):
    """The backend's refusals as one-line ToolErrors."""

    @functools.wraps(tool)
    async def wrapped(*args, **kwargs):
        try:
            return await tool(*args, **kwargs)
        except InputError as err:  # NotFound included: unknown index or document, bad query
            raise refusal(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
        except NotReady:
            raise refusal("the service is still loading its indexes: retry shortly") from None
        except Overloaded:
            raise refusal("the service is at capacity: retry shortly") from None

    return wrapped


class OneLineArgumentErrors(Middleware):
    """An argument that fails the tool's schema as one line ('k: Input should be ...'), not
    pydantic's several lines with a link."""

    async def on_call_tool(self, context, call_next):
        try:
            return await call_next(context)
        except ArgumentsError as err:
            cause = err.__cause__
            if not isinstance(cause, PydanticValidationError) or not cause.errors():
                raise refusal(str(err).splitlines()[0]) from None
            first = cause.errors()[0]
            where = [str(part) for part in first.get("loc", ()) if not is_union_tag(part)]
            raise refusal(f"{'.'.join(where) or 'arguments'}: {first.get('msg', 'invalid')}") from None


def create_mcp(backend: Backend) -> FastMCP:
    """The MCP server of `backend`'s indexes (its tools call the backend; nothing is loaded here)."""
    config = backend.config
    names = backend.names()
    default_index = names[0]
    mcp = FastMCP("lsr-pyserini", version=__version__, mask_error_details=True,
                  middleware=[OneLineArgumentErrors()],
                  instructions=f"Learned sparse (and BM25) retrieval over the indexes {', '.join(names)}: "
                               "search them, read a document, and explain why a document matched.")

    QueryText = Annotated[str, Field(min_length=1, max_length=config.max_query_chars)]
    Query = Annotated[Union[QueryText, QueryObject],
                      Field(description='the query text, or Pyserini\'s {"qid": "...", "query_txt": "..."}')]
    IndexName = Annotated[str, Field(description=f"a served index (list_indexes): {', '.join(names)}",
                                     max_length=INDEX_NAME_CHARS)]
    K = Annotated[int, Field(ge=1, le=config.max_hits, description="how many results")]

    def text_of(query) -> tuple[str, str]:
        if isinstance(query, QueryObject):
            text, qid = query.query_txt, query.qid
        else:
            text, qid = query, ""
        if not text.strip():  # spaces alone: refused like an empty query, as the REST routes do
            raise refusal("query: the query text is empty" if not text else "query: the query text is white space alone")
        if len(text) > config.max_query_chars:
            raise refusal(f"query: longer than {config.max_query_chars} characters")
        return text, qid

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def search(query: Query, index_name: IndexName = default_index, k: K = 10) -> list[SearchHit]:
        """Search an index and return its top k documents, best first: rank, docid, score and text."""
        text, qid = text_of(query)
        found = await backend.search(index_name, text, k, qid)
        return [SearchHit(rank=rank, docid=hit["docid"], score=hit["score"], text=hit["document_txt"],
                          title=hit.get("title"))
                for rank, hit in enumerate(found["candidates"], 1)]

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def get_document(docid: Annotated[str, Field(min_length=1, max_length=DOCID_CHARS)],
                           index_name: IndexName) -> Document:
        """Retrieve the full text of a document by its ID from a given index."""
        document = await anyio.to_thread.run_sync(backend.document, index_name, docid)
        return Document(docid=document["id"], text=document["contents"], title=document.get("title"))

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def list_indexes(index_type: Annotated[Optional[Literal["impact", "tf", "dense"]], Field(
            description="only indexes of this kind: impact (learned sparse), tf (BM25) or dense; "
                        "omit for all")] = None) -> list[str]:
        """List the indexes this service searches (of one kind, or all)."""
        if index_type is None:
            return names
        if not backend.ready:
            raise NotReady()
        return [name for name in names if backend.kind(name) == index_type]

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def get_index(index_name: IndexName) -> dict[str, Any]:
        """Get an index's details: kind, engine, encoder, documents, size, version and load time."""
        return await anyio.to_thread.run_sync(backend.status, index_name)

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def explain(query: Query, index_name: IndexName = default_index,
                      docids: Annotated[Optional[list[Annotated[str, Field(min_length=1, max_length=DOCID_CHARS)]]], Field(
                          description="explain these documents (ranked or not); omit to explain the top k",
                          min_length=1, max_length=config.max_hits)] = None,
                      k: K = 10) -> list[ExplainedHit]:
        """Why documents match a query: each one's matching terms, with the query's weight, the
        document's weight and the term's contribution to the score (largest first). Explains the
        top k, or the documents named in `docids`."""
        text, qid = text_of(query)
        if docids is None:
            found = await backend.search(index_name, text, k, qid, explain=True)
            return [ExplainedHit(docid=hit["docid"], rank=rank, score=hit["score"],
                                 first_stage_score=hit.get("first_stage_score"), explained=hit["explained"],
                                 terms=hit["terms"])
                    for rank, hit in enumerate(found["candidates"], 1)]
        explained = await anyio.to_thread.run_sync(backend.explain, index_name, text,
                                                   list(dict.fromkeys(docids)))
        return [ExplainedHit(**hit) for hit in explained]

    DocId = Annotated[str, Field(min_length=1, max_length=DOCID_CHARS, pattern=r"^\S+$")]
    Score = Annotated[float, Field(allow_inf_nan=False)]
    Results = Annotated[list[ScoredDocument], Field(
        max_length=config.max_hits, description='search results, [{"docid": ..., "score": ...}]')]
    QueryId = Annotated[str, Field(min_length=1, max_length=QID_CHARS, pattern=r"^\S+$", description="a query's id")]
    Cutoff = Annotated[int, Field(ge=1, le=config.max_hits, description="the rank cut-off")]

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def fuse_search_results(results1: Results, results2: Results, hits: K = 10) -> list[ScoredDocument]:
        """Fuse two lists of search results (each [{docid, score}], of one query) into one, best
        first: each document scores the mean of its min-max normalised scores in the two lists (a
        list's lowest where the list lacks it). Returns the top `hits`."""
        runs = [{"q": [(result.docid, result.score) for result in results]} for results in (results1, results2)]
        fused = fuse(runs, method="minmax", depth=hits, names=["results1", "results2"])
        return [ScoredDocument(docid=docid, score=score) for docid, score in fused["q"]]

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def get_qrels(index_name: IndexName, query_id: QueryId) -> dict[str, str]:
        """The relevance judgements of a query for an index, {docid: relevance} ({} for a query not
        judged); from the qrels file the index is configured with."""
        return {docid: str(relevance) for docid, relevance in backend.qrels(index_name).get(query_id, {}).items()}

    @mcp.tool(annotations=READ_ONLY)
    @refusals
    async def eval_hits(index_name: IndexName,
                        metric: Annotated[Literal[tuple(CUTOFF_METRICS)], Field(
                            description=f"the measure: {', '.join(CUTOFF_METRICS)}")],
                        query_id: QueryId,
                        hits: Annotated[dict[DocId, Score], Field(
                            max_length=config.max_hits, description='the search results, {"docid": score}')],
                        cutoff: Cutoff = 10) -> float:
        """Evaluate one query's search results ({docid: score}) against the index's qrels with trec_eval:
        ndcg, recall, map or recip_rank at the cutoff."""
        return await anyio.to_thread.run_sync(backend.evaluate, index_name, metric, query_id, hits, cutoff)

    return mcp


