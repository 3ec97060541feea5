"""docs/architecture.md's "Add an engine", run as written: the toy engine's files are taken from the
page, put in a package of their own, named in LSR_PYSERINI_ENGINES, and `search` (encoded queries,
and texts encoded on the fly with an engine option at a value other than its default), `Searcher`
(which chooses the engine by itself) and `bench` (which builds its index with the declared command)
use it without any edit of the toolkit."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

from conftest import REPO, SAMPLE, encoded_sample

QUERIES = SAMPLE / "queries.test.tsv"

FILES = ["__init__.py", "__main__.py"]


def toy_package(folder):
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = re.findall(r"`toyengine/([\w/]+\.py)`:[^\n]*\n\n```python\n(.*?)```", page, re.S)
    assert [name for name, _ in blocks] == FILES, "the page's toy engine lost a file"
    package = folder / "toyengine"
    package.mkdir(parents=True)
    for name, code in blocks:
        (package / name).write_text(code, encoding="utf-8")
    return folder


def run(env, *command) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, *map(str, command)], capture_output=True, text=True, cwd=REPO, env=env)
    assert result.returncode == 0, f"{command}: {result.stderr}"
    return result


def ranked(path) -> dict[str, list[tuple[str, float]]]:
    run_ = {}
    for line in path.read_text().splitlines():
        qid, _, docid, _, score, _ = line.split()
        run_.setdefault(qid, []).append((docid, float(score)))
    return run_


def test_an_engine_from_one_new_package_searches_chooses_itself_and_is_benchmarked(tmp_path):
    work = encoded_sample(tmp_path / "sample")
    packages = toy_package(tmp_path / "packages")
    env = {**os.environ, "LSR_PYSERINI_ENGINES": "toyengine", "TQDM_DISABLE": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(packages), os.environ.get("PYTHONPATH")]))}
    index = tmp_path / "toy-index"
    run(env, "-m", "toyengine", work / "vectors", index)
    assert (index / "toy.json").is_file() and not index.with_name("toy-index.building").exists()

    # encoded queries: the engine is chosen from the folder, and its run is Lucene's, rank for rank
    encoded = tmp_path / "toy.encoded.txt"
    searched = run(env, "-m", "lsr_pyserini.search", "--index", index, "--topics", work / "queries.tsv", "--encoded",
                   "--output", encoded, "--hits", "1000")
    assert "engine toy" in searched.stderr
    lucene, toy = ranked(work / "run.lucene.txt"), ranked(encoded)
    assert toy.keys() == lucene.keys() and len(toy) == 7
    for qid in lucene:
        assert [docid for docid, _ in toy[qid]] == [docid for docid, _ in lucene[qid]], qid
        assert [round(score) for _, score in toy[qid]] == [round(score) for _, score in lucene[qid]], qid
    assert open(encoded).readline().split()[-1] == "toy"  # the engine's own run tag

    # texts encoded on the fly, and the engine's own option at another value than its default
    boosted = tmp_path / "toy.boosted.txt"
    run(env, "-m", "lsr_pyserini.search", "--index", index, "--topics", QUERIES, "--encoder", "splade-tiny",
        "--engine-option", "boost=2", "--output", boosted, "--hits", "1000")
    for qid, hits in ranked(boosted).items():
        assert [(docid, score / 2) for docid, score in hits] == toy[qid], qid

    # the Python API chooses it by itself; explain-free search works, doc() says it keeps no text
    script = ("import json, sys, lsr_pyserini\n"
              f"searcher = lsr_pyserini.Searcher({str(index)!r}, encoder='splade-tiny')\n"
              "hits = searcher.search('medicine that lowers blood fats', k=3)\n"
              "print(json.dumps([searcher.engine.name, [hit.docid for hit in hits]]))\n")
    name, docids = json.loads(run(env, "-c", script).stdout.strip().splitlines()[-1])
    assert name == "toy" and docids[0] == "s2"  # the sample's judged answer, as Lucene ranks it

    # bench builds its index with the declared command and measures it against Lucene's exact run
    report = tmp_path / "bench.json"
    run(env, "-m", "lsr_pyserini.bench", "--vectors", work / "vectors", "--queries", work / "queries.tsv",
        "--engines", "lucene,toy:boost=3", "--k", "3,10", "--work", tmp_path / "bench", "--json", report, "--quiet")
    rows = {row["engine"]: row for row in json.loads(report.read_text())["rows"]}
    toy_row = rows["toy:boost=3"]
    assert toy_row["exact"] and toy_row["k"]["3"]["recall"] == toy_row["k"]["10"]["recall"] == 1.0
    assert (tmp_path / "bench" / "indexes" / "toy-12" / "toy.json").is_file()
    first = (tmp_path / "bench" / "runs" / "toy_boost-3-12" / "run.10.txt").read_text().splitlines()[0].split()
    assert float(first[4]) == 3 * ranked(encoded)[first[0]][0][1]  # the option reached the engine

    # without the variable the toolkit does not know it, and says so in one line
    plain = {key: value for key, value in env.items() if key != "LSR_PYSERINI_ENGINES"}
    refused = subprocess.run([sys.executable, "-m", "lsr_pyserini.search", "--index", index, "--topics",
                              work / "queries.tsv", "--encoded", "--output", tmp_path / "x.txt"],
                             capture_output=True, text=True, cwd=REPO, env=plain)
    assert refused.returncode == 2 and "not an index" in refused.stderr and "a BMP index" in refused.stderr
    missing = subprocess.run([sys.executable, "-m", "lsr_pyserini.search", "--index", index, "--topics",
                              work / "queries.tsv", "--encoded", "--output", tmp_path / "y.txt"],
                             capture_output=True, text=True, cwd=REPO, env={**env, "LSR_PYSERINI_ENGINES": "nosuch"})
    assert missing.returncode == 2 and "LSR_PYSERINI_ENGINES: no module 'nosuch'" in missing.stderr
