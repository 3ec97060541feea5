"""The service as one ASGI app: the REST routes, the MCP tools at /mcp and the page at /, over one
backend that loads (and warms) its indexes in a thread once the server is up, so /healthz answers
while /readyz waits for them."""
from __future__ import annotations

import contextlib
import logging
import threading

from fastapi import FastAPI

from .backend import Backend
from .rest import create_app

logger = logging.getLogger(__name__)


def build_app(backend: Backend, load: bool = True, on_load_failure=None) -> FastAPI:
    """The app; with `load`, the backend loads in a thread at startup (a failure is logged, kept in
    `backend.error` for /readyz, and handed to `on_load_failure`) and closes at shutdown."""

    @contextlib.asynccontextmanager
    async def lifespan(_app):
        if load:
            threading.Thread(target=_load, args=(backend, on_load_failure), name="load-indexes", daemon=True).start()
        try:
            yield
        finally:
            if backend.ready:
                backend.close()

    return create_app(backend, lifespan=lifespan)


def _load(backend: Backend, on_load_failure) -> None:
    try:
        backend.load()
    except Exception as err:  # noqa: BLE001 - reported on /readyz and by the command
        backend.error = f"{type(err).__name__}: {err}" if not str(err).startswith("index") else str(err)
        logger.error("loading failed: %s", backend.error)
        if on_load_failure is not None:
            on_load_failure(err)
