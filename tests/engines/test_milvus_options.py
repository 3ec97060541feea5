"""The `milvus` command's flags and the `milvus` engine's options reach Milvus: each runs in this
process against an in-memory stand-in for a Milvus server (`pymilvus.MilvusClient` replaced by one
that keeps collections in a dict, searches them by inner product, and records what it is asked),
every flag at a non-default value. What a cluster alone does with the value (shards, replicas, a
token, the index algorithm) is what it is sent; what the toolkit does with it (queries cut by
drop_ratio_search and min_idf, run tags, refusals) is checked in the run. (A real milvus-lite
collection: tests/engines/test_milvus.py.)"""
from __future__ import annotations

import json

import numpy as np
import pymilvus  # pinned: a broken install fails, not skips
import pytest

# the real client class, whose schema and index builders need no server
from pymilvus import MilvusClient

from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.engines import build_engine
from lsr_pyserini.engines.milvus import command as milvus
from lsr_pyserini.engines.milvus.command import main

URI = "http://milvus.invalid:19530"  # a server's address: no milvus-lite database is opened
# four documents: "rare" in one (idf log 4), "common" in three (idf log 4/3), "every" in all (idf 0)
DOCUMENTS = {"d1": {"rare": 5, "common": 1, "every": 1}, "d2": {"common": 3, "every": 2},
             "d3": {"common": 2, "every": 4}, "d4": {"every": 1}}
QUERY = {"rare": 1, "common": 2, "every": 3}  # "every" is never searched (idf 0); "rare" is the smaller half


class FakeMilvus:
    """Collections in a dict; every connection's token, every search's query and what each
    collection was created and loaded with, recorded."""

    def __init__(self):
        self.collections, self.tokens, self.queries, self.loads, self.rankers, self.dropped = {}, [], [], [], [], []

    def client_class(self):
        server = self

        class Client:
            def __init__(self, uri, token="", timeout=None):
                server.tokens.append(token)

            create_schema = staticmethod(MilvusClient.create_schema)
            prepare_index_params = staticmethod(MilvusClient.prepare_index_params)

            def has_collection(self, name):
                return name in server.collections

            def describe_collection(self, name):
                return {"properties": dict(server.collections[name]["properties"])}

            def create_collection(self, name, schema, index_params, properties, **options):
                server.collections[name] = {"properties": dict(properties), "rows": {}, "options": options,
                                            "indexes": {index._field_name: index._configs for index in index_params}}

            def drop_collection(self, name):
                server.dropped.append(name)
                del server.collections[name]

            def upsert(self, name, rows):
                server.collections[name]["rows"].update((row["docid"], row) for row in rows)

            def flush(self, name):
                pass

            def alter_collection_properties(self, name, properties):
                server.collections[name]["properties"].update(properties)

            def load_collection(self, name, **options):
                server.loads.append(options)

            def search(self, name, data, anns_field, limit, output_fields, search_params):
                server.queries.extend(data)
                rows = server.collections[name]["rows"].values()
                results = []
                for query in data:
                    scores = [(row["docid"], sum(weight * row["sparse"].get(i, 0.0) for i, weight in query.items()))
                              for row in rows]
                    hits = sorted(((docid, score) for docid, score in scores if score > 0), key=lambda h: (-h[1], h[0]))
                    results.append([{"docid": docid, "distance": score} for docid, score in hits[:limit]])
                return results

            def hybrid_search(self, name, requests, ranker, limit, output_fields):
                server.rankers.append(ranker.dict())
                return [[{"docid": "d1", "distance": 1.0}]]

            def close(self):
                pass

        return Client

    def sent(self) -> list[set[str]]:
        """The terms of each query searched (ids turned back into terms by the collection's vocabulary)."""
        properties = next(iter(self.collections.values()))["properties"]
        vocabulary, _ = json.loads("".join(value for key, value in sorted(properties.items())
                                           if key.startswith("lsr.vocabulary.")))
        return [{vocabulary[i] for i in query} for query in self.queries]


