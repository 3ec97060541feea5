"""Sharded impact search (docs/scaling.md): `lucene search --index A,B,C --impact` and `lucene
merge-runs` give, byte for byte, the run of one index over all the documents, including the order
and the tie-adjusted scores of tied documents; BM25 is refused with one line."""
import json
import random
import subprocess
import sys

import pytest

from conftest import REPO, SAMPLE, error_lines, run_tool

from lsr_pyserini.core.errors import InputError
from lsr_pyserini.engines.sharded.engine import adjust_ties, merge_hits, raw_score, topic_order, ShardRun

# Runs several `lucene` commands in one process (one JVM start instead of one per command).
DRIVER = """
import json, sys
from lsr_pyserini.engines.lucene.command import main
for argv in json.loads(sys.argv[1]):
    code = main(argv)
    if code:
        sys.exit(f"lucene {' '.join(argv)} failed: {code}")
"""


def lucene_commands(*commands):
    result = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([[str(a) for a in c] for c in commands])],
                            capture_output=True, text=True, cwd=REPO, env={"TQDM_DISABLE": "1", **__import__("os").environ})
    assert result.returncode == 0, result.stderr[-3000:]
    return result


def index_command(vectors, index, threads=1):
    return ["index", "--collection", "JsonVectorCollection", "--input", vectors, "--index", index,
            "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", threads]


def search_command(index, topics, run, hits):
    return ["search", "--index", index, "--topics", topics, "--output", run, "--impact", "--hits", hits]


def write_vectors(folder, records):
    folder.mkdir(parents=True)
    with open(folder / "part-00000.jsonl", "w") as handle:
        for docid, vector in records:
            handle.write(json.dumps({"id": docid, "contents": "", "vector": vector}) + "\n")


# ---- the merge itself, without Lucene -----------------------------------------------------

def test_ties_are_adjusted_as_anserini_does_in_float32():
    # 5 tied at 6, then 5, then two at 3: Anserini subtracts 1e-6 x (position in the tie run)
    scores = adjust_ties([6, 6, 6, 6, 6, 5, 3, 3])
    assert [f"{s:.6f}" for s in scores] == ["6.000000", "5.999999", "5.999998", "5.999997", "5.999996",
                                            "5.000000", "3.000000", "2.999999"]
    # float32: below its resolution at large scores the adjustment vanishes, as it does in Java
    assert [f"{s:.6f}" for s in adjust_ties([240220, 240220])] == ["240220.000000", "240220.000000"]


def test_merge_orders_by_score_then_docid_bytes_and_keeps_k():
    merged = merge_hits([[("d10", 5), ("d2", 3)], [("d9", 5), ("d1", 3)], [("é", 5), ("z", 5)]], k=5)
    assert [docid for docid, _ in merged] == ["d10", "d9", "z", "é", "d1"]


def test_non_integer_scores_are_refused_as_not_impact():
    assert raw_score(5.999998, "x") == 6
    with pytest.raises(InputError, match="not an integer impact score"):
        raw_score(7.3412, "run line 3")


def test_topic_order_follows_every_run():
    runs = [ShardRun("a", {}, ["q1", "q3", "q4"], None, 0), ShardRun("b", {}, ["q2", "q3", "q5"], None, 0)]
    order = topic_order(runs)
    assert order.index("q1") < order.index("q3") < order.index("q4")
    assert order.index("q2") < order.index("q3") < order.index("q5")


# ---- against one index, through Pyserini and Anserini -------------------------------------------

@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_sharded_splade_tiny_search_equals_one_index(tmp_path):
    """The sample corpus encoded with the real SPLADE-tiny, in 3 shard groups."""
    vectors = tmp_path / "vectors"
    topics = tmp_path / "queries.tsv"
    run_tool("encode", "corpus", "--encoder", "splade-tiny", "--input", SAMPLE / "corpus.jsonl",
             "--output", vectors, "--quiet", check=True)
    run_tool("encode", "queries", "--encoder", "splade-tiny", "--input", SAMPLE / "queries.test.tsv",
             "--output", topics, check=True)
    lines = (vectors / "part-00000.jsonl").read_text().splitlines(keepends=True)
    shards = []
    for group in range(3):
        (tmp_path / f"v{group}").mkdir()
        (tmp_path / f"v{group}" / "part.jsonl").write_text("".join(lines[group::3]))
        shards.append(tmp_path / f"i{group}")
    lucene_commands(
        index_command(vectors, tmp_path / "single"),
        *[index_command(tmp_path / f"v{g}", shards[g]) for g in range(3)],
        search_command(tmp_path / "single", topics, tmp_path / "single.txt", 10),
        search_command(",".join(map(str, shards)), topics, tmp_path / "sharded.txt", 10),
        *[search_command(shards[g], topics, tmp_path / f"run{g}.txt", 10) for g in range(3)],
        ["merge-runs", "--runs", ",".join(str(tmp_path / f"run{g}.txt") for g in range(3)),
         "--output", tmp_path / "merged.txt", "--hits", 10],
    )
    single = (tmp_path / "single.txt").read_bytes()
    assert len(single.splitlines()) > 30
    assert (tmp_path / "sharded.txt").read_bytes() == single
    assert (tmp_path / "merged.txt").read_bytes() == single


