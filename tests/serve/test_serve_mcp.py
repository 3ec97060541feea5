"""The MCP tools (serve/mcp.py): in process over a loaded Backend, their answers checked against a
Searcher of the same index; then over HTTP at a keyed service's /mcp."""
from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from conftest import SAMPLE, run_tool
from service import Service, sample_queries

pytestmark = pytest.mark.xdist_group("serve")  # one worker: the sample indexes built once

TOOLS = {"search", "get_document", "list_indexes", "get_index", "explain", "fuse_search_results", "get_qrels",
         "eval_hits"}
MAX_HITS, MAX_QUERY_CHARS = 50, 300
SAMPLE_TITLES = {(record := json.loads(line))["_id"]: record["title"]
                 for line in (SAMPLE / "corpus.jsonl").read_text().splitlines() if line.strip()}


@pytest.fixture(scope="module")
def indexes(service_indexes):
    return service_indexes


@pytest.fixture(scope="module")
def backend(indexes):
    import lsr_pyserini

    lsr_pyserini.start_jvm()  # before anything imports pyserini
    from lsr_pyserini.serve.backend import Backend
    from lsr_pyserini.serve.served import build_config, index_spec

    from conftest import SAMPLE

    specs = [index_spec("sample", {"index": str(indexes["splade"]), "encoder": "splade-tiny",
                                   "qrels": str(SAMPLE / "qrels.test.trec")}, "test"),
             index_spec("sample-bm25", {"index": str(indexes["bm25"])}, "test")]
    backend = Backend(build_config(specs, {"max_hits": MAX_HITS, "max_query_chars": MAX_QUERY_CHARS}))
    backend.load()
    yield backend
    backend.close()


@pytest.fixture(scope="module")
def searchers(backend, indexes):
    """The reference: Searchers of the same indexes, opened apart from the backend's."""
    import lsr_pyserini

    opened = {"sample": lsr_pyserini.Searcher(str(indexes["splade"]), encoder="splade-tiny"),
              "sample-bm25": lsr_pyserini.Searcher(str(indexes["bm25"]))}
    yield opened
    for searcher in opened.values():
        searcher.close()


def calls(backend, *requests: tuple[str, dict]) -> list:
    """Each (tool, arguments)'s structured result, or the ToolError it raised, over one in-process
    session."""
    from fastmcp import Client
    from fastmcp.exceptions import ToolError

    from lsr_pyserini.serve.mcp import create_mcp

    async def session():
        results = []
        async with Client(create_mcp(backend)) as client:
            for tool, arguments in requests:
                try:
                    result = await client.call_tool(tool, arguments)
                except ToolError as err:
                    results.append(err)
                    continue
                content = result.structured_content
                results.append(content["result"] if set(content) == {"result"} else content)
        return results

    return asyncio.run(session())


def pairs(hits) -> list[tuple[str, float]]:
    return [(hit["docid"], hit["score"]) for hit in hits]


def test_tools_are_listed_with_pyserini_arguments_and_the_service_bounds(backend):
    from fastmcp import Client

    from lsr_pyserini.serve.mcp import create_mcp

    async def listed():
        async with Client(create_mcp(backend)) as client:
            return {tool.name: tool for tool in await client.list_tools()}

    tools = asyncio.run(listed())
    assert set(tools) == TOOLS
    schema = {name: tool.input_schema["properties"] for name, tool in tools.items()}
    assert set(schema["search"]) == {"query", "index_name", "k"}
    assert set(schema["get_document"]) == {"docid", "index_name"}
    assert set(schema["list_indexes"]) == {"index_type"}
    assert set(schema["get_index"]) == {"index_name"}
    assert set(schema["explain"]) == {"query", "index_name", "docids", "k"}
    # Pyserini 2.3's (pyserini/server/mcp/tools.py): the same argument names and defaults
    assert set(schema["fuse_search_results"]) == {"results1", "results2", "hits"}
    assert schema["fuse_search_results"]["hits"]["default"] == 10
    assert set(schema["get_qrels"]) == {"index_name", "query_id"}
    assert set(schema["eval_hits"]) == {"index_name", "metric", "query_id", "hits", "cutoff"}
    assert schema["eval_hits"]["cutoff"]["default"] == 10
    assert set(schema["eval_hits"]["metric"]["enum"]) == {"ndcg", "recall", "map", "recip_rank"}
    assert schema["search"]["k"]["maximum"] == MAX_HITS and schema["search"]["k"]["minimum"] == 1
    assert all(tool.annotations.read_only_hint for tool in tools.values())


