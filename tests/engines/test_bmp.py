"""BMP, the approximate Block-Max Pruning engine (`[bmp]` extra), on the sample collection encoded
with SPLADE-tiny: its command, `search` and `Searcher` (which chooses it from the folder) give the
same run, close to Lucene's exact one; `alpha` and `beta` reach the library (a value other than 1
changes what it searches); it is declared approximate; explanations and texts come from the shards;
an interrupted build leaves no index, and bad inputs are one line each. (SciFact: docs/bmp.md.)"""
from __future__ import annotations

import json

import pytest

from conftest import SAMPLE, encoded_sample, error_lines, run_tool
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.engines.bmp import index as engine
from lsr_pyserini.stores.vectors import read_impact_queries
from test_seismic import brute_force, write_shard

engine.require_bmp()  # pinned (bmp): a broken install fails, not skips


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    work = tmp_path_factory.mktemp("bmp")
    # block size 4: with its default, 32, BMP finds nothing in these 12 passages (docs/bmp.md)
    return encoded_sample(work, ("bmp", "index", "--input", work / "vectors", "--index", work / "bmp", "--block-size", "4",
                                 "--quiet"))


def docids(path) -> dict[str, list[str]]:
    run = {}
    for line in path.read_text().splitlines():
        qid, _, docid, *_ = line.split()
        run.setdefault(qid, []).append(docid)
    return run


def test_the_command_search_and_searcher_agree_and_stay_close_to_lucene(sample, tmp_path):
    manifest = json.loads((sample / "bmp" / "bmp.json").read_text())
    assert manifest["documents"] == 12 and manifest["encoder"]["family"] == "splade"
    assert manifest["scale"] == min(1.0, 255 / manifest["largest_impact"])
    command = tmp_path / "command.txt"
    run_tool("bmp", "search", "--index", sample / "bmp", "--topics", sample / "queries.tsv", "--output", command,
             "--hits", "10", check=True)
    searched = tmp_path / "search.txt"
    result = run_tool("search", "--index", sample / "bmp", "--topics", sample / "queries.tsv", "--encoded",
                      "--output", searched, "--hits", "10", check=True)
    assert "engine bmp" in result.stderr  # chosen from the folder
    assert [line.split()[:5] for line in command.read_text().splitlines()] == \
        [line.split()[:5] for line in searched.read_text().splitlines()]
    lucene, bmp = docids(sample / "run.lucene.txt"), docids(searched)
    overlap = [len(set(bmp.get(qid, [])[:3]) & set(ranked[:3])) / len(ranked[:3]) for qid, ranked in lucene.items()]
    assert sum(overlap) / len(overlap) >= 0.9  # approximate, but close on the sample

    from lsr_pyserini.api import Searcher

    searcher = Searcher(str(sample / "bmp"), encoder="splade-tiny")
    assert searcher.engine.name == "bmp" and not searcher.engine.is_exact({})
    hits = searcher.search("medicine that lowers blood fats", k=3, explain=True)
    assert hits[0].docid == "s2" and hits[0].terms and searcher.doc("s2").startswith("Statins")
    assert searcher.engine.describe()["exact"] is False


def test_alpha_and_beta_reach_the_library(sample):
    from lsr_pyserini.engines import build_engine

    queries = read_impact_queries(sample / "queries.tsv")
    qids, encoded = [qid for qid, _ in queries], [impacts for _, impacts in queries]
    whole = build_engine("bmp", str(sample / "bmp")).search(qids, encoded, 12)
    pruned = build_engine("bmp", str(sample / "bmp"), {"beta": 0.1}).search(qids, encoded, 12)
    assert pruned != whole  # only the heaviest query terms are scored
    seen, threads = [], set()

    class Recording:  # BMP's searcher, recording what it is asked and on which thread
        def search(self, query, k, alpha, beta):
            import threading
            import time

            seen.append((k, alpha, beta))
            threads.add(threading.current_thread().name)
            time.sleep(0.05)  # long enough for the pool's second thread to take the next query
            return [], []

    engine_ = build_engine("bmp", str(sample / "bmp"), {"alpha": 0.3, "beta": 0.7})
    engine_.index.searcher = Recording()
    engine_.search(qids[:1], encoded[:1], 5)
    assert seen == [(5, 0.3, 0.7)] and len(threads) == 1
    threads.clear()
    assert engine_.search(qids, encoded, 5, threads=2) == {qid: [] for qid in qids}
    assert len(threads) == 2  # the queries spread over two threads
    real = build_engine("bmp", str(sample / "bmp"))
    assert real.search(qids, encoded, 12, threads=3) == whole  # the same rankings, in query order
    with pytest.raises(InputError, match="alpha"):
        build_engine("bmp", str(sample / "bmp"), {"alpha": 1.5})


