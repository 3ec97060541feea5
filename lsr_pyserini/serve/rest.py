"""The REST front end: Pyserini 1.6's server routes (`pyserini.server.rest`, wire-compatible for what
both do) over the backend, plus explanations, a batch route, health, readiness and admin reload
(Pyserini 2's and Anserini's GET routes, with their own refusals, are in rest_pyserini2.py; the
fixed limits and the schema parts the front ends share are in schemas.py).

    POST /v1/indexes/{name}/search     {"query", "hits", "qid", "explain"} -> {"query", "candidates", "took_ms"}
    POST /v1/indexes/{name}/batch      {"queries": [{"qid", "query"}], "hits", "explain"} -> {"results": [...]}
    GET  /v1/indexes/{name}/documents/{docid}   {"id", "contents"[, "title"]}
    GET  /v1/indexes/{name}/status     {"downloaded", "size_bytes", ...}
    GET  /v1/indexes[/]                [names]  (?index_type=impact|tf|dense filters, as Pyserini's)
    POST /v1/indexes/{name}/reload     admin: a new version from the configured path, switched atomically
    GET  /healthz  /readyz  /docs  /redoc  /openapi.json  /   (the search page)

Every refusal is JSON `{"detail": message, "field": name-or-null}`: 400 (a body that is not text),
401 (a missing or wrong key, sent as `Authorization: Bearer KEY` or `X-API-Key: KEY`; admin routes
of a service without keys), 404 (unknown index or document), 413 (body), 415 (a body declared as
another type than JSON), 422 (a field out of bounds, a query of white space alone, or a body not
JSON: `body`, with the line and column), 503 (queue full or still loading, with Retry-After).
"""

import hmac
import json
import logging
from importlib import resources
from typing import Annotated, Literal, Optional, Union

from fastapi import Body, Depends, FastAPI, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from fastapi_offline import FastAPIOffline
from pydantic import AfterValidator, BaseModel, BeforeValidator, Field, StrictBool, create_model
from pydantic_core import PydanticCustomError
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..core.errors import InputError, NotFound
from .backend import Backend, NotReady
from .batching import Overloaded
from .served import ServiceConfig
from .schemas import DOCID_CHARS, INDEX_NAME_CHARS, QID_CHARS, TermContribution, is_union_tag, not_blank

logger = logging.getLogger(__name__)
VERSION = "v1"
RETRY_AFTER_SECONDS = "1"


class Refusal(Exception):
    def __init__(self, status: int, detail: str, field: str | None = None, headers: dict | None = None):
        super().__init__(detail)
        self.status, self.detail, self.field, self.headers = status, detail, field, headers


class ErrorBody(BaseModel):
    detail: str
    field: Optional[str] = None


class QueryInfo(BaseModel):
    qid: str
    query_txt: str


class Candidate(BaseModel):
    docid: str
    score: float
    document_txt: str
    title: Optional[str] = Field(None, description="the document's title alone, where the index keeps it apart "
                                                   "(in what the toolkit writes, document_txt begins with it)")
    terms: Optional[list[TermContribution]] = None
    explained: Optional[str] = None
    first_stage_score: Optional[float] = None


class QueryTerm(BaseModel):
    term: str
    weight: float


class Hits(BaseModel):
    query: QueryInfo
    candidates: list[Candidate]
    took_ms: float
    query_terms: Optional[list[QueryTerm]] = Field(
        None, description="with explain, the query's own terms and weights as searched (impact and boosted queries)")


class BatchHits(BaseModel):
    results: list[Hits]
    took_ms: float


class IndexStatus(BaseModel):
    downloaded: bool
    size_bytes: str
    name: str
    kind: str
    engine: str
    encoder: Optional[str] = None
    reranker: Optional[str] = None
    documents: Optional[int] = None
    version: int
    loaded_at: str
    load_seconds: float
    queue_depth: int
    batches: int
    queries: int
    has_texts: bool


