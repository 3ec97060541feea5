"""The search service (python -m lsr_pyserini.serve): Pyserini's REST shapes, micro-batched answers
equal to `Searcher.search` alone, limits and overload, keys, reload under load, SIGTERM."""
from __future__ import annotations

import asyncio
import json
import re
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from service import Service, sample_queries

from conftest import error_lines, run_tool

pytestmark = pytest.mark.xdist_group("serve")
KEY = "k" * 8 + "0123456789abcdef" + "z" * 8


@pytest.fixture(scope="module")
def service(service_indexes, tmp_path_factory):
    folder = tmp_path_factory.mktemp("serve")
    with Service("--index", f"sample={service_indexes['splade']}", "--encoder", "splade-tiny", "--max-hits", "100",
                 "--max-query-chars", "200", "--max-batch-queries", "8", "--max-body-bytes", "4096",
                 "--max-batch", "16", "--quiet", folder=folder) as running:
        yield running
        assert running.stop(signal.SIGTERM) == 0, running.log.read_text()


@pytest.fixture(scope="module")
def searcher(service_indexes):
    import lsr_pyserini

    lsr_pyserini.start_jvm()
    opened = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny")
    yield opened
    opened.close()


def ranking(response: dict) -> list[tuple[str, float]]:
    return [(candidate["docid"], candidate["score"]) for candidate in response["candidates"]]


def test_pyserini_shapes(service, searcher):
    """The request and response models of pyserini.server (its client works unchanged)."""
    from pyserini.server.models import Hits, IndexStatus, SearchParams

    with service.client() as client:
        assert client.get("/healthz").json() == {"status": "alive"}
        assert client.get("/readyz").json()["status"] == "ready"
        assert client.get("/v1/indexes").json() == ["sample"]
        assert client.get("/v1/indexes/", params={"index_type": "impact"}).json() == ["sample"]
        assert client.get("/v1/indexes/", params={"index_type": "tf"}).json() == []
        qid, text = sample_queries()[0]
        request = SearchParams(query=text, hits=5, qid=qid).model_dump()  # as Pyserini's client sends it
        reply = client.post("/v1/indexes/sample/search", json=request)
        assert reply.status_code == 200, reply.text
        hits = Hits(**reply.json())
        assert hits.query.qid == qid and hits.query.query_txt == text
        expected = searcher.search(text, k=5)
        assert [(c.docid, c.score) for c in hits.candidates] == [(h.docid, h.score) for h in expected]
        assert all(c.document_txt for c in hits.candidates)
        assert hits.candidates[0].document_txt == searcher.doc(expected[0].docid)
        # each hit's title alone beside its whole text (an optional field: Pyserini's client ignores it)
        titles = [fields["title"] for fields in searcher.doc_fields([h.docid for h in expected])]
        assert [c["title"] for c in reply.json()["candidates"]] == titles
        assert all(c.document_txt.startswith(title + " ") for c, title in zip(hits.candidates, titles))
        document = client.get(f"/v1/indexes/sample/documents/{expected[0].docid}").json()
        assert document == {"id": expected[0].docid, "contents": searcher.doc(expected[0].docid), "title": titles[0]}
        status = client.get("/v1/indexes/sample/status").json()
        IndexStatus(**status)
        assert status["engine"] == "lucene" and status["documents"] == 12 and int(status["size_bytes"]) > 0
        assert "/v1/indexes/{index}/search" in client.get("/openapi.json").json()["paths"]
        assert client.get("/docs").status_code == 200


def test_explanations(service, searcher):
    qid, text = sample_queries()[1]
    with service.client() as client:
        reply = client.post("/v1/indexes/sample/search", json={"query": text, "hits": 3, "explain": True}).json()
    expected = searcher.search(text, k=3, explain=True)
    for candidate, hit in zip(reply["candidates"], expected):
        assert candidate["explained"] == "score"
        assert [(t["term"], t["contribution"]) for t in candidate["terms"]] == \
               [(m.term, m.contribution) for m in hit.terms]
        assert sum(t["contribution"] for t in candidate["terms"]) == pytest.approx(candidate["score"])


