"""SparseEmbed on tiny random MLMs: the representation and score against direct computations,
training through the shared path, the store's round trip, re-ranking, and every refusal."""
import json
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import build_tiny_bert, run_tool
from lsr_pyserini.core.readers import InputError, read_corpus
from lsr_pyserini.models.sparseembed.encoder import SparseEmbedEncoder, SparseEmbedModel, embedding_scores
from test_train import CORPUS, QRELS, QUERIES, negatives  # noqa: F401  (fixture: every sample document per query)


def train(base, out, negatives, *extra):
    return run_tool("train", "sparseembed", "--base", base, "--queries", QUERIES, "--qrels", QRELS,
                    "--corpus", CORPUS, "--negatives", negatives, "--output", out, "--batch-size", "2",
                    "--threads", "1", "--quiet", "--doc-max-length", "48", *extra)


@pytest.fixture(scope="module")
def trained(tmp_path_factory, negatives) -> Path:
    base = build_tiny_bert(tmp_path_factory.mktemp("base"))
    out = tmp_path_factory.mktemp("sparseembed") / "model"
    result = train(base, out, negatives, "--dim", "16", "--max-steps", "3")
    assert result.returncode == 0, result.stderr
    return out


def encode_store(model, folder: Path, *extra) -> Path:
    result = run_tool("encode", "corpus", "--encoder", "sparseembed", "--model", model, "--input", CORPUS,
                      "--output", folder / "vectors", "--dense-store", folder / "store", "--max-length", "48",
                      "--quiet", *extra)
    assert result.returncode == 0, result.stderr
    return folder / "store"


@pytest.fixture(scope="module")
def store(tmp_path_factory, trained) -> Path:
    return encode_store(trained, tmp_path_factory.mktemp("encoded"))


def test_representation_matches_the_definition(tiny_mlm):
    model = SparseEmbedModel(str(tiny_mlm), dim=16).eval()
    texts = ["vitamin d and bone health", "a longer text about sparse retrieval with learned weights"]
    with torch.no_grad():
        weights, ids, active, embeddings = model.represent(texts, "documents", 32, top_k=5)
        encoded = model.tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        from transformers import AutoModelForMaskedLM  # the same weights, without the model's hooks

        out = AutoModelForMaskedLM.from_pretrained(tiny_mlm).eval()(**encoded, output_hidden_states=True)
        for row in range(2):
            length = int(encoded["attention_mask"][row].sum())
            logits = out.logits[row, :length, :model.terms]  # L x V
            expected = torch.log1p(torch.relu(logits.max(0).values))
            top = torch.topk(expected, 5)
            assert set(ids[row].tolist()) == set(top.indices.tolist()) and bool(active[row].all())
            assert torch.allclose(weights[row], expected[ids[row]], atol=1e-5)
            term = int(ids[row, 0])
            attention = torch.softmax(logits[:, term], dim=0)  # over this text's positions only
            context = attention @ out.hidden_states[-1][row, :length]
            head = model.heads["documents"]
            assert torch.allclose(embeddings[row, 0], torch.relu(head(context)), atol=1e-5)
        assert embeddings.shape == (2, 5, 16)
        query_side = model.represent(texts, "queries", 32, top_k=5)[3]
        assert not torch.allclose(query_side, embeddings)  # separate heads


def test_embedding_score_sums_shared_terms_only():
    torch.manual_seed(0)
    q_ids, d_ids = torch.tensor([[3, 7, 9]]), torch.tensor([[7, 1, 3, 4], [2, 5, 6, 8]])
    q_emb, d_emb = torch.rand(1, 3, 4), torch.rand(2, 4, 4)
    scores = embedding_scores(q_ids, q_emb, d_ids, d_emb)
    expected = q_emb[0, 0] @ d_emb[0, 2] + q_emb[0, 1] @ d_emb[0, 0]
    assert torch.isclose(scores[0, 0], expected) and scores[0, 1] == 0


def test_training_saves_heads_and_refuses_another_dimension(trained, tmp_path, negatives):
    marker = json.loads((trained / "lsr_family.json").read_text())
    assert (marker["family"], marker["config"]["dim"], marker["config"]["doc_max_length"]) == ("sparseembed", 16, 48)
    assert set(marker) == {"family", "config"}  # every setting declared, none beside the config
    summary = json.loads((trained / "lsr_training.json").read_text())
    assert summary["steps"] == 3 and {"emb", "sparse", "doc_terms"} <= set(summary["final"])
    assert SparseEmbedModel(str(trained)).dim == 16
    with pytest.raises(InputError, match="dimension 16, not 32"):
        SparseEmbedModel(str(trained), dim=32)
    from lsr_pyserini.train.data import read_teacher

    teacher = read_teacher(str(negatives))  # a TREC run (e.g. a re-ranker's output) is a teacher too
    assert teacher["q1"]["s3"] == 17.0 and len(teacher["q1"]) == 12
    result = train(trained, tmp_path / "distilled", negatives, "--teacher", negatives, "--max-steps", "2")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "distilled" / "lsr_training.json").read_text())["teacher"] == str(negatives)


