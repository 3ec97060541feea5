"""Serve indexes over HTTP: Pyserini-compatible REST routes, MCP tools at /mcp, a search page at /.

    python -m lsr_pyserini.serve --index NAME=PATH [--encoder PRESET_OR_DIR] [--engine E]
        [--reranker R --store S --interpolate W] [--host 127.0.0.1] [--port 8000]
    python -m lsr_pyserini.serve --config serve.yaml      (several indexes; docs/serving.md)

Every model and index is loaded and warmed before /readyz says ready (/healthz answers at once).
Concurrent queries to one index are micro-batched (--max-batch, --max-wait-ms, --queue-size); a
full queue answers 503 with Retry-After. It binds 127.0.0.1 unless told otherwise; any other
address needs --api-key-file (clients send `Authorization: Bearer KEY` or `X-API-Key: KEY`) or
an explicit --insecure-no-auth. SIGTERM stops accepting, finishes the requests in flight and exits 0.
"""
from __future__ import annotations

import argparse
import logging
import signal
import sys

from ..core.cli import QUIET_HELP, quiet_libraries, run_main, set_threads, warn
from ..core.errors import InputError
from ..core.options import engine_option, float_in, non_negative_float, positive_int
from ..engines import available_engines
from .served import LOOPBACK, SERVICE_KEYS, build_config, index_spec, read_config

logger = logging.getLogger("lsr_pyserini.serve")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.serve", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--index", metavar="NAME=PATH", help="serve the index at PATH as NAME")
    source.add_argument("--config", help="YAML file of indexes (and service settings); flags given override it")
    one = parser.add_argument_group("the index of --index (the keys of a config file's index)")
    one.add_argument("--encoder", help="sparse preset or checkpoint encoding the queries (impact engines; "
                                       "a bm25aug checkpoint for bm25; none for BM25 and dense)")
    one.add_argument("--engine", help=f"{', '.join(available_engines())} (default: from the index)")
    one.add_argument("--engine-option", type=engine_option, action="append", default=[], metavar="KEY=VALUE",
                     help="an engine's own option (repeatable)")
    one.add_argument("--reranker", help="re-ranker name (with --store)")
    one.add_argument("--store", help="the re-ranker's store")
    one.add_argument("--interpolate", type=float_in(0, 1), help="weight of the re-ranker in a fusion with the first stage")
    one.add_argument("--candidates", type=positive_int, help="first-stage candidates re-ranked (default: 1000)")
    one.add_argument("--qrels", help="TREC qrels judging the index's queries, for the MCP tools get_qrels and "
                                     "eval_hits (default: none)")
    bind = parser.add_argument_group("binding and keys")
    bind.add_argument("--host", help="address to bind (default: 127.0.0.1)")
    bind.add_argument("--port", type=int, help="port (default: 8000; 0 picks a free one)")
    bind.add_argument("--api-key-file", help="file holding the API key; requests carry 'Authorization: Bearer KEY' or "
                                             "'X-API-Key: KEY'; "
                                             "admin routes need it")
    bind.add_argument("--insecure-no-auth", action="store_true", default=None,
                      help="serve a non-loopback address without keys (prints a warning)")
    bind.add_argument("--cors-origin", action="append", dest="cors_origins", metavar="ORIGIN",
                      help="allow browser pages of ORIGIN to call the API (repeatable; default: CORS off)")
    bind.add_argument("--no-mcp", dest="mcp", action="store_false", default=None, help="no MCP tools at /mcp")
    limits = parser.add_argument_group("batching and limits")
    limits.add_argument("--threads", type=positive_int, help="engine threads per micro-batch (default: 2)")
    limits.add_argument("--encoder-threads", type=positive_int,
                        help="torch threads of the query encoders and re-rankers (default: 1: beside the engine's "
                             "threads, the event loop and the JVM, one query per forward pass runs fastest on one)")
    limits.add_argument("--max-batch", type=positive_int, help="queries searched together (default: 32)")
    limits.add_argument("--max-wait-ms", type=non_negative_float,
                        help="how long a batch waits for more queries (default: 0: takes what is queued)")
    limits.add_argument("--queue-size", type=positive_int, help="queries waiting per index before 503 (default: 256)")
    limits.add_argument("--max-hits", type=positive_int, help="largest 'hits' a request may ask (default: 1000)")
    limits.add_argument("--max-query-chars", type=positive_int, help="longest query text (default: 4096)")
    limits.add_argument("--max-batch-queries", type=positive_int, help="queries in one batch request (default: 64)")
    limits.add_argument("--max-body-bytes", type=positive_int, help="largest request body (default: 1048576)")
    parser.add_argument("--ready-file", help="write the bound 'host:port' to this file once ready (for scripts)")
    parser.add_argument("--quiet", action="store_true", help=QUIET_HELP + "; no access log (default: a line per request on "
                                                            "stderr: METHOD PATH STATUS TIME ms)")
    return parser


