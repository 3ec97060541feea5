"""`adapt`: the BM25 folded into the impacts is Lucene's BM25; the same model for a seed, after a kill
too; every flag reaches the model; bad input refused in one line. Tiny random models on the sample
passages (the real checkpoints and collections: eval/regressions/*adapt*.yaml)."""
from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from conftest import SAMPLE, run_tool

CORPUS, QUERIES = SAMPLE / "corpus.jsonl", SAMPLE / "queries.test.tsv"
# small enough for seconds, large enough that every flag has something to change
BASE_FLAGS = ["--pseudo-queries", "10", "--steps", "6", "--batch-size", "2", "--group-size", "2", "--lr", "1e-3",
              "--doc-max-length", "32", "--lambda-d", "2e-3", "--lambda-q", "2e-3", "--seed", "7", "--threads", "1",
              "--quiet"]


def adapt(out: Path, base: Path, *flags: str) -> Path:
    from lsr_pyserini.commands.adapt import main

    main(["--corpus", str(CORPUS), "--output", str(out), "--base", str(base), *flags])
    return out


def with_flag(flags: list[str], flag: str, value: str) -> list[str]:
    flags = list(flags)
    flags[flags.index(flag) + 1] = value
    return flags


def digest(folder: Path) -> str:
    return hashlib.sha256((folder / "model.safetensors").read_bytes()).hexdigest()


def test_exact_match_side_scores_lucene_bm25(tmp_path):
    """Query side x document side of the exact-match terms = weight x the BM25 score Lucene gives the
    same text, at a k1 and b that are not Anserini's defaults (so neither can be ignored)."""
    from lsr_pyserini import start_jvm
    from lsr_pyserini.core.readers import read_corpus, read_queries
    from lsr_pyserini.models.exact_match import EXACT_PREFIX, ExactMatch, analyze

    corpus = tmp_path / "corpus.jsonl"  # the sample and one long passage: Lucene stores its length lossily
    long_text = " ".join(["statins lower cholesterol in the blood", "exercise and the heart muscle"] * 40)
    corpus.write_text(CORPUS.read_text() + json.dumps({"_id": "long", "title": "Long", "text": long_text}) + "\n")
    docs = list(read_corpus(str(corpus)))
    queries = list(read_queries(str(QUERIES)))
    k1, b, weight = 1.6, 0.9, 3.0
    exact, _ = ExactMatch.from_terms(analyze([d.text for d in docs]), k1, b, weight)
    exact.save(tmp_path)
    exact = ExactMatch.load(tmp_path, k1, b, weight)  # what an encoder reads back
    doc_vectors = exact.documents([d.text for d in docs])
    query_vectors = exact.queries([q.text for q in queries])
    assert all(t.startswith(EXACT_PREFIX) for v in doc_vectors + query_vectors for t in v)

    run_tool("prepare", "corpus", "--input", corpus, "--output", tmp_path / "docs", "--quiet", check=True)
    run_tool("lucene", "index", "--collection", "JsonCollection", "--input", tmp_path / "docs", "--index",
             tmp_path / "bm25", "--generator", "DefaultLuceneDocumentGenerator", "--threads", "1", check=True)
    start_jvm()
    from pyserini.search.lucene import LuceneSearcher

    searcher = LuceneSearcher(str(tmp_path / "bm25"))
    searcher.set_bm25(k1, b)
    compared = 0
    for query, qvec in zip(queries, query_vectors):
        lucene = {hit.docid: hit.score for hit in searcher.search(query.text, k=100)}
        for doc, dvec in zip(docs, doc_vectors):
            ours = sum(w * dvec.get(t, 0.0) for t, w in qvec.items())
            assert ours == pytest.approx(weight * lucene.get(doc.id, 0.0), rel=1e-4, abs=1e-4), (query.id, doc.id)
            compared += doc.id in lucene
    assert compared > 10 and any(d.id == "long" for d in docs)


def test_pseudo_queries_are_cut_out_of_their_positives():
    """A title query's positive is its passage without the title; a span query's, without the span:
    the query's own words are not what finds its passage."""
    from lsr_pyserini.train.adapt import AdaptData, pseudo_queries

    titles = ["Statins and the liver enzyme", "", "Manual", "Manual"]
    bodies = ["Statins block an enzyme the liver uses to make cholesterol, lowering it in the blood.",
              "Regular aerobic exercise lowers resting heart rate and blood pressure over several months of training.",
              "Press the red button twice to reset the device to its factory settings and wait.",
              "Hold the power key for ten seconds when the screen stays dark after an update."]
    queries = pseudo_queries(titles, bodies, 10, seed=3)
    kinds = {q.positive: q.kind for q in queries}
    assert kinds[0] == "title" and kinds[1] == "span" and kinds.get(2) in ("span", None)  # "Manual": not a heading
    data = AdaptData(queries, [f"{t} {b}".strip() for t, b in zip(titles, bodies)],
                     [[d for d in range(4) if d != q.positive] for q in queries])
    for batch in data.epoch_batches(0, seed=1, batch_size=2, group_size=2):
        for query, positive in zip(batch.queries, batch.documents[::2]):
            assert query not in positive and positive.strip()