def test_concurrent_requests_are_batched_and_equal_search_alone(service, searcher):
    """Many clients at once: every response equals `Searcher.search` of that query alone, and the
    service did search several queries per batch."""
    queries = sample_queries() * 6
    expected = {text: [(h.docid, h.score) for h in searcher.search(text, k=10)] for _, text in queries}
    with service.client() as client:
        before = client.get("/v1/indexes/sample/status").json()

    def ask(pair):
        with service.client() as client:
            reply = client.post("/v1/indexes/sample/search", json={"query": pair[1], "qid": pair[0], "hits": 10})
            return pair, reply.status_code, reply.json()

    with ThreadPoolExecutor(16) as pool:
        answers = list(pool.map(ask, queries))
    assert {status for _, status, _ in answers} == {200}
    for (qid, text), _, body in answers:
        assert body["query"] == {"qid": qid, "query_txt": text}
        assert ranking(body) == expected[text], text
    with service.client() as client:
        after = client.get("/v1/indexes/sample/status").json()
        batch = client.post("/v1/indexes/sample/batch", json={"queries": [{"qid": f"b{i}", "query": t}
                                                                          for i, (_, t) in enumerate(queries[:8])],
                                                              "hits": 10})
    queries_seen, batches_seen = after["queries"] - before["queries"], after["batches"] - before["batches"]
    assert queries_seen == len(queries)
    assert batches_seen < queries_seen, (batches_seen, queries_seen)  # some batches held several queries
    assert batch.status_code == 200
    assert [ranking(result) for result in batch.json()["results"]] == [expected[t] for _, t in queries[:8]]


@pytest.mark.parametrize("path, body, status, field", [
    ("/v1/indexes/sample/search", {"query": "cells", "hits": 101}, 422, "hits"),
    ("/v1/indexes/sample/search", {"query": "cells", "hits": 0}, 422, "hits"),
    ("/v1/indexes/sample/search", {"query": "x" * 201}, 422, "query"),
    ("/v1/indexes/sample/search", {"query": ""}, 422, "query"),
    ("/v1/indexes/sample/search", {"hits": 3}, 422, "query"),
    ("/v1/indexes/sample/search", {"query": "cells " * 700}, 413, "body"),
    ("/v1/indexes/sample/batch", {"queries": [{"query": "a"}] * 9}, 422, "queries"),
    ("/v1/indexes/sample/batch", {"queries": [{"query": "a", "qid": "1"}] * 2}, 422, "queries.qid"),
    ("/v1/indexes/nope/search", {"query": "cells"}, 404, "index"),
    ("/v1/indexes/..%2F..%2Fetc/search", {"query": "cells"}, 404, None),
    ("/v1/indexes/sample/reload", {}, 401, "authorization"),
])
def test_refusals_name_the_field(service, path, body, status, field):
    with service.client() as client:
        reply = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
    assert reply.status_code == status, reply.text
    assert reply.headers["content-type"].startswith("application/json")
    if field is not None:
        assert reply.json()["field"] == field, reply.json()
    assert reply.json()["detail"]


def test_unknown_document_and_index_are_404(service):
    with service.client() as client:
        assert client.get("/v1/indexes/sample/documents/no-such-doc").status_code == 404
        assert client.get("/v1/indexes/sample/documents/no-such-doc").json()["field"] == "docid"
        assert client.get("/v1/indexes/other/status").status_code == 404
        assert client.get("/v1/indexes/%2Ftmp/status").status_code == 404