def config_from(args):
    """The ServiceConfig of the flags (over a config file's values)."""
    if args.config:
        specs, settings = read_config(args.config)
        given = [flag for flag in ("encoder", "engine", "reranker", "store", "interpolate", "candidates", "qrels")
                 if getattr(args, flag) is not None] + (["engine_option"] if args.engine_option else [])
        if given:
            raise InputError(f"--{given[0].replace('_', '-')} belongs in the config file's index entry with --config")
    else:
        name, sep, path = args.index.partition("=")
        if not sep or not name or not path:
            raise InputError(f"--index {args.index!r}: expected NAME=PATH")
        entry = {"index": path, "encoder": args.encoder, "engine": args.engine, "reranker": args.reranker,
                 "store": args.store, "interpolate": args.interpolate, "candidates": args.candidates,
                 "engine_options": dict(args.engine_option) or None, "qrels": args.qrels}
        specs, settings = [index_spec(name, entry, "--index")], {}
    for key in SERVICE_KEYS:
        value = getattr(args, key, None)
        if value is not None:
            settings[key] = value
    return build_config(specs, settings)


def serve(config, quiet: bool = False, ready_file: str | None = None) -> int:
    import asyncio

    import uvicorn

    from .app import build_app
    from .backend import Backend

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame):
            super().handle_exit(sig, frame)
            if sig == signal.SIGTERM:  # asked to stop: finish in-flight requests, exit 0 (not by the signal)
                self._captured_signals.remove(sig)

    backend = Backend(config)
    failed = []

    def load_failed(err):
        failed.append(err)
        server.should_exit = True

    app = build_app(backend, on_load_failure=load_failed, access_log=not quiet)
    # uvicorn's own access log is off: at log level warning it printed nothing; the app's (AccessLog) prints
    server = Server(uvicorn.Config(app, host=config.host, port=config.port, log_level="warning",
                                   access_log=False, timeout_graceful_shutdown=30, lifespan="on"))
    if ready_file:
        _write_when_ready(server, backend, ready_file)
    asyncio.run(server.serve())
    if failed:
        raise InputError(backend.error or str(failed[0]))
    return 0


def _write_when_ready(server, backend, ready_file: str) -> None:
    import threading
    import time
    from pathlib import Path

    def wait():
        while not (server.started and backend.ready):
            if backend.error or server.should_exit:
                return
            time.sleep(0.05)
        host, port = server.servers[0].sockets[0].getsockname()[:2]
        target = Path(ready_file)
        written = target.with_name(target.name + ".writing")
        written.write_text(f"[{host}]:{port}\n" if ":" in host else f"{host}:{port}\n")
        written.replace(target)

    threading.Thread(target=wait, name="ready-file", daemon=True).start()


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    quiet_libraries(args.quiet)
    config = config_from(args)
    if config.insecure_no_auth and config.api_key is None and config.host not in LOOPBACK:
        warn(f"serving {config.host} without API keys (--insecure-no-auth): anyone who reaches it can search")
    from ..core.jvm import start_jvm

    start_jvm()
    set_threads(config.encoder_threads)  # before any model loads: the fast paths' checks are per thread count
    sys.exit(serve(config, args.quiet, args.ready_file))


if __name__ == "__main__":
    run_main(main)