def test_tie_heavy_collection_in_shards_equals_one_index_whatever_the_indexing_order(tmp_path):
    """Documents with identical vectors, spread over shards, docids whose byte order is not the
    indexing order; one term is in every document of shard 0 (so Pyserini's idf filter would drop
    it there, searching that shard alone)."""
    rng = random.Random(7)
    profiles = [{"a": 1, "b": 2}, {"a": 2}, {"b": 1, "c": 1}, {"a": 1, "b": 2, "c": 1}]
    docids = [f"d{i}" for i in range(40)] + ["D5", "e", "d05"]
    rng.shuffle(docids)
    records = [(docid, dict(profiles[i % len(profiles)])) for i, docid in enumerate(docids)]
    groups = [records[g::3] for g in range(3)]
    for _, vector in groups[0]:
        vector["common"] = 1  # in every document of shard 0, in a third of all documents
    records = [record for group in groups for record in group]
    rng.shuffle(records)
    write_vectors(tmp_path / "vectors", records)
    write_vectors(tmp_path / "reversed", records[::-1])
    for g in range(3):
        write_vectors(tmp_path / f"v{g}", groups[g])
    ties = tmp_path / "ties.tsv"
    ties.write_text("q1\ta b b\nq2\tc\nq3\ta a b\n")
    common = tmp_path / "common.tsv"
    common.write_text("q4\ta common common\n")
    shards = ",".join(str(tmp_path / f"i{g}") for g in range(3))
    lucene_commands(
        index_command(tmp_path / "vectors", tmp_path / "single", threads=1),
        index_command(tmp_path / "reversed", tmp_path / "single-reversed", threads=2),
        *[index_command(tmp_path / f"v{g}", tmp_path / f"i{g}") for g in range(3)],
        *[search_command(tmp_path / index, topics, tmp_path / f"{index}.{topics.stem}.txt", 30)
          for index in ("single", "single-reversed") for topics in (ties, common)],
        *[search_command(shards, topics, tmp_path / f"sharded.{topics.stem}.txt", 30) for topics in (ties, common)],
        *[search_command(tmp_path / f"i{g}", topics, tmp_path / f"run{g}.{topics.stem}.txt", 30)
          for g in range(3) for topics in (ties, common)],
        *[["merge-runs", "--runs", ",".join(str(tmp_path / f"run{g}.{topics.stem}.txt") for g in range(3)),
           "--output", tmp_path / f"merged.{topics.stem}.txt", "--hits", 30] for topics in (ties, common)],
    )
    single = (tmp_path / "single.ties.txt").read_text()
    # the single index breaks ties by docid, not by indexing order or threads
    assert (tmp_path / "single-reversed.ties.txt").read_text() == single
    scores = [line.split()[4] for line in single.splitlines()]
    assert len(scores) > 60 and "4.999999" in scores and "4.999990" in scores  # long tie runs
    assert (tmp_path / "sharded.ties.txt").read_text() == single
    assert (tmp_path / "merged.ties.txt").read_text() == single
    # the shard-local universal term: the sharded search gives every shard the union's idf ...
    assert (tmp_path / "sharded.common.txt").read_text() == (tmp_path / "single.common.txt").read_text()
    # ... while shard runs searched alone drop it in shard 0, so merging them cannot be exact
    assert (tmp_path / "merged.common.txt").read_text() != (tmp_path / "single.common.txt").read_text()


def test_bm25_is_refused_with_one_line(tmp_path):
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
    result = run_tool("lucene", "search", "--index", f"{tmp_path / 'a'},{tmp_path / 'b'}", "--bm25",
                      "--topics", SAMPLE / "queries.test.tsv", "--output", tmp_path / "run.txt")
    assert result.returncode == 2
    assert error_lines(result) == [line for line in result.stderr.splitlines() if line.strip()]
    assert len(error_lines(result)) == 1 and "BM25" in error_lines(result)[0]
    assert not (tmp_path / "run.txt").exists()
    for name, score in (("r1.txt", "7.3412"), ("r2.txt", "2.0001")):
        (tmp_path / name).write_text(f"q1 Q0 d1 1 {score} Anserini\n")
    result = run_tool("lucene", "merge-runs", "--runs", f"{tmp_path / 'r1.txt'},{tmp_path / 'r2.txt'}",
                      "--output", tmp_path / "merged.txt")
    assert result.returncode == 2 and "not an integer impact score" in error_lines(result)[0]
    assert not (tmp_path / "merged.txt").exists()