def test_search_equals_the_searcher_with_texts(backend, searchers):
    queries = [text for _, text in sample_queries()]
    requests = [("search", {"query": text, "k": 5}) for text in queries]
    requests += [("search", {"query": text, "index_name": "sample-bm25", "k": 5}) for text in queries]
    results = calls(backend, *requests)
    for position, (tool, arguments) in enumerate(requests):
        searcher = searchers[arguments.get("index_name", "sample")]
        hits = results[position]
        expected = searcher.search(arguments["query"], k=5)
        assert pairs(hits) == [(hit.docid, hit.score) for hit in expected]
        assert [hit["rank"] for hit in hits] == list(range(1, len(hits) + 1))
        assert [hit["text"] for hit in hits] == searcher.docs([hit.docid for hit in expected])
    assert any(results[: len(queries)]), "the sample queries find documents"


def test_search_takes_pyserinis_query_object(backend):
    text = "does vitamin d prevent bone fractures"
    plain, as_object = calls(backend, ("search", {"query": text, "k": 3}),
                             ("search", {"query": {"qid": "q1", "query_txt": text}, "index_name": "sample", "k": 3}))
    assert plain == as_object and len(plain) == 3


def test_get_document_list_indexes_and_get_index(backend, searchers):
    docid = searchers["sample"].search("vaccines and immune memory", k=1)[0].docid
    document, everything, impact, tf, dense, status = calls(
        backend, ("get_document", {"docid": docid, "index_name": "sample"}), ("list_indexes", {}),
        ("list_indexes", {"index_type": "impact"}), ("list_indexes", {"index_type": "tf"}),
        ("list_indexes", {"index_type": "dense"}), ("get_index", {"index_name": "sample"}))
    assert document == {"docid": docid, "text": searchers["sample"].doc(docid), "title": SAMPLE_TITLES[docid]}
    assert everything == ["sample", "sample-bm25"]
    assert (impact, tf, dense) == (["sample"], ["sample-bm25"], [])
    assert status["name"] == "sample" and status["kind"] == "impact" and status["engine"] == "lucene"
    assert status["encoder"] == "splade-tiny" and status["documents"] == 12 and status["version"] == 1


def test_titles_come_apart_from_the_text_from_shards_and_stored_raw(backend):
    """Issue 45 (the page's title set apart): each hit and document carries its title alone beside
    the whole text (document_txt and contents unchanged, beginning with it), from the shards the
    impact index was built from ('sample') and from a --storeRaw index's raw JSON ('sample-bm25')."""
    text = "does vitamin d prevent bone fractures"
    for name in ("sample", "sample-bm25"):
        answer = asyncio.run(backend.search(name, text, hits=5, explain=True))
        assert answer["candidates"], name
        for candidate in answer["candidates"]:
            assert candidate["title"] == SAMPLE_TITLES[candidate["docid"]], (name, candidate)
            assert candidate["document_txt"].startswith(candidate["title"] + " "), (name, candidate)
        document = backend.document(name, "s1")
        assert document["title"] == "Vitamin D and bone health", (name, document)
        assert document["contents"].startswith("Vitamin D and bone health Vitamin D helps")
        assert list(document) == ["id", "contents", "title"]
        hits, got = calls(backend, ("search", {"query": text, "index_name": name, "k": 3}),
                          ("get_document", {"docid": "s1", "index_name": name}))
        assert [hit["title"] for hit in hits] == [SAMPLE_TITLES[hit["docid"]] for hit in hits]
        assert got == {"docid": "s1", "text": document["contents"], "title": document["title"]}


