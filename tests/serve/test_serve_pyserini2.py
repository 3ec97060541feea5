"""Pyserini 2's and Anserini's REST routes (serve/rest2.py), through a client written for Pyserini 2:
it checks every field of Pyserini 2.3's response models (pyserini/server/rest/openapi.yaml:
SearchResponse, Candidate, Query, DocumentResponse, ErrorResponse), against a Searcher of the same
index; then its refusals, statuses and keys (X-API-Key or a bearer token). In process, over a
loaded Backend, through the whole app."""
from __future__ import annotations

import asyncio
import json
from dataclasses import replace

import httpx
import pytest

pytestmark = pytest.mark.xdist_group("serve")  # one worker: the sample indexes built once

KEY = "k3y-0123456789abcdef0123456789ab"
MAX_HITS, MAX_QUERY_CHARS = 50, 300


class Pyserini2Client:
    """What a client of Pyserini 2's REST server reads: each response model's fields, typed as its
    openapi.yaml says, all present; errors as `{"error": string}`."""

    def __init__(self, app, headers: dict | None = None):
        self.app, self.headers = app, headers or {}

    def get(self, path: str, headers: dict | None = None, **params) -> httpx.Response:
        async def fetch():
            transport = httpx.ASGITransport(app=self.app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
                return await client.get(path, params=params, headers={**self.headers, **(headers or {})})

        return asyncio.run(fetch())

    def search(self, index: str, query: str, **params) -> dict:
        answer = self.get(f"/v1/{index}/search", query=query, **params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert set(body) == {"api", "index", "query", "candidates"}, body
        assert body["api"] == "v1" and body["index"] == index and body["query"] == {"text": query}
        for rank, candidate in enumerate(body["candidates"], 1):
            assert set(candidate) == {"docid", "score", "rank", "doc"}, candidate
            assert isinstance(candidate["docid"], str) and isinstance(candidate["score"], float)
            assert candidate["rank"] == rank
            assert candidate["doc"] is None or isinstance(candidate["doc"], str)
        return body

    def doc(self, index: str, docid: str, **params) -> dict:
        answer = self.get(f"/v1/{index}/doc/{docid}", **params)
        assert answer.status_code == 200, answer.text
        body = answer.json()
        assert set(body) == {"api", "index", "docid", "doc"}, body
        assert body["api"] == "v1" and body["index"] == index and body["docid"] == docid
        return body

    def refused(self, path: str, status: int, headers: dict | None = None, **params) -> httpx.Response:
        answer = self.get(path, headers=headers, **params)
        assert answer.status_code == status, answer.text
        body = answer.json()
        assert set(body) == {"error"} and isinstance(body["error"], str) and body["error"], body
        assert "\n" not in body["error"] and "Traceback" not in body["error"], body
        return answer


@pytest.fixture(scope="module")
def backend(service_indexes):
    import lsr_pyserini

    lsr_pyserini.start_jvm()
    from lsr_pyserini.serve.backend import Backend
    from lsr_pyserini.serve.served import build_config, index_spec

    specs = [index_spec("sample", {"index": str(service_indexes["splade"]), "encoder": "splade-tiny"}, "test"),
             index_spec("sample-bm25", {"index": str(service_indexes["bm25"])}, "test")]
    config = build_config(specs, {"max_hits": MAX_HITS, "max_query_chars": MAX_QUERY_CHARS})
    backend = Backend(replace(config, api_key=KEY))
    backend.load()
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def client(backend):
    from lsr_pyserini.serve.app import build_app

    return Pyserini2Client(build_app(backend, load=False), {"X-API-Key": KEY})


@pytest.fixture(scope="module")
def searcher(service_indexes):
    import lsr_pyserini

    opened = lsr_pyserini.Searcher(str(service_indexes["splade"]), encoder="splade-tiny")
    yield opened
    opened.close()


def test_search_and_doc_answer_pyserini_2s_models_with_the_searchers_hits(client, searcher):
    text = "does vitamin d prevent bone fractures"
    expected = searcher.search(text, k=5)
    body = client.search("sample", text, hits=5)
    assert [(hit["docid"], hit["score"]) for hit in body["candidates"]] == [(hit.docid, hit.score) for hit in expected]
    assert [hit["doc"] for hit in body["candidates"]] == searcher.docs([hit.docid for hit in expected])
    assert len(client.search("sample", text)["candidates"]) == 10 or len(expected) < 10  # hits: 10 by default
    # parse=false: the document as JSON, {"id", "contents"}; max_doc_length cuts parsed texts
    raw = client.search("sample", text, hits=2, parse="false")["candidates"]
    assert [json.loads(hit["doc"]) for hit in raw] == [{"id": hit.docid, "contents": searcher.doc(hit.docid)}
                                                       for hit in expected[:2]]
    short = client.search("sample", text, hits=2, parse="TRUE", max_doc_length=12)["candidates"]
    assert [hit["doc"] for hit in short] == [searcher.doc(hit.docid)[:12] for hit in expected[:2]]
    docid = expected[0].docid
    assert client.doc("sample", docid)["doc"] == searcher.doc(docid)
    assert client.doc("sample", docid, max_doc_length=7)["doc"] == searcher.doc(docid)[:7]
    as_json = client.doc("sample", docid, parse="false")["doc"]
    assert json.loads(as_json) == {"id": docid, "contents": searcher.doc(docid)}
    bm25 = client.search("sample-bm25", "inverted index for search engines", hits=3)
    assert bm25["candidates"] and all(hit["doc"] for hit in bm25["candidates"])


def test_refusals_are_pyserini_2s(client):
    refusals = {  # (path, params) -> (status, what the error says)
        ("/v1/sample/search", ()): (400, "Parameter 'query' is required"),
        ("/v1/sample/search", (("query", "   "),)): (400, "Parameter 'query' is required"),
        ("/v1/sample/search", (("query", "x"), ("hits", "0"))): (400, "Parameter 'hits' must be positive"),
        ("/v1/sample/search", (("query", "x"), ("hits", "ten"))): (400, "Parameter 'hits' must be an integer"),
        ("/v1/sample/search", (("query", "x"), ("hits", str(MAX_HITS + 1)))):
            (400, f"Parameter 'hits' must be at most {MAX_HITS}"),
        ("/v1/sample/search", (("query", "a" * (MAX_QUERY_CHARS + 1)),)): (400, "Parameter 'query' must be at most"),
        ("/v1/sample/search", (("query", "x"), ("parse", "yes"))): (400, "Parameter 'parse' must be 'true' or 'false'"),
        ("/v1/sample/search", (("query", "x"), ("parse", "false"), ("max_doc_length", "5"))):
            (400, "Parameter 'max_doc_length' requires parse=true"),
        ("/v1/sample/search", (("query", "x"), ("max_doc_length", "0"))):
            (400, "Parameter 'max_doc_length' must be positive"),
        ("/v1/sample/search", (("query", "x"), ("k1", "0.9"), ("b", "0.4"))): (400, "Parameter 'k1' is not supported"),
        ("/v1/nope/search", (("query", "x"),)): (400, "index 'nope': not served here"),
        ("/v1/nope/doc/s1", ()): (400, "index 'nope': not served here"),
        ("/v1/sample/doc/no-such-doc", ()): (404, "Document not found: no-such-doc"),
        ("/v1/sample/doc/s1", (("parse", "0"),)): (400, "Parameter 'parse' must be 'true' or 'false'"),
    }
    for (path, params), (status, message) in refusals.items():
        answer = client.refused(path, status, **dict(params))
        assert message in answer.json()["error"], (path, params, answer.json())


def test_keys_as_x_api_key_or_bearer_and_refusals_as_pyserini_2s(client, backend):
    from lsr_pyserini.serve.batching import Overloaded

    path, query = "/v1/sample/search", {"query": "coral bleaching", "hits": 1}
    anonymous = Pyserini2Client(client.app)
    for headers in ({}, {"X-API-Key": "wrong-" + KEY}, {"Authorization": f"Bearer wrong-{KEY}"},
                    {"Authorization": KEY}):
        refused = anonymous.refused(path, 401, headers=headers, **query)
        assert refused.headers["www-authenticate"] == "Bearer"
        anonymous.refused("/v1/sample/doc/s1", 401, headers=headers)
    for headers in ({"X-API-Key": KEY}, {"Authorization": f"Bearer {KEY}"},
                    {"X-API-Key": "wrong-" + KEY, "Authorization": f"Bearer {KEY}"}):
        assert anonymous.get(path, headers=headers, **query).status_code == 200
    # the Pyserini 1.6 routes take X-API-Key too, and keep their own refusal shape
    assert anonymous.get("/v1/indexes", headers={"X-API-Key": KEY}).json() == ["sample", "sample-bm25"]
    assert set(anonymous.get("/v1/indexes").json()) == {"detail", "field"}

    def full(*args, **kwargs):
        raise Overloaded()

    submit, backend.submit = backend.submit, full
    try:
        busy = client.refused(path, 429, **query)
    finally:
        backend.submit = submit
    assert busy.headers["retry-after"] == "1"
    assert client.get(path, **query).status_code == 200


def test_while_loading_503_with_retry_after(service_indexes):
    from lsr_pyserini.serve.app import build_app
    from lsr_pyserini.serve.backend import Backend
    from lsr_pyserini.serve.served import build_config, index_spec

    config = build_config([index_spec("sample", {"index": str(service_indexes["bm25"])}, "t")], {})
    loading = Pyserini2Client(build_app(Backend(config), load=False))
    for path, params in (("/v1/sample/search", {"query": "x"}), ("/v1/sample/doc/s1", {})):
        assert loading.refused(path, 503, **params).headers["retry-after"] == "1"


def test_an_index_named_indexes_and_missing_qrels_are_refused_in_one_line(service_indexes, tmp_path):
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.serve.__main__ import build_parser, config_from

    index = str(service_indexes["bm25"])
    with pytest.raises(InputError) as named:
        config_from(build_parser().parse_args(["--index", f"indexes={index}"]))
    assert "index name 'indexes' is taken" in str(named.value) and "\n" not in str(named.value)
    with pytest.raises(InputError) as missing:
        config_from(build_parser().parse_args(["--index", f"bm25={index}", "--qrels", str(tmp_path / "none.txt")]))
    assert str(missing.value) == f"index 'bm25': qrels {tmp_path / 'none.txt'}: no such file"
    config = tmp_path / "serve.yaml"
    (tmp_path / "qrels.txt").write_text("q1 0 s1 1\nq1 0 s1\n")
    config.write_text(f"indexes:\n  bm25:\n    index: {index}\n    qrels: qrels.txt\n")
    parsed = config_from(build_parser().parse_args(["--config", str(config)]))
    assert parsed.index("bm25").qrels == str(tmp_path / "qrels.txt")
    from lsr_pyserini.serve.backend import Backend

    with pytest.raises(InputError) as malformed:  # read when the service starts, before it loads an index
        Backend(parsed)
    assert f"{tmp_path / 'qrels.txt'}:2" in str(malformed.value) and "\n" not in str(malformed.value)