class _PausedSearcher:
    """Holds every batch until released: the queue fills deterministically."""

    def __init__(self):
        self.entered, self.release = threading.Event(), threading.Event()

    def run(self, key, texts):
        self.entered.set()
        self.release.wait(30)
        return [{"candidates": [{"docid": "d", "score": 1.0, "document_txt": text}], "query_terms": None}
                for text in texts]


def _paused_backend(queue_size: int):
    from lsr_pyserini.serve.backend import Backend, Slot
    from lsr_pyserini.serve.batching import MicroBatcher
    from lsr_pyserini.serve.served import IndexSpec, ServiceConfig

    config = ServiceConfig(indexes=(IndexSpec("paused", {"index": "unused"}),), queue_size=queue_size, max_batch=1)
    backend = Backend(config)
    paused = _PausedSearcher()
    batcher = MicroBatcher(paused.run, max_batch=1, queue_size=queue_size, name="paused")
    backend._slots["paused"] = Slot(config.indexes[0], None, batcher, 1, time.time(), 0.0, True, 0)
    backend.ready = True
    return backend, paused


def test_full_queue_answers_503_at_once():
    """queue_size 3, one query held by the worker: 3 wait, the 5th and later are refused at once
    with Retry-After; once released, every accepted query is answered."""
    from lsr_pyserini.serve.rest import create_app

    backend, paused = _paused_backend(queue_size=3)

    async def scenario():
        transport = httpx.ASGITransport(app=create_app(backend))
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
            first = asyncio.create_task(client.post("/v1/indexes/paused/search", json={"query": "q0"}))
            while not paused.entered.is_set():  # the worker holds q0; the queue is empty
                await asyncio.sleep(0.005)
            waiting = [asyncio.create_task(client.post("/v1/indexes/paused/search", json={"query": f"q{i}"}))
                       for i in range(1, 4)]
            while backend._slots["paused"].batcher.depth < 3:
                await asyncio.sleep(0.005)
            started = time.perf_counter()
            refused = [await client.post("/v1/indexes/paused/search", json={"query": f"r{i}"}) for i in range(3)]
            refusal_seconds = time.perf_counter() - started
            paused.release.set()
            accepted = [await first] + [await task for task in waiting]
            return refused, refusal_seconds, accepted

    refused, refusal_seconds, accepted = asyncio.run(scenario())
    assert [reply.status_code for reply in refused] == [503, 503, 503]
    assert all(reply.headers["retry-after"] == "1" for reply in refused)
    assert refusal_seconds < 5  # at once: not after the held query
    assert [reply.status_code for reply in accepted] == [200] * 4
    assert [reply.json()["candidates"][0]["document_txt"] for reply in accepted] == ["q0", "q1", "q2", "q3"]
    backend._slots["paused"].batcher.close()


def test_micro_batcher_groups_and_isolates_failures():
    from lsr_pyserini.serve.batching import Closed, MicroBatcher, Overloaded

    gate, calls = threading.Event(), []

    def run(key, texts):
        gate.wait(10)
        calls.append((key, list(texts)))
        if "bad" in texts:
            raise ValueError("bad query")
        return [f"{key}:{text}" for text in texts]

    batcher = MicroBatcher(run, max_batch=8, queue_size=8, name="test")
    held = batcher.submit_many([(1, "held")])  # the worker takes it and waits at the gate
    while batcher.depth:
        time.sleep(0.001)
    futures = batcher.submit_many([(10, "a"), (10, "bad"), (5, "b"), (10, "c")])
    with pytest.raises(Overloaded):
        batcher.submit_many([(10, "x")] * 5)  # room for 4 more only: none queued
    gate.set()
    assert held[0].result(10) == "1:held"
    assert [f.result(10) if f.exception(10) is None else "failed" for f in futures] == \
           ["10:a", "failed", "5:b", "10:c"]
    assert (10, ["a", "bad", "c"]) in calls and (5, ["b"]) in calls  # one batch, grouped by key
    batcher.close()
    with pytest.raises(Closed):
        batcher.submit_many([(1, "late")])