def test_impacts_above_255_are_scaled_into_8_bits_and_scores_scaled_back(tmp_path):
    vectors = {"d1": {"a": 510, "b": 2}, "d2": {"a": 100, "c": 300}, "d3": {"b": 40}}
    engine.build_bmp_index(str(write_shard(tmp_path / "v", vectors)), str(tmp_path / "ix"), engine.BmpBuild(1))
    index = engine.BmpIndex(str(tmp_path / "ix"))
    assert index.manifest["largest_impact"] == 510 and index.scale == pytest.approx(0.5)
    query = {"a": 3, "c": 1}
    found = index.search([("q", query)], 3)["q"]
    # BMP 0.2.8 misses documents the exact scoring finds, even at alpha = beta = 1 (docs/bmp.md): what it
    # finds is among the exact top k, in its order, with the best first
    exact = [docid for docid, _ in brute_force(vectors, query, 3)]
    assert found and found[0][0] == exact[0] and [d for d, _ in found] == [d for d in exact if d in dict(found)]
    assert found[0][1] > 255  # divided by the scale: not the 8-bit impacts' sum


def test_an_interrupted_build_leaves_no_index_and_bad_inputs_are_one_line(sample, tmp_path, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(engine.BmpIndexWriter, "publish", interrupted)
    with pytest.raises(KeyboardInterrupt):
        engine.build_bmp_index(str(sample / "vectors"), str(tmp_path / "ix"))
    assert not (tmp_path / "ix").exists()
    monkeypatch.undo()
    engine.build_bmp_index(str(sample / "vectors"), str(tmp_path / "ix"))
    assert engine.BmpIndex(str(tmp_path / "ix")).documents == 12
    cases = [
        (("index", "--input", sample / "vectors", "--index", tmp_path / "ix"), "already exists"),
        (("index", "--input", sample / "lucene", "--index", tmp_path / "other"), "no .jsonl/.json shards"),
        (("search", "--index", sample / "lucene", "--topics", sample / "queries.tsv", "--output", tmp_path / "r"),
         "not a BMP index"),
        (("search", "--index", tmp_path / "ix", "--topics", SAMPLE / "queries.test.tsv", "--output", tmp_path / "r"),
         "reads as query text"),
    ]
    for args, message in cases:
        refused = run_tool("bmp", *args)
        assert refused.returncode == 2 and message in refused.stderr and len(error_lines(refused)) == 1, refused.stderr
    refused = run_tool("bmp", "search", "--index", tmp_path / "ix", "--topics", sample / "queries.tsv", "--output",
                       tmp_path / "r", "--alpha", "2")
    assert refused.returncode == 2 and "argument --alpha: expected a number in [0, 1]" in refused.stderr
    assert not (tmp_path / "other").exists() and not (tmp_path / "r").exists()


def test_an_index_moved_with_its_shards_reads_the_moved_shards(sample, tmp_path):
    """bmp.json names the shards relative to the index too: a folder of both copied elsewhere under
    other names reads its documents from the copy's own shards (an index alone keeps the absolute path)."""
    import shutil

    from lsr_pyserini.api import Searcher

    moved = tmp_path / "moved"
    shutil.copytree(sample / "bmp", moved / "renamed")
    shutil.copytree(sample / "vectors", moved / "vectors")
    shutil.copy(sample / "vectors.manifest.json", moved / "vectors.manifest.json")
    copy, original = Searcher(str(moved / "renamed"), encoder="splade-tiny"), Searcher(str(sample / "bmp"), encoder="splade-tiny")
    assert copy.engine.input_folder().resolve() == (moved / "vectors").resolve()
    assert [(h.docid, h.score) for h in copy.search("medicine that lowers blood fats", k=3)] == \
        [(h.docid, h.score) for h in original.search("medicine that lowers blood fats", k=3)]
    alone = tmp_path / "alone"
    shutil.copytree(sample / "bmp", alone)
    assert Searcher(str(alone), encoder="splade-tiny").engine.input_folder().resolve() == (sample / "vectors").resolve()
