"""The service as one ASGI app: the REST routes (Pyserini 1.6's and Pyserini 2's), the MCP tools
at /mcp and the page at /, over one backend that loads (and warms) its indexes in a thread once the
server is up, so /healthz answers while /readyz waits for them."""
from __future__ import annotations

import contextlib
import logging
import threading

from fastapi import FastAPI

from .backend import Backend
from .rest import Refusal, check_key, create_app, refusal_body
from .rest_pyserini2 import add_routes

logger = logging.getLogger(__name__)
MCP_PATH = "/mcp"


class AccessLog:
    """One line per request on the service's log once it is answered: `METHOD PATH STATUS TIME ms`
    (the query string left out: it may carry what a user searched)."""

    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        import time

        started, status = time.perf_counter(), [0]

        async def sent(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, sent)
        finally:
            access.info("%s %s %d %.1f ms", scope["method"], scope["path"], status[0],
                        1000 * (time.perf_counter() - started))


access = logging.getLogger("lsr_pyserini.serve.access")


def build_app(backend: Backend, load: bool = True, on_load_failure=None, access_log: bool = False) -> FastAPI:
    """The app; with `load`, the backend loads in a thread at startup (a failure is logged, kept in
    `backend.error` for /readyz, and handed to `on_load_failure`) and closes at shutdown. With
    `config.mcp`, the MCP tools answer at /mcp (streamable HTTP, stateless), behind the same keys.
    With `access_log`, a line per request (`AccessLog`) on the log "lsr_pyserini.serve.access"."""
    mcp_app = _mcp_app(backend) if backend.config.mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(app):
        if load:
            threading.Thread(target=_load, args=(backend, on_load_failure), name="load-indexes", daemon=True).start()
        try:
            if mcp_app is None:
                yield
            else:
                async with mcp_app.lifespan(app):  # its session manager: stopped before the backend closes
                    yield
        finally:
            if backend.ready:
                backend.close()

    app = create_app(backend, lifespan=lifespan)
    add_routes(app, backend)  # Pyserini 2's and Anserini's GET routes, after the Pyserini 1.6 routes
    if mcp_app is not None:
        endpoint = McpEndpoint(mcp_app, backend.config)
        for path in (MCP_PATH, MCP_PATH + "/"):  # both answer: no redirect for clients to follow
            app.router.add_route(path, endpoint, include_in_schema=False)
    if access_log:
        app.add_middleware(AccessLog)
    return app


def _mcp_app(backend: Backend):
    from .mcp import create_mcp

    config = backend.config
    # Stateless: each POST stands alone (the tools keep no session), so no session lives in memory
    # and no open GET stream holds up a SIGTERM's drain. Without keys (a loopback service), the
    # Host/Origin guard refuses DNS-rebinding pages, as the MCP transport spec asks.
    return create_mcp(backend).http_app(path=MCP_PATH, stateless_http=True,
                                        host_origin_protection="auto" if config.api_key is None else False,
                                        allowed_origins=list(config.cors_origins) or None)


class McpEndpoint:
    """/mcp and /mcp/: the REST routes' key check (401 in their JSON shape), then fastmcp's app."""

    def __init__(self, app, config):
        self.app, self.config = app, config

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http":
            headers = {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope["headers"]}
            try:
                check_key(self.config, headers)
            except Refusal as err:
                return await refusal_body(err.status, err.detail, err.field, err.headers)(scope, receive, send)
            if scope["path"].endswith("/"):  # /mcp/ is fastmcp's /mcp
                scope = {**scope, "path": scope["path"].rstrip("/"),
                         "raw_path": scope.get("raw_path", scope["path"].encode()).rstrip(b"/")}
        await self.app(scope, receive, send)


def _load(backend: Backend, on_load_failure) -> None:
    try:
        backend.load()
    except Exception as err:  # noqa: BLE001 - reported on /readyz and by the command
        backend.error = f"{type(err).__name__}: {err}" if not str(err).startswith("index") else str(err)
        if on_load_failure is not None:
            on_load_failure(err)  # the command reports it, once
        else:
            logger.error("loading failed: %s", backend.error)