@pytest.fixture
def server(monkeypatch):
    fake = FakeMilvus()
    monkeypatch.setattr(pymilvus, "MilvusClient", fake.client_class())
    yield fake
    release_outputs()


def write_shards(folder, documents=DOCUMENTS):
    folder.mkdir()
    (folder / "part-00000.jsonl").write_text("".join(json.dumps({"id": docid, "contents": "", "vector": vector}) + "\n"
                                                     for docid, vector in documents.items()))
    return folder


@pytest.fixture
def loaded(server, tmp_path):
    """Collection `c` of DOCUMENTS on the fake server, and an impact query file of QUERY."""
    main(["index", "--input", str(write_shards(tmp_path / "vectors")), "--uri", URI, "--collection", "c", "--quiet"])
    server.tokens.clear()
    topics = tmp_path / "queries.tsv"
    topics.write_text("q1\t" + " ".join(term for term, impact in QUERY.items() for _ in range(impact)) + "\n")
    return topics


def run_lines(path) -> list[list[str]]:
    return [line.split() for line in path.read_text().splitlines()]


def test_index_flags_reach_the_collection_milvus_creates(server, tmp_path):
    """--shards, --index-algorithm and --token-file are what the collection is created with and
    connected by; --overwrite replaces a collection of other input that is refused without it."""
    token = tmp_path / "token"
    token.write_text("user:secret\n")
    first = ["index", "--input", str(write_shards(tmp_path / "vectors")), "--uri", URI, "--collection", "c",
             "--quiet"]
    main(first + ["--shards", "3", "--index-algorithm", "DAAT_WAND", "--token-file", str(token)])
    created = server.collections["c"]
    assert created["options"] == {"num_shards": 3}
    assert created["indexes"]["sparse"]["inverted_index_algo"] == "DAAT_WAND"
    assert set(server.tokens) == {"user:secret"}
    other = ["index", "--input", str(write_shards(tmp_path / "other", {"d9": {"rare": 1}})), "--uri", URI,
             "--collection", "c", "--quiet"]
    with pytest.raises(InputError, match="holds other input .* --overwrite to replace it"):
        main(other)
    assert server.dropped == [] and sorted(server.collections["c"]["rows"]) == ["d1", "d2", "d3", "d4"]
    main(other + ["--overwrite"])
    assert server.dropped == ["c"] and sorted(server.collections["c"]["rows"]) == ["d9"]
    assert server.collections["c"]["options"] == {}  # created anew, without --shards this time


@pytest.mark.parametrize("flag", [["--shards", "2"], ["--index-algorithm", "DAAT_MAXSCORE"]])
def test_a_cluster_only_flag_on_a_milvus_lite_database_is_refused(server, tmp_path, flag):
    """milvus-lite accepts num_shards and inverted_index_algo and ignores them (measured: one shard,
    no algorithm in describe_index): refused in one line, before anything is loaded."""
    database = tmp_path / "lite.db"
    with pytest.raises(InputError, match=f"{flag[0]} .*milvus-lite database .*would ignore it"):
        main(["index", "--input", str(write_shards(tmp_path / "vectors")), "--uri", str(database),
              "--collection", "c", "--quiet", *flag])
    assert not database.exists() and server.collections == {}


def test_search_drop_ratio_and_min_idf_cut_the_query_milvus_searches(server, loaded, tmp_path):
    """--drop-ratio-search 0.5 sends the query without the smaller half of its weights ("rare");
    --min-idf 1 leaves out "common" (idf log 4/3); by default every term with idf > 0 is searched
    ("every", in every document, never is)."""
    base = ["search", "--uri", URI, "--collection", "c", "--topics", str(loaded), "--hits", "10"]
    main(base + ["--output", str(tmp_path / "exact.txt")])
    main(base + ["--output", str(tmp_path / "dropped.txt"), "--drop-ratio-search", "0.5"])
    main(base + ["--output", str(tmp_path / "idf.txt"), "--min-idf", "1.0"])
    assert server.sent() == [{"rare", "common"}, {"common"}, {"rare"}]
    assert [line[2] for line in run_lines(tmp_path / "exact.txt")] == ["d1", "d2", "d3"]  # d1 5 + 2 x 1, d2 2 x 3, d3 2 x 2
    assert [line[2] for line in run_lines(tmp_path / "dropped.txt")] == ["d2", "d3", "d1"]  # 2 x common only: 6, 4, 2
    assert [line[2] for line in run_lines(tmp_path / "idf.txt")] == ["d1"]