def test_shards_and_indexes_written_before_titles_were_kept_answer_without_one(indexes, tmp_path):
    """Old shards (records without `title`) and a --storeRaw index built from them: the text as
    before, no title."""
    import lsr_pyserini
    from lsr_pyserini.stores.documents import ShardDocuments

    old = tmp_path / "vectors"
    old.mkdir()
    for shard in sorted(indexes["vectors"].glob("part-*.jsonl")):
        records = [json.loads(line) for line in shard.read_text().splitlines() if line.strip()]
        assert all("title" in record for record in records)  # the sample is titled
        (old / shard.name).write_text("".join(json.dumps({k: v for k, v in record.items() if k != "title"},
                                                         ensure_ascii=False) + "\n" for record in records))
    expected = ShardDocuments(indexes["vectors"]).text("s1")
    assert ShardDocuments(old).document("s1") == {"contents": expected}
    assert ShardDocuments(indexes["vectors"]).document("s1") == {"contents": expected, "title": SAMPLE_TITLES["s1"]}
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", old, "--index", tmp_path / "raw",
             "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1",
             "--storeRaw", check=True)  # no shards' manifest beside them: texts from the stored raw JSON
    searcher = lsr_pyserini.Searcher(str(tmp_path / "raw"), encoder="splade-tiny")
    try:
        assert searcher.doc_fields(["s1", "nope"]) == [{"contents": expected}, None]
        assert searcher.docs(["s1"]) == [expected]
    finally:
        searcher.close()


def test_a_sharded_index_gives_each_document_its_title(indexes, tmp_path):
    """Lucene indexes searched as one (engine 'sharded'): each document's title from its own shard."""
    import lsr_pyserini

    lines = (indexes["vectors"] / "part-00000.jsonl").read_text().splitlines(keepends=True)
    shards = []
    for group in range(2):
        (tmp_path / f"v{group}").mkdir()
        (tmp_path / f"v{group}" / "part-00000.jsonl").write_text("".join(lines[group::2]))
        shards.append(tmp_path / f"i{group}")
        run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", tmp_path / f"v{group}",
                 "--index", shards[-1], "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
                 "--threads", "1", "--storeRaw", check=True)
    searcher = lsr_pyserini.Searcher(",".join(map(str, shards)), encoder="splade-tiny")
    try:
        found = searcher.doc_fields(["s1", "s2", "nope"])
        assert [fields and fields["title"] for fields in found] == [SAMPLE_TITLES["s1"], SAMPLE_TITLES["s2"], None]
        assert [fields["contents"] for fields in found[:2]] == searcher.docs(["s1", "s2"])
    finally:
        searcher.close()


def test_explain_terms_sum_to_the_score_and_docids_explain_the_same(backend, searchers):
    text = "drugs that reduce cholesterol and heart attacks"
    expected = searchers["sample"].search(text, k=4, explain=True)
    top, named = calls(backend, ("explain", {"query": text, "k": 4}),
                       ("explain", {"query": text, "docids": [expected[3].docid, expected[0].docid], "k": 1}))
    assert pairs(top) == [(hit.docid, hit.score) for hit in expected]
    for hit, reference in zip(top, expected):
        assert hit["explained"] == "score" and hit["terms"], hit
        assert sum(term["contribution"] for term in hit["terms"]) == pytest.approx(hit["score"])
        assert [(term["term"], term["contribution"]) for term in hit["terms"]] == \
            [(match.term, match.contribution) for match in reference.terms]
        for term in hit["terms"]:
            assert term["contribution"] == pytest.approx(term["query_weight"] * term["document_weight"])
    # documents named: the 4th and the 1st, in that order, whatever k says; unranked, the same terms
    assert [hit["docid"] for hit in named] == [expected[3].docid, expected[0].docid]
    by_docid = {hit["docid"]: hit for hit in top}
    for hit in named:
        assert hit["rank"] is None and hit["score"] == by_docid[hit["docid"]]["score"]
        assert hit["terms"] == by_docid[hit["docid"]]["terms"]


