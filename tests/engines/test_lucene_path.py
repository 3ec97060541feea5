"""The Lucene engines' fast top k (ids from doc values, one text per query) against Anserini's own
batch search, on indexes built to tie: many documents share a score, their ids are not in the
order Lucene numbers them, and k falls inside runs of ties."""
from __future__ import annotations

import json
import logging
import random
import subprocess
import sys

import pytest

from conftest import REPO, error_lines, run_tool
from lsr_pyserini.core.errors import InputError

KS = (1, 2, 5, 10, 33, 200)
IMPACT_QUERIES = [{"a": 1}, {"a": 2, "b": 1}, {"c": 3, "e": 1}, {"a": 1, "b": 1, "c": 1, "d": 1, "e": 1},
                  {"absent": 4}, {"b": 7, "absent": 1}]
TEXT_QUERIES = ["apple", "banana apple", "cherry", "apple banana cherry date", "nothing"]


def tied_ids(rng: random.Random, count: int) -> list[str]:
    """Ids whose byte order is not their insertion order, a few beyond ASCII."""
    ids = [f"d{n}" for n in range(count - 4)] + ["é1", "Z9", "a10", "日本"]
    rng.shuffle(ids)
    return ids


@pytest.fixture(scope="module")
def tied(tmp_path_factory):
    work = tmp_path_factory.mktemp("lucene-path")
    rng = random.Random(7)
    (work / "vectors").mkdir()
    with open(work / "vectors" / "part-00000.jsonl", "w", encoding="utf-8") as out:
        for docid in tied_ids(rng, 120):
            vector = {term: rng.choice((1, 2)) for term in rng.sample("abcde", rng.randint(1, 3))}
            out.write(json.dumps({"id": docid, "contents": "", "vector": vector}, ensure_ascii=False) + "\n")
    (work / "docs").mkdir()
    with open(work / "docs" / "docs.jsonl", "w", encoding="utf-8") as out:
        for docid in tied_ids(rng, 120):
            text = " ".join(rng.sample(["apple", "banana", "cherry", "date"], rng.randint(1, 2)))
            out.write(json.dumps({"id": docid, "contents": text}, ensure_ascii=False) + "\n")
    impact = ["--collection", "JsonVectorCollection", "--input", work / "vectors", "--generator",
              "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1"]
    run_tool("lucene", "index", *impact, "--index", work / "impact", check=True)
    run_tool("lucene", "index", *impact, "--index", work / "impact-raw", "--storeRaw", check=True)
    run_tool("lucene", "index", "--collection", "JsonCollection", "--input", work / "docs", "--index", work / "bm25",
             "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", check=True)
    return work


@pytest.mark.parametrize("index", ["impact", "impact-raw"])
def test_impact_top_k_equals_anserinis_batch_search_through_ties(tied, index):
    from lsr_pyserini.engines.lucene.engine import LuceneImpactEngine

    fast, anserini = LuceneImpactEngine(tied / index, fast=True), LuceneImpactEngine(tied / index, fast=False)
    assert fast.fast is not None and fast.fast.ids is not None and anserini.fast is None
    qids = [f"q{n}" for n in range(len(IMPACT_QUERIES))]
    tied_at_k = 0
    for k in KS:
        ours, theirs = fast.search(qids, IMPACT_QUERIES, k), anserini.search(qids, IMPACT_QUERIES, k)
        assert ours == theirs, k
        tied_at_k += sum(1 for run in ours.values() if len(run) > k - 1 > 0 and round(run[k - 1][1]) == round(run[k - 2][1]))
    assert tied_at_k  # the k-th hit ties with the one before it somewhere: the deeper fetch ran


def test_bm25_top_k_equals_anserinis_batch_search_through_ties(tied):
    from lsr_pyserini.engines.lucene.engine import Bm25Engine

    fast, anserini = Bm25Engine(tied / "bm25", fast=True), Bm25Engine(tied / "bm25", fast=False)
    assert fast.fast is not None and fast.fast.ids is None  # the sorted collector, ids from sort values
    qids = [f"q{n}" for n in range(len(TEXT_QUERIES))]
    for k in KS:
        assert fast.search(qids, TEXT_QUERIES, k) == anserini.search(qids, TEXT_QUERIES, k), k


def test_the_search_command_writes_lucene_search_impacts_run(tied, tmp_path):
    topics = tmp_path / "queries.tsv"
    topics.write_text("".join(f"q{n}\t" + " ".join(t for t, w in q.items() for _ in range(w)) + "\n"
                              for n, q in enumerate(IMPACT_QUERIES)))
    for k in (3, 200):
        run_tool("search", "--engine", "lucene", "--encoded", "--index", tied / "impact", "--topics", topics,
                 "--output", tmp_path / f"ours.{k}", "--hits", k, check=True)
        run_tool("lucene", "search", "--index", tied / "impact", "--topics", topics, "--output",
                 tmp_path / f"theirs.{k}", "--impact", "--hits", k, check=True)
        assert (tmp_path / f"ours.{k}").read_bytes() == (tmp_path / f"theirs.{k}").read_bytes()