class Reloaded(BaseModel):
    name: str
    version: int
    load_seconds: float


def json_integer(value):
    """A JSON number only (pydantic's lax int would take true, false and "10" too)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PydanticCustomError("int_type", "Input should be a valid integer")
    return value


def json_position(text, position: int) -> str:
    """'line L, column C' of a character offset into the body (the offset alone if no text)."""
    if not isinstance(text, (str, bytes)):
        return f"character {position + 1}"
    text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    line = text.count("\n", 0, position) + 1
    return f"line {line}, column {position - (text.rfind(chr(10), 0, position) + 1) + 1}"


JSON_TYPES = ("application/json",)


async def json_content(request: Request) -> None:
    """415 for a body declared as another content type than JSON (a form, text) or as none: FastAPI
    read it as no fields at all, and refused it with a 422 about 'a valid dictionary'. Async, as
    every dependency here: FastAPI runs a plain `def` dependency on its thread pool (a thread hop
    each, a few tenths of a millisecond a request at one client)."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media not in JSON_TYPES and not media.endswith("+json"):  # none: FastAPI reads no JSON either
        raise Refusal(415, "body: send JSON with 'Content-Type: application/json', not "
                           + (repr(media) if media else "a body without a Content-Type"), "body")


def request_models(config: ServiceConfig):
    """The request bodies with this service's bounds in their schema (so /docs and schemathesis see them)."""
    # a query of spaces alone is refused like an empty one (it matched nothing, or ten arbitrary documents)
    text = Annotated[str, Field(min_length=1, max_length=config.max_query_chars, json_schema_extra={"pattern": r"\S"}),
                     AfterValidator(not_blank)]
    query_text = (text, ...)
    qid = (str, Field("", max_length=QID_CHARS))
    hits = (Annotated[int, BeforeValidator(json_integer)], Field(10, ge=1, le=config.max_hits))
    explain = (StrictBool, False)  # JSON true/false only (not 0, 1 or "yes"), as the schema says
    query_object = create_model("QueryObject", query_txt=query_text, qid=qid)
    search = create_model("SearchParams", query=(Union[text, query_object], ...), hits=hits, qid=qid,
                          explain=explain)
    batch_query = create_model("BatchQuery", query=query_text, qid=qid)
    batch = create_model("BatchParams", queries=(list[batch_query], Field(..., min_length=1,
                                                                          max_length=config.max_batch_queries)),
                         hits=hits, explain=explain)
    return search, batch


def check_key(config: ServiceConfig, headers) -> None:
    """A 401 Refusal unless keys are off, or the request's `headers` (a mapping with lower-case
    names) carry this service's key as `Authorization: Bearer KEY` or as `X-API-Key: KEY` (either
    one matching will do, as Pyserini 2's `pyserini/server/rest/app.py` `_extract_api_tokens`
    reads them); the REST routes' dependency and the /mcp endpoint's check."""
    if config.api_key is None:
        return
    expected = config.api_key.encode()
    scheme, _, token = headers.get("authorization", "").partition(" ")
    offered = [headers.get("x-api-key", "").strip()] + ([token.strip()] if scheme.lower() == "bearer" else [])
    # every offered key is compared (no early exit), each in constant time
    if not sum(hmac.compare_digest(key.encode(), expected) for key in offered if key):
        raise Refusal(401, "missing or wrong API key (Authorization: Bearer KEY, or X-API-Key: KEY)",
                      "authorization", {"WWW-Authenticate": "Bearer"})


def json_body(content: dict) -> Response:
    """A search answer as it is: the backend builds exactly the response model's fields, so FastAPI's
    validation and serialisation of every candidate (about a millisecond for ten texts) is skipped;
    `response_model` still documents the shape, and tests/serve/test_serve_schema.py checks it."""
    return Response(json.dumps(content, ensure_ascii=False, allow_nan=False), media_type="application/json")