def test_fuse_search_results_fuses_as_the_toolkit_and_orders_as_pyserini(backend):
    from lsr_pyserini.core.fusion import fuse

    results1 = [{"docid": "a", "score": 12.0}, {"docid": "b", "score": 9.5}, {"docid": "c", "score": 3.0}]
    results2 = [{"docid": "c", "score": 0.91}, {"docid": "d", "score": 0.55}, {"docid": "a", "score": 0.2},
                {"docid": "e", "score": 0.1}]
    fused, top2, one_empty = calls(backend, ("fuse_search_results", {"results1": results1, "results2": results2}),
                                   ("fuse_search_results", {"results1": results1, "results2": results2, "hits": 2}),
                                   ("fuse_search_results", {"results1": results1, "results2": []}))
    runs = [{"q": [(hit["docid"], hit["score"]) for hit in hits]} for hits in (results1, results2)]
    assert [(hit["docid"], hit["score"]) for hit in fused] == fuse(runs, method="minmax")["q"]
    assert top2 == fused[:2]
    assert [hit["docid"] for hit in one_empty] == ["a", "b", "c"]

    def pyserini(hits1, hits2):  # HybridSearcher._hybrid_results(results1, results2, 1, k, normalization=True)
        first, second = ({hit["docid"]: hit["score"] for hit in hits} for hits in (hits1, hits2))
        low1, high1, low2, high2 = min(first.values()), max(first.values()), min(second.values()), max(second.values())
        return {doc: (first.get(doc, low1) - (low1 + high1) / 2) / (high1 - low1)
                + (second.get(doc, low2) - (low2 + high2) / 2) / (high2 - low2) for doc in first.keys() | second.keys()}

    theirs = pyserini(results1, results2)
    assert [hit["docid"] for hit in fused] == sorted(theirs, key=lambda doc: -theirs[doc])
    assert [hit["score"] for hit in fused] == pytest.approx([(theirs[hit["docid"]] + 1) / 2 for hit in fused])


def test_get_qrels_and_eval_hits_read_the_indexs_qrels(backend, searchers):
    import math

    from conftest import SAMPLE
    from lsr_pyserini.core.readers import read_qrels

    judged = read_qrels(str(SAMPLE / "qrels.test.trec"))["q5"]  # two relevant documents
    text = dict(sample_queries())["q5"]
    hits = {hit.docid: hit.score for hit in searchers["sample"].search(text, k=10)}
    ranked = sorted(hits, key=lambda doc: -hits[doc])
    qrels, unjudged, ndcg, recall, rr, ap = calls(
        backend, ("get_qrels", {"index_name": "sample", "query_id": "q5"}),
        ("get_qrels", {"index_name": "sample", "query_id": "q404"}),
        ("eval_hits", {"index_name": "sample", "metric": "ndcg", "query_id": "q5", "hits": hits}),
        ("eval_hits", {"index_name": "sample", "metric": "recall", "query_id": "q5", "hits": hits, "cutoff": 3}),
        ("eval_hits", {"index_name": "sample", "metric": "recip_rank", "query_id": "q5", "hits": hits, "cutoff": 5}),
        ("eval_hits", {"index_name": "sample", "metric": "map", "query_id": "q5", "hits": hits}))
    assert qrels == {docid: str(relevance) for docid, relevance in judged.items()} and unjudged == {}
    relevant = [rank for rank, doc in enumerate(ranked, 1) if judged.get(doc, 0) > 0]
    ideal = sum(1 / math.log2(rank + 1) for rank in range(1, len(judged) + 1))
    assert ndcg == pytest.approx(sum(1 / math.log2(rank + 1) for rank in relevant if rank <= 10) / ideal, abs=1e-4)
    assert recall == pytest.approx(sum(rank <= 3 for rank in relevant) / len(judged), abs=1e-4)
    assert rr == pytest.approx(1 / relevant[0] if relevant and relevant[0] <= 5 else 0.0, abs=1e-4)
    assert ap == pytest.approx(sum(position / rank for position, rank in enumerate(relevant, 1)) / len(judged),
                               abs=1e-4)
    assert 0 < ndcg <= 1 and relevant, "the sample's query finds a relevant document"


