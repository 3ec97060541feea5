"""The REST routes of Pyserini 2 and Anserini's REST server, beside the Pyserini 1.6 routes of
rest.py and over the same backend, micro-batcher, keys and bounds:

    GET /v1/{index}/search?query=TEXT&hits=10&parse=true&max_doc_length=N
        {"api": "v1", "index", "query": {"text"}, "candidates": [{"docid", "score", "rank", "doc"}]}
    GET /v1/{index}/doc/{docid}?parse=true&max_doc_length=N
        {"api": "v1", "index", "docid", "doc"}

Matched against Pyserini 2.3: `pyserini/server/rest/routes/v1.py` (the parameters, their defaults
and refusals), `pyserini/server/rest/openapi.yaml` (the response models SearchResponse,
DocumentResponse and ErrorResponse, which it shares with Anserini's server),
`pyserini/server/document_format.py` (`parse`, `max_doc_length`) and `pyserini/server/rest/app.py`
(keys as `X-API-Key` or a bearer token; 401 and 429 bodies).

`doc`: this toolkit keeps each document's text, not Lucene's raw JSON, and takes the document to be
`{"id": docid, "contents": text}`. With `parse=true` (the default) it is what Pyserini's formatting
gives for that JSON, the text (cut to `max_doc_length` characters when given); with `parse=false`
the JSON as a string. An index that keeps no texts answers `"doc": null` in its hits.

Refusals are Pyserini 2's, `{"error": message}`: 400 (a parameter missing, not a number, out of
this service's bounds, `max_doc_length` with `parse=false`; an index not served here, or an index
that keeps no texts asked for a document), 401 (a missing or wrong key), 404 (a document not in the
index), 429 with `Retry-After` (the index's queue is full), and 503 with `Retry-After` while the
service is still loading (a state Pyserini 2 does not have). `k1` and `b` (Pyserini 2's BM25
settings per request) are refused: a served index searches with its configured settings.
"""

import json
from typing import Annotated, Optional

import anyio
from fastapi import Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field
from pydantic_core import PydanticCustomError

from ..core.errors import InputError, NotFound
from .backend import Backend, NotReady
from .batching import Overloaded
from .rest import RETRY_AFTER_SECONDS, Refusal, check_key, json_body
from .schemas import DOCID_CHARS, INDEX_NAME_CHARS, not_blank

API = "v1"
UNSUPPORTED = ("k1", "b")  # Pyserini 2's per-request BM25 settings


class ErrorResponse(BaseModel):
    error: str


class QueryText(BaseModel):
    text: str


class Candidate(BaseModel):
    docid: str
    score: float
    rank: int = Field(ge=1)
    doc: Optional[str] = Field(description="the document's text (parse=true, cut to max_doc_length) or its JSON "
                                           "as a string (parse=false); null where the index keeps no texts")


class SearchResponse(BaseModel):
    api: str = API
    index: str
    query: QueryText
    candidates: list[Candidate]


class DocumentResponse(BaseModel):
    api: str = API
    index: str
    docid: str
    doc: Optional[str]


def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


def true_or_false(value):
    """`parse`: 'true' or 'false' in any case, as Pyserini 2's `_parse_bool` reads it (not 1, yes, on)."""
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise PydanticCustomError("bool_parsing", "must be 'true' or 'false'")


def parameter_message(problem: dict) -> str:
    """A failed parameter in Pyserini 2's words where it has them ('Parameter 'hits' must be positive')."""
    location = problem.get("loc", ())
    name, kind, limits = str(location[-1]) if location else "query", problem.get("type", ""), problem.get("ctx") or {}
    said = "Path parameter" if location[:1] == ("path",) else "Parameter"
    if kind == "missing" or (name == "query" and kind in ("string_too_short", "too_short", "string_blank")):
        return f"{said} '{name}' is required"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"{said} '{name}' must be an integer"
    if kind == "greater_than_equal" and limits.get("ge") == 1:
        return f"{said} '{name}' must be positive"
    if kind == "less_than_equal":
        return f"{said} '{name}' must be at most {limits.get('le')}"
    if kind == "bool_parsing":
        return f"{said} '{name}' must be 'true' or 'false'"
    if kind in ("string_too_long", "too_long"):
        return f"{said} '{name}' must be at most {limits.get('max_length')} characters"
    return f"{said} '{name}': {problem.get('msg', 'invalid')}"


def refused(err: Exception) -> JSONResponse | None:
    """The Pyserini 2 answer to a refusal raised on its routes (None: not a refusal)."""
    if isinstance(err, RequestValidationError):
        problems = err.errors()
        return error(400, parameter_message(problems[0] if problems else {}))
    if isinstance(err, Refusal):
        return error(400 if err.status == 422 else err.status, err.detail, err.headers)
    if isinstance(err, InputError):  # NotFound of an index included: Pyserini 2's IndexNotAvailableError, 400
        return error(400, str(err).splitlines()[0] if str(err) else type(err).__name__)
    if isinstance(err, Overloaded):
        return error(429, "the service is at capacity: retry shortly", {"Retry-After": RETRY_AFTER_SECONDS})
    if isinstance(err, NotReady):
        return error(503, "the service is still loading its indexes", {"Retry-After": RETRY_AFTER_SECONDS})
    return None