def refusal_body(status: int, detail: str, field: str | None = None, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"detail": detail, "field": field}, status_code=status, headers=headers)


class BodyLimit:
    """413 for a request body over `limit` bytes, before any of it reaches a route."""

    def __init__(self, app, limit: int):
        self.app, self.limit = app, limit

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http" or scope["method"] not in ("POST", "PUT", "PATCH"):
            return await self.app(scope, receive, send)
        declared = dict(scope["headers"]).get(b"content-length")
        too_large = refusal_body(413, f"request body over {self.limit} bytes", "body")
        if declared is not None and declared.isdigit() and int(declared) > self.limit:
            return await too_large(scope, receive, send)
        body, more = b"", True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            more = message.get("more_body", False)
            if len(body) > self.limit:
                return await too_large(scope, receive, send)
        replayed = False

        async def replay():
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()

        return await self.app(scope, replay, send)


def field_of(error: dict) -> str:
    """The request field an error is about: its location without the part ('body') and without the
    names pydantic gives the branches of a union."""
    location = [str(part) for part in error.get("loc", ())[1:] if not is_union_tag(part)]
    return ".".join(location) or "body"


ERRORS = {status: {"model": ErrorBody} for status in (400, 401, 404, 413, 415, 422, 503)}


def create_app(backend: Backend, lifespan=None) -> FastAPI:
    config = backend.config
    SearchParams, BatchParams = request_models(config)
    # FastAPIOffline: FastAPI whose /docs and /redoc load Swagger UI and ReDoc from the copies fastapi-offline
    # ships (under /static-offline-docs), not from a CDN, so they work where no other host can be reached
    app = FastAPIOffline(title="lsr-pyserini search service", version=VERSION, lifespan=lifespan,
                         description="Pyserini-compatible REST search over the indexes this service was configured with.")

    async def authorised(request: Request) -> None:
        check_key(config, request.headers)

    async def admin(request: Request) -> None:
        if config.api_key is None:
            raise Refusal(401, "admin routes need the service started with --api-key-file", "authorization",
                          {"WWW-Authenticate": "Bearer"})
        await authorised(request)

    @app.exception_handler(Refusal)
    async def refused(_, err: Refusal):
        return refusal_body(err.status, err.detail, err.field, err.headers)

    @app.exception_handler(RequestValidationError)
    async def invalid(_, err: RequestValidationError):
        errors = err.errors()
        # a union (query text or query object) fails in each branch: the branch of the input's own type
        # is the one whose error is not about the type ("query_txt" of spaces, not "a valid string")
        first = next((e for e in errors if not str(e.get("type", "")).endswith("_type")), errors[0] if errors else {})
        if first.get("type") == "json_invalid":  # its location is ("body", character offset)
            position = first.get("loc", ("body", 0))[-1]
            where = json_position(err.body, position) if isinstance(position, int) else "the body"
            reason = (first.get("ctx") or {}).get("error", "JSON decode error")
            return refusal_body(422, f"body: not valid JSON: {reason} at {where}", "body")
        field = field_of(first)
        return refusal_body(422, f"{field}: {first.get('msg', 'invalid')}", field)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_, err: StarletteHTTPException):
        return refusal_body(err.status_code, str(err.detail), None, getattr(err, "headers", None))

    @app.exception_handler(NotFound)
    async def not_found(_, err: NotFound):
        return refusal_body(404, str(err), getattr(err, "field", "index"))

    @app.exception_handler(InputError)
    async def bad_input(_, err: InputError):
        return refusal_body(422, str(err), getattr(err, "field", None))

    @app.exception_handler(Overloaded)
    async def overloaded(_, err: Overloaded):
        return refusal_body(503, "the service is at capacity: retry shortly", None, {"Retry-After": RETRY_AFTER_SECONDS})

    @app.exception_handler(NotReady)
    async def not_ready(_, err: NotReady):
        return refusal_body(503, "the service is still loading its indexes", None, {"Retry-After": RETRY_AFTER_SECONDS})

    name_path = Path(..., description="a configured index name", max_length=INDEX_NAME_CHARS)
    v1 = f"/{VERSION}/indexes"

    @app.post(f"{v1}/{{index}}/search", response_model=Hits, response_model_exclude_none=True, responses=ERRORS,
              dependencies=[Depends(authorised), Depends(json_content)], tags=["indexes"])
    async def search_index(index: str = name_path, params: SearchParams = Body(...)):
        text, qid = params.query, params.qid
        if not isinstance(text, str):
            text, qid = text.query_txt, qid or text.qid
        return json_body(await backend.search(index, text, params.hits, qid, params.explain))

    @app.post(f"{v1}/{{index}}/batch", response_model=BatchHits, response_model_exclude_none=True,
              responses=ERRORS, dependencies=[Depends(authorised), Depends(json_content)], tags=["indexes"])
    async def batch_index(index: str = name_path, params: BatchParams = Body(...)):
        qids = [query.qid or str(position) for position, query in enumerate(params.queries)]
        if len(set(qids)) < len(qids):
            raise Refusal(422, "queries.qid: query ids repeat", "queries.qid")
        results = await backend.search_many(index, [(qid, query.query) for qid, query in zip(qids, params.queries)],
                                            params.hits, params.explain)
        return json_body({"results": results, "took_ms": results[0]["took_ms"] if results else 0.0})

    @app.get(f"{v1}/{{index}}/documents/{{docid}}", response_model=dict[str, str], responses=ERRORS,
             dependencies=[Depends(authorised)], tags=["indexes"])
    async def get_document(index: str = name_path, docid: str = Path(..., max_length=DOCID_CHARS)):
        return backend.document(index, docid)

    @app.get(f"{v1}/{{index}}/status", response_model=IndexStatus, responses=ERRORS,
             dependencies=[Depends(authorised)], tags=["indexes"])
    async def index_status(index: str = name_path):
        return backend.status(index)

    @app.get(f"{v1}", response_model=list[str], responses=ERRORS, dependencies=[Depends(authorised)],
             tags=["indexes"])
    @app.get(f"{v1}/", response_model=list[str], responses=ERRORS, dependencies=[Depends(authorised)],
             tags=["indexes"], include_in_schema=False)
    async def list_indexes(index_type: Optional[Literal["impact", "tf", "dense"]] =
                           Query(None, description="only indexes of this kind")):
        if index_type is None:
            return backend.names()
        if not backend.ready:
            raise NotReady()
        return [name for name in backend.names() if backend.kind(name) == index_type]

    @app.post(f"{v1}/{{index}}/reload", response_model=Reloaded, responses=ERRORS, dependencies=[Depends(admin)],
              tags=["admin"])
    async def reload_index(index: str = name_path):
        import anyio

        backend.slot(index)  # 404 / 503 before any work
        return await anyio.to_thread.run_sync(backend.reload, index)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, str]:
        return {"status": "alive"}

    @app.get("/readyz", tags=["health"], responses={503: {"model": ErrorBody}})
    async def readyz():
        if backend.error:
            return refusal_body(503, backend.error)
        if not backend.ready:
            return refusal_body(503, "loading", None, {"Retry-After": RETRY_AFTER_SECONDS})
        return {"status": "ready", "indexes": backend.names()}

    page_html = resources.files(__package__).joinpath("page.html").read_text()

    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def page():
        return HTMLResponse(page_html, headers={"Cache-Control": "no-cache"})

    if config.cors_origins:
        from fastapi.middleware.cors import CORSMiddleware

        app.add_middleware(CORSMiddleware, allow_origins=list(config.cors_origins), allow_methods=["GET", "POST"],
                           allow_headers=["Authorization", "X-API-Key", "Content-Type"])
    app.add_middleware(BodyLimit, limit=config.max_body_bytes)
    return app