def test_adapted_checkpoint_runs_the_impact_pipeline(tmp_path, tiny_preset):
    """The adapted folder is a SPLADE checkpoint with exact_match bm25 recorded: `encode corpus`, an
    impact index and `search --impact` rank with the sum, and the statistics are the corpus's."""
    from lsr_pyserini.models.exact_match import EXACT_PREFIX, EXACT_STATS_FILE
    from lsr_pyserini.models.resolve import resolve_settings

    model = adapt(tmp_path / "model", tiny_preset, *with_flag(BASE_FLAGS, "--steps", "2"),
                  "--exact-match-weight", "2.5")
    settings = resolve_settings(str(model))
    assert (settings["family"], settings["exact_match"], settings["exact_match_weight"]) == ("splade", "bm25", 2.5)
    assert settings["doc_max_length"] == 64  # the base's: --doc-max-length is the training's alone
    stats = json.loads((model / EXACT_STATS_FILE).read_text())
    assert stats["doc_count"] == 12 and stats["doc_freq"]["statin"] >= 1
    summary = json.loads((model / "lsr_training.json").read_text())
    assert summary["steps"] == 2 and summary["exact_match_weight"] == 2.5

    run_tool("encode", "corpus", "--encoder", model, "--input", CORPUS, "--output", tmp_path / "vectors", "--quiet",
             check=True)
    shard = next((tmp_path / "vectors").glob("*.jsonl*"))
    import gzip

    opener = gzip.open if shard.suffix == ".gz" else open
    with opener(shard, "rt") as handle:
        vectors = [json.loads(line)["vector"] for line in handle]
    assert all(any(t.startswith(EXACT_PREFIX) for t in v) and any(not t.startswith(EXACT_PREFIX) for t in v)
               for v in vectors)
    run_tool("encode", "queries", "--encoder", model, "--input", QUERIES, "--output", tmp_path / "q.tsv", "--quiet",
             check=True)
    query_terms = Counter((tmp_path / "q.tsv").read_text().split("\n")[0].split("\t")[1].split())
    assert any(t.startswith(EXACT_PREFIX) and n == 250 for t, n in query_terms.items())  # 2.5 x 100, once
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", tmp_path / "vectors", "--index",
             tmp_path / "index", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
             "--threads", "1", check=True)
    run_tool("lucene", "search", "--index", tmp_path / "index", "--topics", tmp_path / "q.tsv", "--output",
             tmp_path / "run.txt", "--impact", "--hits", "5", check=True)
    assert len((tmp_path / "run.txt").read_text().splitlines()) >= 7
    # from Python: the searcher encodes the text itself, with the same ranking as the encoded queries' run
    import lsr_pyserini
    from sentence_transformers import SparseEncoder

    searcher = lsr_pyserini.Searcher(str(tmp_path / "index"), encoder=str(model))
    first_query = QUERIES.read_text().splitlines()[0].split("\t")
    hits = [hit.docid for hit in searcher.search(first_query[1], k=5)]
    run = [line.split() for line in (tmp_path / "run.txt").read_text().splitlines()]
    assert hits == [row[2] for row in run if row[0] == first_query[0]][:5]
    neural = SparseEncoder(str(model), device="cpu").encode_query([first_query[1]])  # its neural side
    assert neural.shape[-1] > 0 and float(neural.to_dense().sum()) > 0
    # BM25's share changes at query time, on the same index: 0 leaves the neural side alone
    for weight, count in (("0", None), ("1.5", 150)):
        out = tmp_path / f"q{weight}.tsv"
        run_tool("encode", "queries", "--encoder", model, "--input", QUERIES, "--output", out,
                 "--exact-match-weight", weight, "--quiet", check=True)
        terms = Counter(out.read_text().split("\n")[0].split("\t")[1].split())
        exact = {n for t, n in terms.items() if t.startswith(EXACT_PREFIX)}
        assert exact == ({count} if count else set()) and len(terms) > len(exact), weight
        run_tool("lucene", "search", "--index", tmp_path / "index", "--topics", out, "--output",
                 tmp_path / f"run{weight}.txt", "--impact", "--hits", "5", check=True)


def test_same_seed_same_model_and_each_flag_changes_it(tmp_path, tiny_preset):
    first = digest(adapt(tmp_path / "a", tiny_preset, *BASE_FLAGS))
    assert digest(adapt(tmp_path / "b", tiny_preset, *BASE_FLAGS)) == first
    changes = {"--seed": "8", "--pseudo-queries": "8", "--steps": "5", "--batch-size": "3", "--group-size": "3",
               "--lr": "2e-3", "--doc-max-length": "12", "--lambda-d": "0.5", "--lambda-q": "0.5"}
    for flag, value in changes.items():
        out = tmp_path / flag.strip("-")
        assert digest(adapt(out, tiny_preset, *with_flag(BASE_FLAGS, flag, value))) != first, flag
    # the weight of BM25 in the training loss and in the checkpoint
    out = adapt(tmp_path / "weight", tiny_preset, *BASE_FLAGS, "--exact-match-weight", "0.5")
    assert digest(out) != first