def test_keys_reload_under_load_and_sigterm(service_indexes, tmp_path, searcher):
    key_file = tmp_path / "key"
    key_file.write_text(KEY + "\n")
    bearer = {"Authorization": f"Bearer {KEY}"}
    qid, text = sample_queries()[2]
    expected = [(h.docid, h.score) for h in searcher.search(text, k=10)]
    with Service("--index", f"sample={service_indexes['splade']}", "--encoder", "splade-tiny", "--api-key-file",
                 key_file, "--max-batch", "1", "--quiet", folder=tmp_path) as keyed:
        with keyed.client() as client:
            assert client.post("/v1/indexes/sample/search", json={"query": text}).status_code == 401
            wrong = client.post("/v1/indexes/sample/search", json={"query": text},
                                headers={"Authorization": "Bearer " + "w" * 32})
            assert wrong.status_code == 401 and wrong.json()["field"] == "authorization"
            assert client.get("/v1/indexes", headers=bearer).json() == ["sample"]
            assert client.get("/healthz").status_code == 200  # health stays open for probes

        failures, answers, stop = [], [], threading.Event()

        def keep_searching():
            with keyed.client(headers=bearer) as client:
                while not stop.is_set():
                    reply = client.post("/v1/indexes/sample/search", json={"query": text, "hits": 10})
                    (answers if reply.status_code == 200 else failures).append(reply)

        searchers = [threading.Thread(target=keep_searching) for _ in range(3)]
        for thread in searchers:
            thread.start()
        with keyed.client(headers=bearer) as client:
            reloaded = client.post("/v1/indexes/sample/reload")
            assert reloaded.status_code == 200, reloaded.text
            assert reloaded.json()["version"] == 2
            served_after = len(answers)
            while len(answers) < served_after + 10:
                time.sleep(0.01)
            stop.set()
            for thread in searchers:
                thread.join()
            assert client.get("/v1/indexes/sample/status").json()["version"] == 2
        assert failures == []
        assert all(ranking(reply.json()) == expected for reply in answers)

        # SIGTERM with requests in flight: they finish, the process exits 0
        with keyed.client(headers=bearer) as client:
            batch = {"queries": [{"query": f"{text} {i}"} for i in range(40)], "hits": 100, "explain": True}
            in_flight = ThreadPoolExecutor(1).submit(client.post, "/v1/indexes/sample/batch", json=batch)
            with keyed.client(headers=bearer) as watcher:
                while watcher.get("/v1/indexes/sample/status").json()["queue_depth"] == 0 and not in_flight.done():
                    time.sleep(0.01)
            assert not in_flight.done()
            keyed.process.send_signal(signal.SIGTERM)
            reply = in_flight.result(120)
        assert reply.status_code == 200 and len(reply.json()["results"]) == 40
        assert keyed.process.wait(60) == 0
        with pytest.raises(httpx.ConnectError):
            httpx.get(f"{keyed.url}/healthz", timeout=5)


def test_binding_beyond_loopback_needs_a_key(service_indexes, tmp_path):
    result = run_tool("serve", "--index", f"sample={service_indexes['splade']}", "--encoder", "splade-tiny",
                      "--host", "0.0.0.0")
    assert result.returncode == 2
    assert error_lines(result) == ["error: --host 0.0.0.0: binding beyond loopback needs --api-key-file F "
                                   "(or --insecure-no-auth to serve without keys)"]
    short = tmp_path / "short"
    short.write_text("abc")
    result = run_tool("serve", "--index", f"sample={service_indexes['splade']}", "--api-key-file", short)
    assert error_lines(result) == [f"error: --api-key-file {short}: the key must be at least 16 characters"]
    result = run_tool("serve", "--index", "sample")
    assert error_lines(result) == ["error: --index 'sample': expected NAME=PATH"]
    result = run_tool("serve", "--index", f"sample={tmp_path / 'none'}")
    assert error_lines(result) == [f"error: index 'sample': {tmp_path / 'none'}: no such index folder"]