def test_search_run_flags_and_token(server, loaded, tmp_path):
    """--tag names the run; --overwrite replaces a run that is refused without it; --token-file's
    token is what search connects with; --unrecorded-topics searches query text refused without it."""
    token = tmp_path / "token"
    token.write_text("api-key-123\n")
    output = tmp_path / "run.txt"
    output.write_text("q1 Q0 d4 1 1.0 earlier\n")
    argv = ["search", "--uri", URI, "--collection", "c", "--topics", str(loaded), "--output", str(output)]
    with pytest.raises(InputError, match="--overwrite"):
        main(argv)
    release_outputs()
    server.tokens.clear()  # the refused search connected (without a token) before it looked at the output
    main(argv + ["--overwrite", "--tag", "mine", "--token-file", str(token)])
    assert {line[5] for line in run_lines(output)} == {"mine"} and len(run_lines(output)) == 3
    assert server.tokens == ["api-key-123"]
    text = tmp_path / "texts.tsv"
    text.write_text("q1\twhat is rare and common\n")  # query text: no record of `encode queries`
    searched = ["search", "--uri", URI, "--collection", "c", "--topics", str(text), "--output",
                str(tmp_path / "text-run.txt")]
    with pytest.raises(InputError, match="reads as query text.*--unrecorded-topics"):
        main(searched)
    release_outputs()
    main(searched + ["--unrecorded-topics"])
    assert [line[2] for line in run_lines(tmp_path / "text-run.txt")] == ["d1", "d2", "d3"]  # rare 5+1, common 3, 2


def test_search_rrf_k_is_the_hybrid_rankers(server, loaded, tmp_path, monkeypatch):
    """--rrf-k is the k of the RRFRanker Milvus's hybrid_search fuses with (the fusion itself, on
    milvus-lite: tests/engines/test_milvus.py::test_hybrid_search_is_rrf_fusion_of_the_two_runs)."""
    properties = server.collections["c"]["properties"]  # as if loaded with a dense store of 2 dimensions
    properties["lsr.manifest"] = json.dumps({**json.loads(properties["lsr.manifest"]), "dense_dim": 2})
    monkeypatch.setattr(milvus, "hybrid_queries",  # the texts' encoding is the dense store's (tests/stores)
                        lambda collection, queries, texts, store: [(qid, impacts, np.ones(2)) for qid, impacts in queries])
    main(["search", "--uri", URI, "--collection", "c", "--topics", str(loaded), "--hybrid", str(loaded),
          "--rrf-k", "10", "--output", str(tmp_path / "run.txt")])
    assert server.rankers == [{"strategy": "rrf", "params": {"k": 10.0}}]


def test_engine_options_reach_milvus(server, loaded):
    """The engine's token, replicas, min_idf and drop_ratio_search: the token it connects with, the
    replicas the collection is loaded with, the query it searches."""
    from lsr_pyserini.stores.vectors import read_impact_queries

    (qid, query), = read_impact_queries(str(loaded))
    engine = build_engine("milvus", URI, {"collection": "c", "token": "user:secret", "replicas": 2})
    try:
        assert [docid for docid, _ in engine.search([qid], [query], 10)[qid]] == ["d1", "d2", "d3"]
    finally:
        engine.close()
    assert server.tokens == ["user:secret"] and server.loads[-1] == {"replica_number": 2}
    for options in ({"min_idf": 1.0}, {"drop_ratio_search": 0.5}):
        engine = build_engine("milvus", URI, {"collection": "c", **options})
        try:
            engine.search([qid], [query], 10)
        finally:
            engine.close()
    assert server.sent() == [{"rare", "common"}, {"rare"}, {"common"}]