class Pyserini2Route(APIRoute):
    """A route whose refusals (its parameters', its key check's and the backend's) are Pyserini 2's
    `{"error": ...}` with its status codes, not the Pyserini 1.6 routes' `{"detail", "field"}`."""

    def get_route_handler(self):
        handle = super().get_route_handler()

        async def answer(request: Request):
            try:
                return await handle(request)
            except Exception as err:
                response = refused(err)
                if response is None:
                    raise
                return response

        return answer


def document_payload(docid: str, text: str | None, parse: bool, max_doc_length: int | None) -> str | None:
    """`doc` of a document `{"id": docid, "contents": text}`, as Pyserini 2's `format_lucene_document`
    and `truncate_document_payload` give it."""
    if text is None:
        return None
    if not parse:
        return json.dumps({"id": docid, "contents": text}, ensure_ascii=False)
    return text[:max_doc_length] if max_doc_length is not None else text


ERRORS = {400: {"model": ErrorResponse}, 401: {"model": ErrorResponse}, 404: {"model": ErrorResponse},
          429: {"model": ErrorResponse, "headers": {"Retry-After": {"schema": {"type": "integer"}}}},
          503: {"model": ErrorResponse}}


def add_routes(app: FastAPI, backend: Backend) -> None:
    """Add GET /v1/{index}/search and GET /v1/{index}/doc/{docid} to `app` (after the Pyserini 1.6
    routes, which answer first where both match: no index is named `indexes`)."""
    config = backend.config

    async def authorised(request: Request) -> None:  # async: no thread-pool hop (rest.py, json_content)
        check_key(config, request.headers)

    def checked(request: Request, parse: bool, max_doc_length: int | None) -> None:
        for name in UNSUPPORTED:
            if name in request.query_params:
                raise Refusal(400, f"Parameter '{name}' is not supported here: each index searches with its "
                                   "configured settings")
        if max_doc_length is not None and not parse:
            raise Refusal(400, "Parameter 'max_doc_length' requires parse=true")

    Index = Annotated[str, Path(description="a configured index name", max_length=INDEX_NAME_CHARS)]
    # the validators inside Annotated with the Query: FastAPI keeps them there (not beside a default)
    Parse = Annotated[bool, BeforeValidator(true_or_false),
                      Query(description='true: the document\'s text; false: its JSON {"id", "contents"} as a string')]
    MaxDocLength = Annotated[Optional[int], Query(ge=1, description="cut each text to this many characters "
                                                                    "(parse=true only)")]
    QueryText = Annotated[str, AfterValidator(not_blank),
                          Query(min_length=1, max_length=config.max_query_chars, description="the query",
                                json_schema_extra={"pattern": r"\S"})]
    Hits = Annotated[int, Query(ge=1, le=config.max_hits, description="how many hits")]
    options = {"dependencies": [Depends(authorised)], "responses": ERRORS, "tags": ["v1 (Pyserini 2, Anserini)"]}
    router = app.router
    previous, router.route_class = router.route_class, Pyserini2Route
    try:
        @app.get(f"/{API}/{{index}}/search", response_model=SearchResponse, **options)
        async def search_v1(request: Request, index: Index, query: QueryText, hits: Hits = 10, parse: Parse = True,
                            max_doc_length: MaxDocLength = None):
            checked(request, parse, max_doc_length)
            has_texts = backend.slot(index).has_texts
            found = await backend.search(index, query, hits)
            return json_body({"api": API, "index": index, "query": {"text": query}, "candidates": [
                {"docid": hit["docid"], "score": hit["score"], "rank": rank,
                 "doc": document_payload(hit["docid"], hit["document_txt"] if has_texts else None, parse,
                                         max_doc_length)}
                for rank, hit in enumerate(found["candidates"], 1)]})

        @app.get(f"/{API}/{{index}}/doc/{{docid}}", response_model=DocumentResponse, **options)
        async def get_document_v1(request: Request, index: Index,
                                  docid: Annotated[str, Path(description="a document's id", max_length=DOCID_CHARS)],
                                  parse: Parse = True, max_doc_length: MaxDocLength = None):
            checked(request, parse, max_doc_length)
            try:
                document = await anyio.to_thread.run_sync(backend.document, index, docid)
            except NotFound as err:
                if getattr(err, "field", None) == "docid":
                    return error(404, f"Document not found: {docid}")
                raise
            return json_body({"api": API, "index": index, "docid": docid,
                              "doc": document_payload(docid, document["contents"], parse, max_doc_length)})
    finally:
        router.route_class = previous
    schema_of = app.openapi

    def openapi() -> dict:
        """The schema without FastAPI's 422 on these routes: their refusals are 400, as Pyserini 2's."""
        if app.openapi_schema is None:
            for path, operations in schema_of()["paths"].items():
                if path.startswith(f"/{API}/{{index}}/"):
                    operations["get"]["responses"].pop("422", None)
        return app.openapi_schema

    app.openapi = openapi