def test_refusals_are_one_line_tool_errors(backend, searchers):
    from fastmcp.exceptions import ToolError

    docid = searchers["sample"].search("coral bleaching", k=1)[0].docid
    refusals = {
        "unknown index (search)": (("search", {"query": "x", "index_name": "nope"}), "index 'nope': not served here"),
        "unknown index (document)": (("get_document", {"docid": docid, "index_name": "nope"}), "not served here"),
        "unknown index (status)": (("get_index", {"index_name": "nope"}), "not served here"),
        "unknown index (explain)": (("explain", {"query": "x", "index_name": "nope"}), "not served here"),
        "unknown document": (("get_document", {"docid": "no-such-doc", "index_name": "sample"}),
                             "document 'no-such-doc': not in index 'sample'"),
        "unknown document (explain)": (("explain", {"query": "x", "docids": [docid, "no-such-doc"]}),
                                       "document 'no-such-doc': not in index 'sample'"),
        "k 0": (("search", {"query": "x", "k": 0}), "k: "),
        "k over max_hits": (("search", {"query": "x", "k": MAX_HITS + 1}), "k: "),
        "k over max_hits (explain)": (("explain", {"query": "x", "k": MAX_HITS + 1}), "k: "),
        "k not a number": (("search", {"query": "x", "k": "many"}), "k: "),
        "empty query": (("search", {"query": ""}), "query"),
        "long query": (("search", {"query": "a" * (MAX_QUERY_CHARS + 1)}), "query"),
        "long query object": (("search", {"query": {"query_txt": "a" * (MAX_QUERY_CHARS + 1)}}),
                              f"query: longer than {MAX_QUERY_CHARS} characters"),
        "no query": (("search", {}), "query: "),
        "unknown kind": (("list_indexes", {"index_type": "faiss"}), "index_type: "),
        "no docids": (("explain", {"query": "x", "docids": []}), "docids: "),
        "unknown metric": (("eval_hits", {"index_name": "sample", "metric": "P", "query_id": "q5",
                                          "hits": {docid: 1.0}}), "metric: "),
        "no qrels (eval)": (("eval_hits", {"index_name": "sample-bm25", "metric": "ndcg", "query_id": "q5",
                                           "hits": {docid: 1.0}}), "index 'sample-bm25': no qrels configured"),
        "no qrels (get)": (("get_qrels", {"index_name": "sample-bm25", "query_id": "q5"}), "no qrels configured"),
        "unknown index (qrels)": (("get_qrels", {"index_name": "nope", "query_id": "q5"}), "not served here"),
        "unjudged query": (("eval_hits", {"index_name": "sample", "metric": "ndcg", "query_id": "q404",
                                          "hits": {docid: 1.0}}), "query 'q404': not judged"),
        "cutoff 0": (("eval_hits", {"index_name": "sample", "metric": "ndcg", "query_id": "q5",
                                    "hits": {docid: 1.0}, "cutoff": 0}), "cutoff: "),
        "docid with a space": (("eval_hits", {"index_name": "sample", "metric": "ndcg", "query_id": "q5",
                                              "hits": {"a b": 1.0}}), "hits."),
        "fuse hits 0": (("fuse_search_results", {"results1": [], "results2": [], "hits": 0}), "hits: "),
        "fuse no score": (("fuse_search_results", {"results1": [{"docid": "a"}], "results2": []}), "results1.0.score"),
    }
    results = calls(backend, *[request for request, _ in refusals.values()])
    for (case, (_, message)), result in zip(refusals.items(), results):
        assert isinstance(result, ToolError), f"{case}: answered {result!r}"
        assert message in str(result) and "\n" not in str(result), f"{case}: {result}"
        assert "Traceback" not in str(result) and "/" not in str(result), f"{case}: {result}"
    # and the service still answers
    assert calls(backend, ("search", {"query": "coral bleaching", "k": 1}))[0][0]["docid"] == docid


