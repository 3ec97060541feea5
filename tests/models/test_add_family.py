"""docs/architecture.md's "Add a family", run as written: the toy family's files are taken from the
page, put in a package of their own, named in LSR_PYSERINI_FAMILIES, and the commands train one
step, encode documents and queries with the trained checkpoint's saved settings, and re-rank."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import torch
from conftest import REPO, SAMPLE

FILES = ["__init__.py", "config.py", "model.py", "encoder.py", "training.py", "reranker.py"]


def toy_package(folder):
    page = (REPO / "docs" / "architecture.md").read_text(encoding="utf-8")
    blocks = re.findall(r"`toyfamily/([\w/]+\.py)`:[^\n]*\n\n```python\n(.*?)```", page, re.S)
    assert [name for name, _ in blocks] == FILES, "the page's toy family lost a file"
    package = folder / "toyfamily"
    package.mkdir(parents=True)
    for name, code in blocks:
        (package / name).write_text(code, encoding="utf-8")
    return folder


def run(env, tool: str, *args) -> subprocess.CompletedProcess:
    result = subprocess.run([sys.executable, "-m", f"lsr_pyserini.{tool}", *map(str, args)], capture_output=True,
                            text=True, cwd=REPO, env=env)
    assert result.returncode == 0, f"{tool}: {result.stderr}"
    return result


def test_a_family_from_one_new_package_trains_encodes_and_reranks(tmp_path):
    packages = toy_package(tmp_path / "packages")
    env = {**os.environ, "LSR_PYSERINI_FAMILIES": "toyfamily", "TQDM_DISABLE": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(packages), os.environ.get("PYTHONPATH")]))}
    queries, qrels, corpus = SAMPLE / "queries.test.tsv", SAMPLE / "qrels.test.trec", SAMPLE / "corpus.jsonl"
    qids = [line.split("\t")[0] for line in queries.read_text().splitlines()]
    docids = [json.loads(line)["_id"] for line in corpus.read_text().splitlines()]
    negatives = tmp_path / "negatives.txt"  # every document for every query, as a first-stage run
    negatives.write_text("".join(f"{q} Q0 {d} {r} {len(docids) - r} bm25\n"
                                 for q in qids for r, d in enumerate(docids, start=1)))

    model = tmp_path / "toy-model"
    run(env, "train", "toy", "--queries", queries, "--qrels", qrels, "--corpus", corpus, "--negatives", negatives,
        "--output", model, "--max-steps", "1", "--batch-size", "2", "--lr", "0.5", "--query-max-length", "6",
        "--quiet")
    marker = json.loads((model / "lsr_family.json").read_text())
    assert marker["family"] == "toy" and marker["config"]["query_max_length"] == 6  # the flag, saved
    assert marker["config"]["buckets"] == 64 and marker["config"]["doc_max_length"] == 256  # the declared defaults
    weights = torch.load(model / "toy.pt")["weights"]
    assert weights.abs().sum() > 0  # one step moved them off their zero start

    run(env, "encode", "corpus", "--encoder", model, "--input", corpus, "--output", tmp_path / "vectors", "--quiet")
    shard = [json.loads(line) for line in (tmp_path / "vectors" / "part-00000.jsonl").read_text().splitlines()]
    assert len(shard) == len(docids) and all(record["vector"] for record in shard)
    run(env, "encode", "queries", "--encoder", model, "--input", queries, "--output", tmp_path / "q.tsv", "--quiet")
    lengths = [len(line.split("\t")[1].split()) for line in (tmp_path / "q.tsv").read_text().splitlines()]
    assert lengths and all(length > 0 for length in lengths)
    manifest = json.loads((tmp_path / "vectors.manifest.json").read_text())
    assert manifest["settings"]["encoder"]["family"] == "toy"

    reranked = tmp_path / "reranked.txt"
    run(env, "rerank", "--reranker", "toy", "--model", model, "--store", corpus, "--run", negatives,
        "--queries", queries, "--output", reranked)
    lines = [line.split() for line in reranked.read_text().splitlines()]
    assert {line[0] for line in lines} == set(qids) and len(lines) == len(qids) * len(docids)
    assert any(float(line[4]) > 0 for line in lines)

    refused = subprocess.run([sys.executable, "-m", "lsr_pyserini.encode", "queries", "--encoder", model, "--input",
                              queries, "--output", tmp_path / "other.tsv", "--pooling", "max"],
                             capture_output=True, text=True, cwd=REPO, env=env)
    assert refused.returncode == 2 and "--pooling is an option of the 'splade' encoder, not of 'toy'" in refused.stderr
