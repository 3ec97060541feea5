"""The serve command's flags at non-default values, each seen where it acts: the index entry's flags in
the `Searcher` the backend opens, the limits in the micro-batches and the queue, the bind flags in the
app's routes and headers. In process: `main` up to the point where it would start the server (the
config it hands over is caught), then the backend over a recording `Searcher` (no JVM, no model)."""
from __future__ import annotations

import asyncio
import time

import httpx
import pytest

pytestmark = pytest.mark.xdist_group("serve")


class RecordingSearcher:
    """Stands in for `api.Searcher` in the backend: records how it was opened and the engine threads
    and query groups of each search."""

    opened: list[dict] = []

    def __init__(self, **kwargs):
        from types import SimpleNamespace

        RecordingSearcher.opened.append(kwargs)
        self.reranker = None
        self.query_side = SimpleNamespace(makes="terms")
        self.engine = SimpleNamespace(scores="impact", name="lucene", describe=lambda: {"documents": 1})
        self.threads, self.groups = [], []

    def _hits(self, text):
        from lsr_pyserini.core.hits import Hit

        return [Hit(f"doc-{text}", 1.0)]

    def search(self, text, k=10, explain=False):
        return self._hits(text)

    def batch_search(self, texts, qids, k=10, threads=1):
        self.threads.append(threads)
        return {qid: self._hits(text) for text, qid in zip(texts, qids)}

    def docs(self, docids):
        return [f"text of {docid}" for docid in docids]

    def doc_fields(self, docids):
        return [{"contents": f"text of {docid}"} for docid in docids]

    def encode_queries(self, texts, qids):
        return [{text: 1.0} for text in texts]

    def search_encoded(self, texts, qids, queries, k=10, threads=1, explain=False):
        self.threads.append(threads)
        self.groups.append(list(texts))
        return {qid: self._hits(text) for text, qid in zip(texts, qids)}

    def close(self):
        pass


@pytest.fixture
def served(monkeypatch, tmp_path):
    """`served(*flags)`: the ServiceConfig `python -m lsr_pyserini.serve --index sample=FOLDER FLAGS`
    would serve (its `main` run in process, the server's start caught), and `loaded(config)`: its
    backend, loaded over RecordingSearcher."""
    from lsr_pyserini.core import jvm
    from lsr_pyserini.serve import __main__ as serve_command
    from lsr_pyserini.serve import backend as backend_module

    index = tmp_path / "index"
    index.mkdir()
    caught = []
    monkeypatch.setattr(jvm, "start_jvm", lambda *args, **kwargs: None)
    monkeypatch.setattr(serve_command, "quiet_libraries", lambda quiet: None)  # process-wide: left as it is
    monkeypatch.setattr(serve_command, "serve", lambda config, quiet=False, ready_file=None: caught.append(config) or 0)
    monkeypatch.setattr(backend_module, "Searcher", RecordingSearcher)
    RecordingSearcher.opened = []
    backends = []

    def configure(*flags):
        with pytest.raises(SystemExit) as exited:
            serve_command.main(["--index", f"sample={index}", *map(str, flags)])
        assert exited.value.code == 0
        return caught.pop()

    def loaded(config):
        backend = backend_module.Backend(config)
        backend.load()
        backends.append(backend)
        return backend

    configure.index, configure.loaded = index, loaded
    yield configure
    for backend in backends:
        backend.close()


def test_the_index_flags_open_the_searcher_with_them(served, tmp_path):
    """--reranker, --store, --interpolate, --candidates and --engine-option are the served Searcher's."""
    store = tmp_path / "store"
    store.mkdir()
    config = served("--reranker", "dense", "--store", store, "--interpolate", "0.25", "--candidates", "7",
                    "--engine-option", "k1=0.5", "--engine-option", "b=0.3")
    served.loaded(config)
    assert RecordingSearcher.opened == [{"index": str(served.index), "reranker": "dense", "store": str(store),
                                         "interpolate": 0.25, "candidates": 7,
                                         "engine_options": {"k1": 0.5, "b": 0.3}}]


def test_threads_reach_the_engine_and_encoder_threads_torch(served):
    """--threads 3: every engine search (the warm-up's and a request's) runs on 3 threads (default 2);
    --encoder-threads 3: torch runs on 3 threads (default 1)."""
    import torch

    config = served("--threads", "3", "--encoder-threads", "3")
    assert torch.get_num_threads() == 3
    backend = served.loaded(config)
    answer = asyncio.run(backend.search("sample", "cells", hits=1))
    assert answer["candidates"][0]["docid"] == "doc-cells"
    searcher = backend.slot("sample").searcher
    assert len(searcher.threads) == 2 and set(searcher.threads) == {3}  # the warm-up's batch and the request's


def test_max_wait_ms_gathers_a_later_query_into_the_batch(served):
    """--max-wait-ms 5000 (with --max-batch 2): a query sent 0.2 s after the first is searched in the
    first's batch; at the default (0) the first goes alone."""
    backend = served.loaded(served("--max-wait-ms", "5000", "--max-batch", "2"))
    first = backend.submit("sample", ["first"], 10, False)
    time.sleep(0.2)
    second = backend.submit("sample", ["second"], 10, False)
    started = time.perf_counter()
    assert [future.result(10)["candidates"][0]["docid"] for future in first + second] == ["doc-first", "doc-second"]
    assert time.perf_counter() - started < 4  # the batch was full at 2: no wait for the rest of the 5 s
    assert backend.slot("sample").searcher.groups == [["first", "second"]]


def test_queue_size_refuses_a_request_beyond_it(served):
    """--queue-size 2: a batch request of 3 queries gets 503 with Retry-After (all or none); one of 2
    is answered (the default, 256, takes both)."""
    from lsr_pyserini.serve.rest import create_app

    backend = served.loaded(served("--queue-size", "2"))

    async def batch(size):
        transport = httpx.ASGITransport(app=create_app(backend))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            return await client.post("/v1/indexes/sample/batch",
                                     json={"queries": [{"qid": str(i), "query": f"q{i}"} for i in range(size)]})

    refused = asyncio.run(batch(3))
    assert refused.status_code == 503 and refused.headers["retry-after"] == "1", refused.text
    answered = asyncio.run(batch(2))
    assert answered.status_code == 200 and len(answered.json()["results"]) == 2
    assert backend.slot("sample").searcher.groups == [["q0", "q1"]]  # the refused request queued nothing


def test_cors_origin_and_no_mcp_shape_the_app(served):
    """--cors-origin ORIGIN: a page of ORIGIN may call the API (CORS is off by default); --no-mcp: no
    tools at /mcp (there by default)."""
    from lsr_pyserini.serve.app import build_app
    from lsr_pyserini.serve.backend import Backend

    origin = "http://elsewhere.example"
    preflight = {"Origin": origin, "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}

    async def ask(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            return await client.options("/v1/indexes/sample/search", headers=preflight)

    def routes(app):
        return {route.path for route in app.routes}

    by_default = build_app(Backend(served()), load=False)
    assert "access-control-allow-origin" not in asyncio.run(ask(by_default)).headers
    assert {"/mcp", "/mcp/"} <= routes(by_default)
    flagged = build_app(Backend(served("--cors-origin", origin, "--no-mcp")), load=False)
    options = asyncio.run(ask(flagged))
    assert options.status_code == 200 and options.headers["access-control-allow-origin"] == origin
    assert not {"/mcp", "/mcp/"} & routes(flagged)