def test_an_index_without_id_doc_values_is_searched_the_slow_way_with_one_warning(tied, monkeypatch, caplog):
    from lsr_pyserini.engines.lucene import engine as lucene

    reference = lucene.LuceneImpactEngine(tied / "impact", fast=False).search(["q"], [{"a": 1, "b": 1}], 10)
    monkeypatch.setattr(lucene.TopK, "of", classmethod(lambda cls, index, by_score: None))
    with caplog.at_level(logging.WARNING, logger="lsr_pyserini.engines.lucene.engine"):
        engine = lucene.LuceneImpactEngine(tied / "impact")
    assert [r.getMessage() for r in caplog.records if "doc values" in r.getMessage()] == [
        f"{tied / 'impact'}: its `id` field has no binary doc values (an index built elsewhere): ids are read from "
        f"stored fields through Anserini's searcher, which is slower at large k"]
    assert engine.fast is None and engine.search(["q"], [{"a": 1, "b": 1}], 10) == reference


def test_a_corrupt_index_and_a_bad_switch_are_refused_in_one_line(tied, tmp_path, monkeypatch):
    from lsr_pyserini.engines.lucene.engine import LuceneImpactEngine

    import shutil

    broken = tmp_path / "broken"
    shutil.copytree(tied / "impact", broken)
    for segment_file in broken.glob("*.si"):  # the segment's info: its header cut
        segment_file.write_bytes(segment_file.read_bytes()[:10])
    with pytest.raises(InputError, match="not a readable Lucene index") as refused:
        LuceneImpactEngine(broken)
    assert "\n" not in str(refused.value)
    monkeypatch.setenv("LSR_PYSERINI_LUCENE_TOP_K", "quick")
    with pytest.raises(InputError, match="expected fast or anserini"):
        LuceneImpactEngine(tied / "impact")


def test_a_lucene_search_imports_neither_torch_nor_pyserinis_search_modules(tied, tmp_path):
    """What keeps `search --engine lucene --encoded` starting in the JVM's time (8 s before: Pyserini's
    search modules import torch and transformers)."""
    topics = tmp_path / "q.tsv"
    topics.write_text("q1\ta a b\n")
    probe = ("import sys\nfrom lsr_pyserini.commands.search import main\n"
             f"main(['--engine', 'lucene', '--encoded', '--index', {str(tied / 'impact')!r}, '--topics', "
             f"{str(topics)!r}, '--output', {str(tmp_path / 'run.txt')!r}, '--quiet'])\n"
             "print(sorted(m for m in ('torch', 'transformers', 'pyserini.search', 'pyserini.encode') if m in sys.modules))")
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 0 and not error_lines(result), result.stderr
    assert result.stdout.strip().splitlines()[-1] == "[]"


def test_adjust_ties_in_one_numpy_pass_equals_anserinis_loop():
    """core/hits.adjust_ties takes numpy's pass where gaps are unambiguous: the same floats as the
    one-by-one transcription of ScoreTiesAdjusterReranker, on integer and on 2-6 decimal scores."""
    import math

    import numpy as np

    from lsr_pyserini.core.hits import TIE_EPSILON, TIE_GAP, adjust_ties

    def anserini(raw):
        out, ties = [], 0
        for i, value in enumerate(raw):
            score = np.float32(math.floor(float(np.float32(value)) * 10000.0 + 0.5) / 10000.0)
            if i == 0 or (out[-1] - score) > TIE_GAP:
                ties = 0
            else:
                ties += 1
                score = np.float32(score - TIE_EPSILON * np.float32(ties))
            out.append(score)
        return [float(s) for s in out]

    rng = np.random.default_rng(0)
    for trial in range(600):
        n = int(rng.integers(1, 300))
        if trial % 2:
            values = -np.sort(-rng.integers(1, int(rng.integers(2, 50)), n)) * int(rng.choice([1, 1000, 100000]))
        else:
            values = -np.sort(-np.round(rng.random(n) * float(rng.choice([1, 10, 30])), int(rng.integers(2, 7))))
        values = values.astype(np.float32).tolist()
        assert adjust_ties(values) == anserini(values), trial
    assert adjust_ties([]) == []


def test_run_precision_in_one_pass_equals_the_formatted_text():
    """engines/lucene.run_precisions: numpy's round of float32 scores is `float(f"{x:.6f}")`, halves included."""
    import numpy as np

    from lsr_pyserini.core.hits import run_precision
    from lsr_pyserini.engines.lucene.engine import run_precisions

    rng = np.random.default_rng(1)
    values = np.concatenate([
        rng.integers(0, 2 ** 24, 20000).astype(np.float32) - np.float32(1e-6) * rng.integers(0, 40, 20000),
        (rng.random(20000) * 30).astype(np.float32),
        np.array([2.0 ** -7, 3 * 2.0 ** -7, 2.0 ** -20, 0.5, 1e-7, 123456.5, 0.0], dtype=np.float32),  # exact halves
        -(rng.random(1000) * 10).astype(np.float32)]).astype(np.float32)
    assert run_precisions(values) == [run_precision(float(v)) for v in values]
    big = np.array([2.0 ** 25 + 2, 1.5], dtype=np.float32)  # beyond 2**24: one by one
    assert run_precisions(big) == [run_precision(float(v)) for v in big]