def test_the_app_mounts_mcp_behind_its_guards_and_no_mcp_leaves_it_out(indexes):
    """In process, through the whole app (body limit, routes, lifespan) with a backend not loaded:
    /mcp and /mcp/ answer tools/list; without keys (a loopback service) a foreign Origin or Host is
    refused (DNS rebinding); a body over the limit is 413; with mcp off there is no /mcp."""
    from dataclasses import replace

    from lsr_pyserini.serve.app import build_app
    from lsr_pyserini.serve.backend import Backend
    from lsr_pyserini.serve.served import build_config, index_spec

    config = build_config([index_spec("sample", {"index": str(indexes["splade"]), "encoder": "splade-tiny"}, "t")],
                          {"max_body_bytes": 4096})
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}

    async def requests(app, *asked):
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
                return [await client.post(path, headers={**accept, **headers}, **body) for path, headers, body in asked]

    app = build_app(Backend(config), load=False)
    answers = asyncio.run(requests(app, ("/mcp", {}, {"json": listing}), ("/mcp/", {}, {"json": listing}),
                                   ("/mcp", {"Origin": "http://evil.example"}, {"json": listing}),
                                   ("/mcp", {"Host": "evil.example"}, {"json": listing}),
                                   ("/mcp", {"Content-Type": "application/json"}, {"content": b" " * 5000})))
    for answer in answers[:2]:
        assert answer.status_code == 200, answer.text
        data = [line[len("data: "):] for line in answer.text.splitlines() if line.startswith("data: ")]
        assert {tool["name"] for tool in json.loads(data[0])["result"]["tools"]} == TOOLS
    assert [answer.status_code for answer in answers[2:]] == [403, 421, 413]
    without = build_app(Backend(replace(config, mcp=False)), load=False)
    assert not [route for route in without.routes if getattr(route, "path", "").startswith("/mcp")]
    refused = asyncio.run(requests(without, ("/mcp", {}, {"json": listing})))[0]
    assert refused.status_code == 404 and refused.json()["detail"] == "Not Found"


def test_mcp_over_http_needs_the_services_key(indexes, tmp_path):
    from fastmcp import Client
    from fastmcp.client.transports import StreamableHttpTransport

    key = "k3y-" + "0123456789abcdef" * 2
    key_file = tmp_path / "api-key"
    key_file.write_text(key[:32] + "\n")
    key = key[:32]
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    accept = {"Accept": "application/json, text/event-stream"}
    with Service("--index", f"sample={indexes['splade']}", "--encoder", "splade-tiny", "--api-key-file", key_file,
                 "--quiet", folder=tmp_path) as service:
        for headers in ({}, {"Authorization": "Bearer wrong-key-wrong-key-wrong-key-"}, {"Authorization": key}):
            refused = httpx.post(f"{service.url}/mcp", json=listing, headers={**accept, **headers}, timeout=30)
            assert refused.status_code == 401, refused.text
            assert refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["field"] == "authorization"
        # X-API-Key, as Pyserini 2's clients send it, opens /mcp as a bearer token does
        listed = httpx.post(f"{service.url}/mcp", json=listing, headers={**accept, "X-API-Key": key}, timeout=30)
        assert listed.status_code == 200 and '"fuse_search_results"' in listed.text, listed.text

        async def session(url):
            async with Client(StreamableHttpTransport(url, auth=key)) as client:
                tools = {tool.name for tool in await client.list_tools()}
                found = await client.call_tool("search", {"query": "does vitamin d prevent bone fractures", "k": 3})
                return tools, found.structured_content["result"]

        for url in (f"{service.url}/mcp", f"{service.url}/mcp/"):
            tools, hits = asyncio.run(session(url))
            assert tools == TOOLS
            with service.client(headers={"Authorization": f"Bearer {key}"}) as rest:
                answer = rest.post("/v1/indexes/sample/search", json={"query": "does vitamin d prevent bone fractures",
                                                                       "hits": 3})
            assert pairs(hits) == pairs(answer.json()["candidates"]) and len(hits) == 3
            assert [hit["text"] for hit in hits] == [hit["document_txt"] for hit in answer.json()["candidates"]]
        with service.client() as rest:
            assert not any(path.startswith("/mcp") for path in rest.get("/openapi.json").json()["paths"])
        assert service.stop() == 0