def test_insecure_no_auth_is_explicit(service_indexes):
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.serve.served import build_config, index_spec

    spec = [index_spec("sample", {"index": str(service_indexes["splade"])}, "test")]
    with pytest.raises(InputError, match="needs --api-key-file"):
        build_config(spec, {"host": "0.0.0.0"})
    assert build_config(spec, {"host": "0.0.0.0", "insecure_no_auth": True}).api_key is None


def test_config_file(service_indexes, tmp_path):
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.serve.served import build_config, read_config

    config = tmp_path / "serve.yaml"
    config.write_text(f"indexes:\n  sample:\n    index: {service_indexes['splade']}\n    encoder: splade-tiny\n"
                      f"  words:\n    index: {service_indexes['bm25']}\nservice:\n  max_batch: 4\n  port: 0\n")
    built = build_config(*read_config(str(config)))
    assert [spec.name for spec in built.indexes] == ["sample", "words"] and built.max_batch == 4
    config.write_text(f"indexes:\n  sample:\n    index: {service_indexes['splade']}\n    encodr: x\n")
    with pytest.raises(InputError, match="unknown key 'encodr'"):
        read_config(str(config))
    config.write_text("indexes:\n  a/b:\n    index: x\n")
    with pytest.raises(InputError, match="index name 'a/b'"):
        read_config(str(config))


def test_cors_is_off_unless_configured():
    from dataclasses import replace

    from lsr_pyserini.serve.rest import create_app

    backend, paused = _paused_backend(queue_size=4)
    paused.release.set()
    preflight = {"Origin": "http://elsewhere.example", "Access-Control-Request-Method": "POST",
                 "Access-Control-Request-Headers": "content-type"}

    async def ask(app):
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            options = await client.options("/v1/indexes/paused/search", headers=preflight)
            answer = await client.post("/v1/indexes/paused/search", json={"query": "q"},
                                       headers={"Origin": "http://elsewhere.example"})
            return options, answer

    options, answer = asyncio.run(ask(create_app(backend)))
    assert "access-control-allow-origin" not in options.headers
    assert "access-control-allow-origin" not in answer.headers
    backend.config = replace(backend.config, cors_origins=("http://elsewhere.example",))
    options, answer = asyncio.run(ask(create_app(backend)))
    assert options.headers["access-control-allow-origin"] == "http://elsewhere.example"
    assert answer.status_code == 200 and answer.headers["access-control-allow-origin"] == "http://elsewhere.example"
    backend._slots["paused"].batcher.close()


def test_a_new_users_mistakes_get_the_answers_they_name(service):
    """Finding 5: "   " got 200 and ten arbitrary documents while "" got 422; a JSON syntax error
    answered `"field": "14"` (a character offset); a form body got a 422 about 'a valid dictionary'."""
    search = "/v1/indexes/sample/search"
    with service.client() as client:
        for body, field in (({"query": "   "}, "query"), ({"query": {"query_txt": "\t \n"}}, "query.query_txt")):
            reply = client.post(search, json=body)
            assert reply.status_code == 422 and reply.json()["field"] == field, reply.text
            assert "white space" in reply.json()["detail"], reply.text
        blank_batch = client.post("/v1/indexes/sample/batch", json={"queries": [{"query": " "}]})
        assert blank_batch.status_code == 422 and blank_batch.json()["field"] == "queries.0.query", blank_batch.text
        broken = client.post(search, content='{\n  "query": "cells",\n  "hits": }',
                             headers={"content-type": "application/json"})
        assert broken.status_code == 422 and broken.json() == {
            "detail": "body: not valid JSON: Expecting value at line 3, column 11", "field": "body"}, broken.text
        form = client.post(search, data={"query": "cells"})
        assert form.status_code == 415 and form.json() == {
            "detail": "body: send JSON with 'Content-Type: application/json', not 'application/x-www-form-urlencoded'",
            "field": "body"}, form.text
        untyped = client.post(search, content='{"query": "cells"}')  # no Content-Type: FastAPI reads no JSON
        assert untyped.status_code == 415 and "without a Content-Type" in untyped.json()["detail"], untyped.text