def test_inference_free_adapt_learns_a_query_table_from_the_corpus_idf(tmp_path, tiny_preset):
    """--query-mode tokenizer: a query is its tokenizer's distinct tokens weighted by a table that starts
    at the corpus's IDF over those tokens (--steps 0: exactly that, as Lucene's BM25 computes an idf)
    and is trained with the documents, at --query-weights-lr; the queries keep their BM25 side."""
    import math

    from lsr_pyserini.api import load_encoder
    from lsr_pyserini.core.readers import read_corpus

    untrained = adapt(tmp_path / "u", tiny_preset, *with_flag(BASE_FLAGS, "--steps", "0"), "--query-mode",
                      "tokenizer")
    encoder = load_encoder(str(untrained))
    assert encoder.query_mode == "tokenizer"
    tokenized = [set(encoder.tokenizer(doc.text, add_special_tokens=False)["input_ids"])
                 for doc in read_corpus(str(CORPUS))]
    vocabulary = encoder.tokenizer.get_vocab()
    table = json.loads((untrained / "query_weights.json").read_text())
    for token in ("vitamin", "the", "[unused0]" if "[unused0]" in vocabulary else "[PAD]"):
        df = sum(vocabulary[token] in ids for ids in tokenized)
        assert table[token] == pytest.approx(math.log(1 + (len(tokenized) - df + 0.5) / (df + 0.5)), rel=1e-6), token
    (query,) = encoder.encode_queries(["does vitamin d prevent bone fractures"])
    assert query["vitamin"] == pytest.approx(table["vitamin"]) and query["bm25:vitamin"] > 0
    assert not any(token.startswith("##") for token in query if token not in table)
    tables = {}
    for rate in (("--query-weights-lr", "0.5"), ("--query-weights-lr", "0.01")):
        out = adapt(tmp_path / rate[1], tiny_preset, *BASE_FLAGS, "--query-mode", "tokenizer", *rate)
        tables[rate[1]] = json.loads((out / "query_weights.json").read_text())
    moved = {lr: max(abs(learned.get(token, 0.0) - table[token]) for token in table) for lr, learned in tables.items()}
    assert moved["0.5"] > moved["0.01"] > 0


def test_killed_and_rerun_gives_the_same_model(tmp_path, tiny_preset):
    flags = [*with_flag(BASE_FLAGS, "--steps", "300"), "--save-every", "5"]
    whole = digest(adapt(tmp_path / "whole", tiny_preset, *flags))
    out = tmp_path / "killed"
    command = [sys.executable, "-m", "lsr_pyserini.adapt", "--corpus", str(CORPUS), "--output", str(out), "--base",
               str(tiny_preset), *flags]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (out / "checkpoint.pt").is_file() and process.poll() is None and time.time() < deadline:
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait()
    assert (out / "checkpoint.pt").is_file() and not (out / "lsr_training.json").exists(), "killed before the end"
    subprocess.run(command, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert digest(out) == whole


def test_refusals_in_one_line(tmp_path, tiny_preset):
    adapt(tmp_path / "done", tiny_preset, *with_flag(BASE_FLAGS, "--steps", "1"))
    result = run_tool("adapt", "--corpus", CORPUS, "--output", tmp_path / "done", "--base", tiny_preset, "--quiet")
    assert result.returncode != 0 and "--overwrite" in result.stderr.strip().splitlines()[-1]
    before = digest(tmp_path / "done")
    adapt(tmp_path / "done", tiny_preset, *with_flag(BASE_FLAGS, "--seed", "9"), "--overwrite")
    assert digest(tmp_path / "done") != before
    result = run_tool("adapt", "--corpus", CORPUS, "--output", tmp_path / "x", "--base", "bge-m3", "--quiet")
    assert result.returncode != 0 and "SPLADE" in result.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "x").exists()
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    result = run_tool("adapt", "--corpus", empty, "--output", tmp_path / "y", "--base", tiny_preset, "--quiet")
    assert result.returncode != 0 and "no document" in result.stderr.strip().splitlines()[-1]


def test_encoder_refuses_a_folder_without_its_statistics(tmp_path, tiny_preset):
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.models.exact_match import EXACT_STATS_FILE
    from lsr_pyserini.models.registry import ENCODERS, load_families
    from lsr_pyserini.models.resolve import resolve_settings

    model = adapt(tmp_path / "model", tiny_preset, *with_flag(BASE_FLAGS, "--steps", "0"))
    load_families()
    settings = resolve_settings(str(model))
    (model / EXACT_STATS_FILE).unlink()
    with pytest.raises(InputError, match=EXACT_STATS_FILE):
        ENCODERS["splade"](**{k: v for k, v in settings.items() if k not in ("family", "name")})