def test_dim_is_a_declared_setting_saved_reloaded_and_used(trained, tmp_path, negatives):
    """--dim 16 (not the 32 of a base without heads): recorded in the config, back through resolve_settings,
    and what the encoder's embeddings have; another dim through the Python API is refused by the heads.
    `--max-steps 0 --dim 64` from a base without heads saves 64-wide heads; a checkpoint written before
    (dim beside the config) loads to the same dim."""
    import lsr_pyserini
    from lsr_pyserini.models.configs import resolve_settings

    assert resolve_settings(str(trained))["dim"] == 16
    encoder = lsr_pyserini.load_encoder(str(trained))
    assert encoder.model.dim == 16
    assert encoder.terms_and_embeddings(["vitamin d"], "queries")[0][2].shape[1] == 16
    with pytest.raises(InputError, match="dimension 16, not 64"):
        lsr_pyserini.load_encoder(str(trained), dim=64)
    with pytest.raises(InputError, match="dim: 48 is not one of 16, 32, 64"):
        lsr_pyserini.load_encoder(str(trained), dim=48)
    base = build_tiny_bert(tmp_path / "base")
    wide = tmp_path / "wide"
    result = train(base, wide, negatives, "--dim", "64", "--max-steps", "0")
    assert result.returncode == 0, result.stderr
    assert json.loads((wide / "lsr_family.json").read_text())["config"]["dim"] == 64
    assert lsr_pyserini.load_encoder(str(wide)).model.dim == 64
    # fine-tuning a SparseEmbed checkpoint without --dim keeps (and records) its heads' dimension
    again = tmp_path / "again"
    assert train(trained, again, negatives, "--max-steps", "0").returncode == 0
    assert json.loads((again / "lsr_family.json").read_text())["config"]["dim"] == 16
    old = tmp_path / "old"
    old.mkdir()
    for file in trained.iterdir():
        (old / file.name).write_bytes(file.read_bytes())
    marker = json.loads((trained / "lsr_family.json").read_text())
    config = {k: v for k, v in marker["config"].items() if k != "dim"}
    (old / "lsr_family.json").write_text(json.dumps({"family": "sparseembed", "dim": 16, "config": config}))
    assert resolve_settings(str(old))["dim"] == 16


def test_a_base_without_heads_cannot_encode(tiny_mlm):
    with pytest.raises(InputError, match="has no SparseEmbed heads"):
        SparseEmbedEncoder(str(tiny_mlm))


def test_store_keeps_the_non_zero_components_losslessly(tmp_path):
    from lsr_pyserini.stores.sparseembed import SparseEmbedStore, SparseEmbedStoreWriter

    rng = np.random.default_rng(0)
    dim, docs = 12, {}  # 12: masks of 2 bytes, the second half-used
    for i, n in enumerate([3, 0, 5, 1]):  # a document with no activated term too
        embeddings = np.maximum(rng.normal(size=(n, dim)), 0).astype(np.float16)  # ReLU: about half zeros
        if n:
            embeddings[0] = 0  # an all-zero embedding
        docs[f"d{i}"] = (np.sort(rng.choice(50, n, replace=False)), embeddings)
    writer = SparseEmbedStoreWriter(str(tmp_path / "store"), {"identity": {"dim": dim, "vocab_size": 50}})
    writer.write_shard(0, (list(docs)[:2], list(docs.values())[:2]))
    writer.write_shard(1, (list(docs)[2:], list(docs.values())[2:]))
    writer.finish(len(docs))
    store = SparseEmbedStore(str(tmp_path / "store"))
    assert (tmp_path / "store" / "values.bin").stat().st_size == 2 * sum(int((e != 0).sum()) for _, e in docs.values())
    for docid, (ids, embeddings) in docs.items():
        assert np.array_equal(store.document_embeddings(docid), embeddings.astype(np.float32))
    query_ids, query = np.array([int(docs["d2"][0][1]), int(docs["d0"][0][2]), 49]), rng.normal(size=(3, dim))
    scores = store.scores(query_ids, query.astype(np.float32), ["d3", "d2", "d1", "d0"])
    for docid, score in zip(["d3", "d2", "d1", "d0"], scores):
        ids, embeddings = docs[docid]
        expected = sum(float(query[i].astype(np.float32) @ embeddings[list(ids).index(t)].astype(np.float32))
                       for i, t in enumerate(query_ids) if t in ids)
        assert score == pytest.approx(expected, rel=1e-5, abs=1e-5)