def test_an_access_log_line_per_request_and_start_up_lines_once(service_indexes, tmp_path):
    """Finding 5: no access log appeared although --help implies one; "ready" and a load error were
    printed twice."""
    with Service("--index", f"bm25={service_indexes['bm25']}", folder=tmp_path) as running:
        with running.client() as client:
            assert client.post("/v1/indexes/bm25/search", json={"query": "cells"}).status_code == 200
            assert client.get("/v1/indexes/nope/status").status_code == 404
        assert running.stop(signal.SIGTERM) == 0
    log = running.log.read_text().splitlines()
    assert [line for line in log if line.startswith("ready")] == ["ready: bm25"], log
    assert any(re.fullmatch(r"POST /v1/indexes/bm25/search 200 \d+\.\d ms", line) for line in log), log
    assert any(re.fullmatch(r"GET /v1/indexes/nope/status 404 \d+\.\d ms", line) for line in log), log
    failed = run_tool("serve", "--index", f"bm25={service_indexes['bm25']}", "--engine", "dense", "--port", "0")
    assert failed.returncode == 2 and len(error_lines(failed)) == 1, failed.stderr
    quiet = tmp_path / "quiet"
    quiet.mkdir()
    with Service("--index", f"bm25={service_indexes['bm25']}", "--quiet", folder=quiet) as running:
        with running.client() as client:
            client.get("/healthz")
        running.stop(signal.SIGTERM)
    assert "GET /healthz" not in running.log.read_text()


def test_the_fixed_limits_are_one_modules_in_every_front_end():
    """The index name, docid and query id limits of serve/schemas.py are what the REST routes, Pyserini 2's
    routes, the MCP tools and the served config's names enforce (no front end with its own number)."""
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.serve.app import build_app
    from lsr_pyserini.serve.backend import Backend
    from lsr_pyserini.serve.mcp import create_mcp
    from lsr_pyserini.serve.schemas import DOCID_CHARS, INDEX_NAME_CHARS, QID_CHARS
    from lsr_pyserini.serve.served import IndexSpec, ServiceConfig, index_spec

    assert (INDEX_NAME_CHARS, DOCID_CHARS, QID_CHARS) == (64, 512, 256)
    index_spec("a" * INDEX_NAME_CHARS, {"index": "x"}, "test")
    with pytest.raises(InputError, match=f"at most {INDEX_NAME_CHARS}"):
        index_spec("a" * (INDEX_NAME_CHARS + 1), {"index": "x"}, "test")
    backend = Backend(ServiceConfig(indexes=(IndexSpec("one", {"index": "unused"}),)))
    schema = build_app(backend, load=False).openapi()
    lengths = {}
    for path, operations in schema["paths"].items():
        for operation in operations.values():
            for parameter in operation.get("parameters", []):
                lengths.setdefault(parameter["name"], set()).add(parameter["schema"].get("maxLength"))
    assert lengths["index"] == {INDEX_NAME_CHARS} and lengths["docid"] == {DOCID_CHARS}
    assert schema["components"]["schemas"]["BatchQuery"]["properties"]["qid"]["maxLength"] == QID_CHARS
    tools = {tool.name: tool for tool in asyncio.run(create_mcp(backend).list_tools())}
    arguments = tools["get_qrels"].parameters["properties"]
    assert arguments["index_name"]["maxLength"] == INDEX_NAME_CHARS and arguments["query_id"]["maxLength"] == QID_CHARS
    assert tools["get_document"].parameters["properties"]["docid"]["maxLength"] == DOCID_CHARS