def test_store_round_trip_and_scores_equal_a_direct_computation(trained, store):
    from lsr_pyserini.stores.sparseembed import SparseEmbedStore

    opened = SparseEmbedStore(str(store))
    encoder = SparseEmbedEncoder(str(trained), doc_max_length=48)
    documents = list(read_corpus(str(CORPUS)))
    direct = encoder.terms_and_embeddings([d.text for d in documents], "documents")
    for doc, (vector, ids, embeddings) in zip(documents, direct):
        row = opened.row[doc.id]
        start, end = opened.offsets[row], opened.offsets[row + 1]
        assert np.array_equal(opened.terms[start:end], ids)
        assert np.allclose(opened.document_embeddings(doc.id), embeddings, atol=2e-3, rtol=2e-3)
        assert len(vector) == len(ids) <= 256
    _, q_ids, q_emb = encoder.terms_and_embeddings(["vitamin d bone fractures"], "queries")[0]
    docids = opened.docids[::-1]
    scores = opened.scores(q_ids, q_emb, docids)
    for docid, score in zip(docids, scores):
        _, d_ids, d_emb = direct[[d.id for d in documents].index(docid)]
        shared = {t: i for i, t in enumerate(d_ids.tolist())}
        expected = sum(float(q_emb[i] @ d_emb[shared[t]]) for i, t in enumerate(q_ids.tolist()) if t in shared)
        assert score == pytest.approx(expected, rel=5e-3, abs=5e-3)
    assert (scores > 0).any()


def test_rerank_cli_orders_by_the_embedding_score(trained, store, negatives, tmp_path):
    output = tmp_path / "run2.txt"
    result = run_tool("rerank", "--reranker", "sparseembed", "--run", negatives, "--queries", QUERIES,
                      "--store", store, "--output", output)
    assert result.returncode == 0, result.stderr
    lines = [line.split() for line in output.read_text().splitlines()]
    from lsr_pyserini.stores.sparseembed import SparseEmbedStore

    opened = SparseEmbedStore(str(store))
    encoder = SparseEmbedEncoder(str(trained))
    text = dict(line.split("\t", 1) for line in QUERIES.read_text().splitlines())
    qid = lines[0][0]
    _, q_ids, q_emb = encoder.terms_and_embeddings([text[qid]], "queries")[0]
    mine = [(d, float(s)) for q, _, d, _, s, _ in lines if q == qid]
    direct = dict(zip(opened.docids, opened.scores(q_ids, q_emb, opened.docids)))
    assert [d for d, _ in mine] == sorted(direct, key=lambda d: -direct[d])


def test_efficiency_figures(store, trained, tmp_path, capsys):
    from lsr_pyserini.commands import encode
    from lsr_pyserini.commands import evaluate

    topics = tmp_path / "topics.tsv"
    encode.main(["queries", "--encoder", "sparseembed", "--model", str(trained), "--input", str(QUERIES),
                 "--output", str(topics), "--quiet"])
    capsys.readouterr()
    evaluate.main(["--store", str(store), "--queries", str(topics)])
    figures = dict(line.split(None, 1) for line in capsys.readouterr().out.splitlines())
    assert int(figures["dim"]) == 16 and float(figures["terms"]) > 0
    assert float(figures["sparseembed_flops"]) == pytest.approx(16 * float(figures["terms"]), rel=1e-3)


def rerank_refused(capsys, store, run, tmp_path, *extra):
    """The rerank command in this process (as `python -m` runs it): exit 2, one error line, no output."""
    from lsr_pyserini.commands import rerank
    from lsr_pyserini.core.cli import run_main

    output = tmp_path / "refused.txt"
    argv = ["--reranker", "sparseembed", "--run", str(run), "--queries", str(QUERIES), "--store", str(store),
            "--output", str(output), *map(str, extra)]
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        run_main(lambda: rerank.main(argv))
    errors = [line for line in capsys.readouterr().err.splitlines() if line.startswith("error:")]
    assert exit_.value.code == 2 and not output.exists() and len(errors) == 1
    return errors[0]


def test_refusals(trained, store, negatives, tmp_path, tiny_mlm, capsys):
    run = tmp_path / "run.txt"
    run.write_text(negatives.read_text() + "q1 Q0 ghost 13 1 bm25\n")
    assert "document 'ghost' is not in the store" in rerank_refused(capsys, store, run, tmp_path)

    other = tmp_path / "other"
    SparseEmbedModel(str(tiny_mlm), dim=16, seed=7).save(other)
    message = rerank_refused(capsys, store, negatives, tmp_path, "--model", other)
    assert "store was encoded by model" in message and "fingerprint" in message

    wide = tmp_path / "wide"
    SparseEmbedModel(str(tiny_mlm), dim=32).save(wide)
    assert "16-dimensional term embeddings" in rerank_refused(capsys, store, negatives, tmp_path, "--model", wide)

    truncated = tmp_path / "truncated"
    import shutil

    shutil.copytree(store, truncated)
    values = truncated / "values.bin"
    values.write_bytes(values.read_bytes()[:-100])
    assert "truncated" in rerank_refused(capsys, truncated, negatives, tmp_path)
    assert "not a SparseEmbed store" in rerank_refused(capsys, tmp_path, negatives, tmp_path)


def family(base, **options):
    import argparse

    from lsr_pyserini.models.sparseembed.config import SCHEMA
    from lsr_pyserini.models.sparseembed.training import TRAINING, SparseEmbedFamily

    lengths = {name: SCHEMA[name].default
               for name in ("doc_max_length", "query_max_length", "doc_top_k", "query_top_k", "dim")}
    args = argparse.Namespace(**{**TRAINING.defaults(), **lengths, **options, "seed": 0})
    return SparseEmbedFamily(str(base), args)


def a_batch(group_size=2):
    from lsr_pyserini.train.data import Batch

    documents = [d.text for d in read_corpus(str(CORPUS))][:2 * group_size]
    teacher = [[3.0, 1.0, 0.5, 0.0][:group_size], [2.0, 2.5, 0.0, 1.0][:group_size]]
    return Batch(["vitamin d bone fractures", "sparse retrieval"], documents, group_size, teacher)


def test_contrastive_weight_adds_the_contrastive_loss_of_both_scores(trained):
    from lsr_pyserini.models.losses import contrastive_loss

    batch = a_batch()
    plain, mixed = family(trained, doc_max_length=48).eval(), family(trained, doc_max_length=48, contrastive_weight=2.5).eval()
    with torch.no_grad():
        base_loss, _ = plain.loss(batch, step=0)  # step 0: FLOPS weights still 0
        loss, _ = mixed.loss(batch, step=0)
        q = plain.model.represent(batch.queries, "queries", 64, 64)
        d = plain.model.represent(batch.documents, "documents", 48, 256)
        dense = embedding_scores(q[1], q[3], d[1], d[3])
        sparse = embedding_scores(q[1], q[0].unsqueeze(-1), d[1], d[0].unsqueeze(-1))
    expected = base_loss + 2.5 * (contrastive_loss(dense, 2) + 0.1 * contrastive_loss(sparse, 2))
    assert float(loss - base_loss) > 0 and torch.isclose(loss, expected, rtol=1e-4)


def test_frozen_encoder_caches_selections_and_trains_the_heads_only(trained, tmp_path, negatives):
    frozen = family(trained, doc_max_length=48, freeze_encoder=True).train()
    assert not frozen.model.mlm.training and not any(p.requires_grad for p in frozen.model.mlm.parameters())
    assert [len(g["params"]) for g in frozen.parameter_groups(1e-4)] == [4]  # two heads' weights and biases
    batch = a_batch()
    calls = []
    select = frozen.model.select
    frozen.model.select = lambda *a: calls.append(len(a[0])) or select(*a)
    cached = frozen._represent(batch.documents, "documents", 48, 256)
    again = frozen._represent(batch.documents[::-1], "documents", 48, 256)
    assert calls == [len(set(batch.documents))]  # the second call reads the cache
    direct = frozen.model.represent(batch.documents, "documents", 48, 256)
    for mine, theirs in zip(cached, direct):
        assert torch.allclose(mine.float(), theirs.float(), atol=1e-5)
    assert torch.allclose(again[3], cached[3].flip(0), atol=1e-6)

    out = tmp_path / "heads-only"  # new 32-dimensional heads on the 16-dimensional model's frozen encoder
    result = train(trained, out, negatives, "--freeze-encoder", "--fresh-heads", "--dim", "32", "--teacher", negatives,
                   "--contrastive-weight", "1", "--epochs", "3", "--head-lr", "1e-2")
    assert result.returncode == 0, result.stderr
    before, after = SparseEmbedModel(str(trained)), SparseEmbedModel(str(out))
    assert all(torch.equal(a, b) for a, b in zip(before.mlm.state_dict().values(), after.mlm.state_dict().values()))
    assert before.dim == 16 and after.dim == 32
    untrained = SparseEmbedModel(str(trained), dim=32, seed=42, fresh_heads=True)  # the seeded start
    assert not torch.equal(untrained.heads["documents"].weight, after.heads["documents"].weight)
