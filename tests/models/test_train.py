"""The shared training path on tiny random models: losses, data checks, save/load, determinism,
resumption, and the TILDE / TILDEv2 mechanics."""
import json
from argparse import Namespace
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core.errors import Interrupted
from lsr_pyserini.core.readers import InputError
from lsr_pyserini.models import losses
from lsr_pyserini.train.data import TrainingData

QUERIES, QRELS, CORPUS = SAMPLE / "queries.test.tsv", SAMPLE / "qrels.test.trec", SAMPLE / "corpus.jsonl"


@pytest.fixture(scope="module")
def negatives(tmp_path_factory) -> Path:
    """A run listing every sample document for every query (as a BM25 run would, minus scores)."""
    path = tmp_path_factory.mktemp("runs") / "negatives.txt"
    qids = [line.split("\t")[0] for line in QUERIES.read_text().splitlines()]
    path.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    return path


def test_losses_match_their_definitions():
    scores = torch.tensor([[3.0, 1.0, 0.5, 0.2], [0.1, 0.3, 2.0, 1.0]])  # 2 queries, groups of 2
    assert torch.isclose(losses.contrastive_loss(scores, 2), F.cross_entropy(scores, torch.tensor([0, 2])))
    own = torch.tensor([[3.0, 1.0], [2.0, 1.0]])
    assert torch.isclose(losses.contrastive_loss(scores, 2, in_batch=False), F.cross_entropy(own, torch.tensor([0, 0])))
    teacher = torch.tensor([[5.0, 4.0], [1.0, 0.0]])
    assert torch.isclose(losses.margin_mse(scores, teacher, 2), torch.tensor(((2 - 1) ** 2 + (1 - 1) ** 2) / 2))
    reps = torch.tensor([[1.0, 0.0, 2.0], [3.0, 0.0, 0.0]])
    assert torch.isclose(losses.flops(reps), torch.tensor(2.0 ** 2 + 0 + 1.0 ** 2))
    assert losses.quadratic_warmup(1.0, 5, 10) == 0.25 and losses.quadratic_warmup(1.0, 20, 10) == 1.0


def test_splade_pooling_without_the_full_logits_has_the_same_values_and_gradients(tiny_mlm):
    from lsr_pyserini.models.splade.training import SpladeFamily

    family = SpladeFamily(str(tiny_mlm), Namespace(doc_max_length=32, query_max_length=8))
    texts = ["vitamin d and calcium absorption", "bm25", "the intestine absorbs calcium when vitamin d is present"]

    def gradients(represent):
        family.model.zero_grad()
        weights = represent()
        ((weights.sum(1) - 3) ** 2).sum().backward()
        grads = [p.grad.clone() for p in family.model.parameters() if p.grad is not None]
        # [PAD]'s embedding row is zero, so its logit ties at every position: max pooling's
        # gradient may go to any of them (torch's amax splits it); leave that row out
        grads[0][family.tokenizer.pad_token_id] = 0
        return weights.detach(), grads

    def direct():
        encoded = family.tokenizer(texts, padding=True, truncation=True, max_length=32, return_tensors="pt")
        logits = family.model(**encoded).logits[..., : family.terms]
        padding = ~encoded["attention_mask"].bool().unsqueeze(-1)
        return torch.log1p(torch.relu(logits.masked_fill(padding, float("-inf")).amax(1)))

    expected, expected_grads = gradients(direct)
    got, got_grads = gradients(lambda: family.splade.represent(texts, "documents"))
    assert (expected > 0).sum() > 10 and torch.allclose(got, expected, atol=1e-5)
    assert len(got_grads) == len(expected_grads)
    for g, e in zip(got_grads, expected_grads):  # parameters with no real gradient (key biases) hold float noise
        assert float((g - e).norm()) <= 1e-4 * float(e.norm()) + 1e-6


def test_take_rows_backward_repeats_at_two_threads_and_is_indexing_at_one():
    """kernels/vocabulary.take_rows: indexing's backward (`table[ids]`) adds a repeated row's gradients
    in an order that varies between runs at 2 threads; the embedding lookup's does not, and gives
    the bits indexing gives at 1 thread (docs/reproducibility.md)."""
    from lsr_pyserini.kernels.vocabulary import take_rows

    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 500, (8, 256), generator=generator)  # many repeats
    upstream = torch.randn(8, 256, 32, generator=generator)
    weight_start = torch.randn(500, 32, generator=generator)
    bias_start = torch.randn(500, generator=generator)

    def gradients(pick, threads: int) -> torch.Tensor:
        before = torch.get_num_threads()
        torch.set_num_threads(threads)
        try:
            weight, bias = weight_start.clone().requires_grad_(), bias_start.clone().requires_grad_()
            ((pick(weight, ids) + pick(bias, ids).unsqueeze(-1)) * upstream).sum().backward()
            return torch.cat([weight.grad.flatten(), bias.grad])
        finally:
            torch.set_num_threads(before)

    indexing = gradients(lambda table, rows: table[rows], 1)
    assert torch.equal(gradients(take_rows, 1), indexing)
    assert all(torch.equal(gradients(take_rows, 2), indexing) for _ in range(10))
    values = torch.arange(12.0).reshape(4, 3)
    assert torch.equal(take_rows(values, torch.tensor([[3, 0], [3, 3]])), values[torch.tensor([[3, 0], [3, 3]])])
    assert torch.equal(take_rows(values[:, 0], torch.tensor([2, 2, 1])), values[:, 0][torch.tensor([2, 2, 1])])


def test_training_data_checks(tmp_path, negatives, caplog):
    data = TrainingData(str(QUERIES), str(QRELS), str(CORPUS), str(negatives))
    assert len(data) == 7
    batches = data.epoch_batches(0, seed=1, batch_size=2, group_size=3)
    assert len(batches) == 3 and all(len(b.documents) == 6 for b in batches)
    assert batches[0].document_ids[0] in data.positives[batches[0].query_ids[0]]
    assert [b.document_ids for b in data.epoch_batches(0, 1, 2, 3)] == [b.document_ids for b in batches]
    bad = tmp_path / "qrels"
    bad.write_text("q1 0 s1 1\nq1 0 nope 1\n")
    with pytest.raises(InputError, match=r"qrels:2: document 'nope' is not in the corpus"):
        TrainingData(str(QUERIES), str(bad), str(CORPUS), str(negatives))
    bad.write_text("q99 0 s1 1\n")
    with pytest.raises(InputError, match=r"qrels: no relevant .* pair for any query of"):
        TrainingData(str(QUERIES), str(bad), str(CORPUS), str(negatives))
    sample = tmp_path / "sample.tsv"  # a sample of the queries with the full qrels: the others' lines are left out
    sample.write_text("".join(line + "\n" for line in QUERIES.read_text().splitlines()[:2]))
    data = TrainingData(str(sample), str(QRELS), str(CORPUS), str(negatives))
    assert data.positives == {"q1": ["s1"], "q2": ["s3"]} and data.query_ids == ["q1", "q2"]
    assert "qrels.test.trec: 7 lines name queries that are not in" in caplog.text
    only_positives = tmp_path / "run"
    only_positives.write_text("q1 Q0 s1 1 9 bm25\nq2 Q0 s3 1 9 bm25\n")
    with pytest.raises(InputError, match="empty negatives pool"):
        TrainingData(str(QUERIES), str(QRELS), str(CORPUS), str(only_positives))


def test_teacher_scores_from_lines_or_a_trec_run_scaled(tmp_path, negatives):
    lines, run = tmp_path / "teacher.txt", tmp_path / "teacher.run"
    lines.write_text("q1 s1 2.5\nq1 s2 0.5\n")
    run.write_text("q1 Q0 s1 1 2.5 fused\nq1 Q0 s2 2 0.5 fused\n")
    for path in (lines, run):
        data = TrainingData(str(QUERIES), str(QRELS), str(CORPUS), str(negatives), teacher=str(path),
                            teacher_scale=10)
        assert data.teacher == {"q1": {"s1": 25.0, "s2": 5.0}}
    lines.write_text("q1 s1\n")
    with pytest.raises(InputError, match="expected 'qid docid score'"):
        TrainingData(str(QUERIES), str(QRELS), str(CORPUS), str(negatives), teacher=str(lines))


def test_balanced_biqdl_weighs_present_and_absent_terms_alike(tiny_mlm):
    from lsr_pyserini.models.tilde.training import TildeFamily

    args = Namespace(doc_max_length=32, query_max_length=8, balanced=True)
    family = TildeFamily(str(tiny_mlm), args)
    logits = torch.randn(2, family.tilde.vocab_size, generator=torch.Generator().manual_seed(0))
    labels = torch.zeros_like(logits)
    valid = family.valid.nonzero().flatten()
    labels[0, valid[:3]] = 1.0
    labels[1, valid[5]] = 1.0
    bce = F.binary_cross_entropy_with_logits(logits, labels, reduction="none")
    expected = []
    for row in range(2):
        present = (labels[row] == 1) & family.valid
        absent = (labels[row] == 0) & family.valid
        expected.append(bce[row][present].mean() + bce[row][absent].mean())
    assert torch.isclose(family.likelihood_loss(logits, labels), torch.stack(expected).mean())
    family.balanced = False
    assert torch.isclose(family.likelihood_loss(logits, labels), (bce * family.valid).sum(1).mean() / family.valid.sum())


def train_cli(family, base, out, negatives, *extra):
    return run_tool("train", family, "--queries", QUERIES, "--qrels", QRELS, "--corpus", CORPUS,
                    "--negatives", negatives, "--output", out, "--base", base, "--batch-size", "2",
                    "--quiet", *extra)


def test_splade_fine_tuning_saves_a_checkpoint_the_encoder_loads(tiny_mlm, tiny_preset, negatives, tmp_path):
    result = train_cli("splade", tiny_mlm, tmp_path / "ft", negatives, "--max-steps", "2",
                       "--doc-max-length", "32", "--query-max-length", "8", "--threads", "1")
    assert result.returncode == 0, result.stderr
    out = tmp_path / "ft"
    assert {"config.json", "model.safetensors", "tokenizer.json", "lsr_family.json", "lsr_training.json"} \
        <= {p.name for p in out.iterdir()}
    summary = json.loads((out / "lsr_training.json").read_text())
    assert summary["steps"] == 2
    # the thread count and library versions the weights were trained with (the weights depend on
    # the count: docs/reproducibility.md), outside the settings a resumed run is compared on
    assert summary["environment"]["threads"] == 1 and summary["environment"]["torch"]
    assert summary["environment"]["transformers"] and "java" in summary["environment"]
    encoded = run_tool("encode", "queries", "--encoder", tiny_preset, "--model", out, "--input", QUERIES,
                       "--output", tmp_path / "q.tsv")
    assert encoded.returncode == 0, encoded.stderr
    wrong = run_tool("encode", "queries", "--encoder", "lsr_pyserini/presets/tildev2.yaml", "--model", out,
                     "--input", QUERIES, "--output", tmp_path / "q2.tsv")
    assert wrong.returncode == 2
    assert "trained as a 'splade' model, not 'tildev2'" in error_lines(wrong)[0]
    # sentence-transformers opens the checkpoint as it is (tests/models/test_st_layout.py)
    from lsr_pyserini.api import load_encoder
    from test_st_layout import DOCUMENTS, QUERIES as QUERY_TEXTS, assert_same_vectors

    assert_same_vectors(load_encoder(str(out)), out, QUERY_TEXTS, DOCUMENTS, 100)


def test_splade_training_learns_the_inference_free_query_table(tiny_mlm, negatives, tmp_path):
    """An inference-free base: the training queries are its tokenizer's tokens weighted by its table,
    and that table is learned (its own learning rate, --query-weights-lr): the tokens of the training
    queries move, a token in no training query keeps its weight, a token absent from the table stays
    out (ReLU(0) has no gradient). The checkpoint holds the learned table (query_weights.json, for
    `--encoder DIR`; SparseStaticEmbedding's weights, for sentence-transformers' Router); a plain base
    becomes inference-free with --query-mode tokenizer, its table starting at 1."""
    from lsr_pyserini.api import load_encoder
    from lsr_pyserini.core.hf import read_family
    from lsr_pyserini.train.__main__ import main as train_main
    from test_st_layout import DOCUMENTS, QUERIES as QUERY_TEXTS, assert_same_vectors

    import shutil

    base = tmp_path / "base"
    shutil.copytree(tiny_mlm, base)
    start = {"vitamin": 2.5, "bone": 1.25, "sleep": 0.5}
    (base / "terms.json").write_text(json.dumps(start))
    preset = tmp_path / "if.yaml"
    preset.write_text(f"family: splade\nmodel: {base}\nquery_mode: tokenizer\ndoc_max_length: 24\n")
    common = ["splade", "--queries", str(QUERIES), "--qrels", str(QRELS), "--corpus", str(CORPUS),
              "--negatives", str(negatives), "--batch-size", "2", "--max-steps", "3", "--quiet"]
    tables = {}
    for rate in (["--query-weights-lr", "0.5"], ["--query-weights-lr", "0.05"]):
        lr, out = rate[1], tmp_path / f"ft-{rate[1]}"
        train_main([*common, "--output", str(out), "--base", str(preset), "--query-weights", "terms.json", *rate,
                    "--lr", "1e-4"])
        assert (out / "router_config.json").is_file()
        assert read_family(out)["config"]["query_weights"] == "query_weights.json"
        tables[lr] = json.loads((out / "query_weights.json").read_text())
    shutil.rmtree(base)  # the checkpoint holds all it needs
    learned = tables["0.5"]
    assert set(learned) <= set(start) and learned["sleep"] == start["sleep"]  # in no training query
    assert abs(learned["vitamin"] - start["vitamin"]) > 0.1
    assert abs(tables["0.05"]["vitamin"] - start["vitamin"]) < abs(learned["vitamin"] - start["vitamin"])
    encoder = load_encoder(str(tmp_path / "ft-0.5"))
    assert encoder.query_mode == "tokenizer" and encoder.query_weight_table == pytest.approx(learned)
    assert_same_vectors(encoder, tmp_path / "ft-0.5", QUERY_TEXTS, DOCUMENTS, 100)
    # a plain SPLADE base made inference-free: every token starts at 1, the training queries' move
    out = tmp_path / "plain"
    train_main([*common, "--output", str(out), "--base", str(tiny_mlm), "--query-mode", "tokenizer"])
    table = json.loads((out / "query_weights.json").read_text())
    vocabulary = load_encoder(str(out)).tokenizer.get_vocab()
    assert len(table) >= len(vocabulary) - 10 and table["sleep"] == 1.0 and table["vitamin"] != 1.0


def test_same_seed_same_model_and_resume_is_exact(tiny_mlm, negatives, tmp_path, monkeypatch):
    """Resuming gives the uninterrupted run's weights bit for bit (torch.equal), whether Ctrl-C came
    between steps, after a step's forward pass had drawn dropout's random numbers (the RNG goes back
    to the step's start), or during its optimiser update (held until the update is complete)."""
    import os
    import signal

    from lsr_pyserini.train.loop import train
    from lsr_pyserini.models.splade.training import SpladeFamily

    args = Namespace(doc_max_length=16, query_max_length=8, lambda_d=1e-3, lambda_q=1e-3,
                     flops_warmup_steps=2, margin_mse_weight=1.0)
    data = TrainingData(str(QUERIES), str(QRELS), str(CORPUS), str(negatives))
    kwargs = dict(epochs=2, batch_size=2, group_size=2, lr=1e-3, seed=3, save_every=1, quiet=True)
    real_step = torch.optim.AdamW.step

    def trained(out, interrupt_at=None, where=None):
        torch.manual_seed(0)
        model = SpladeFamily(str(tiny_mlm), args)
        assert any(m.p > 0 for m in model.modules() if isinstance(m, torch.nn.Dropout))  # draws from the RNG
        real_loss, current = model.loss, {}

        def loss(batch, step):
            current["step"] = step
            if step == interrupt_at and where == "before the step":
                raise KeyboardInterrupt
            result = real_loss(batch, step)
            if step == interrupt_at and where == "after the forward pass":
                raise KeyboardInterrupt
            return result

        def step(self, *a, **k):  # AdamW.step, then a real SIGINT while the update is under way
            result = real_step(self, *a, **k)
            if current["step"] == interrupt_at and where == "during the update":
                os.kill(os.getpid(), signal.SIGINT)
            return result

        model.loss = loss
        monkeypatch.setattr(torch.optim.AdamW, "step", step)
        train(model, data, str(out), {"run": 1}, **kwargs)
        return {k: v.clone() for k, v in model.state_dict().items()}

    first = trained(tmp_path / "a")
    assert all(torch.equal(first[k], v) for k, v in trained(tmp_path / "b").items())
    for where in ("before the step", "after the forward pass", "during the update"):
        out = tmp_path / where.replace(" ", "-")
        with pytest.raises(Interrupted):
            trained(out, interrupt_at=3, where=where)
        assert (out / "checkpoint.pt").is_file()
        saved = torch.load(out / "checkpoint.pt", weights_only=False)["step"]
        assert saved == (4 if where == "during the update" else 3), where  # a held Ctrl-C: step 3 completed
        resumed = trained(out)
        assert [k for k, v in resumed.items() if not torch.equal(first[k], v)] == [], where
        assert not (out / "checkpoint.pt").exists()


def test_tilde_biqdl_expansion_and_tildev2(tiny_mlm, negatives, tmp_path):
    result = train_cli("tilde", tiny_mlm, tmp_path / "tilde", negatives, "--max-steps", "2",
                       "--doc-max-length", "32", "--query-max-length", "8", "--lr", "1e-3",
                       "--passage-terms-weight", "1", "--ranking-weight", "1")
    assert result.returncode == 0, result.stderr
    assert {"ql", "dl", "own", "rank"} <= set(json.loads((tmp_path / "tilde" / "lsr_training.json").read_text())["final"])
    expanded = tmp_path / "expanded.jsonl"
    result = run_tool("expand", "--model", tmp_path / "tilde", "--input", CORPUS, "--output", expanded,
                      "--top-m", "40")
    assert result.returncode == 0, result.stderr
    from lsr_pyserini.models.tilde.model import STOPWORDS

    originals = {json.loads(l)["_id"]: json.loads(l) for l in CORPUS.read_text().splitlines()}
    for line in expanded.read_text().splitlines():
        record = json.loads(line)
        original = (originals[record["_id"]]["title"] + " " + originals[record["_id"]]["text"])
        assert record["text"].startswith(original)
        added = record["text"][len(original):].split()
        assert not any(t in STOPWORDS or t.startswith("##") for t in added)
        assert not set(added) & set(original.lower().split())

    teacher = tmp_path / "teacher.txt"  # a teacher that prefers lower document numbers
    teacher.write_text("".join(f"{q} s{d} {20 - d}\n" for q in (l.split("\t")[0] for l in QUERIES.read_text().splitlines())
                               for d in range(1, 13)))
    result = train_cli("tildev2", tiny_mlm, tmp_path / "t2", negatives, "--max-steps", "2",
                       "--group-size", "3", "--doc-max-length", "48", "--teacher", teacher, "--bm25-prior-weight", "1",
                       "--bm25-init", "4")
    assert result.returncode == 0, result.stderr
    final = json.loads((tmp_path / "t2" / "lsr_training.json").read_text())["final"]
    assert "mse" in final and final["prior"] > 0 and "head fitted to the BM25 weights of 4 passages" in result.stderr
    wrong = train_cli("tildev2", tmp_path / "tilde", tmp_path / "t3", negatives, "--max-steps", "1")
    assert wrong.returncode == 2 and "trained as a 'tilde' model, not 'tildev2'" in error_lines(wrong)[0]


def test_zero_steps_save_the_starting_model(tiny_mlm, negatives, tmp_path):
    """`--max-steps 0`: the base saved untrained with the family's fresh head (an untrained baseline)."""
    from lsr_pyserini.models.tildev2.encoder import TildeV2Model

    result = train_cli("tildev2", tiny_mlm, tmp_path / "t0", negatives, "--max-steps", "0", "--doc-max-length", "32")
    assert result.returncode == 0, result.stderr
    assert json.loads((tmp_path / "t0" / "lsr_training.json").read_text())["steps"] == 0
    base = TildeV2Model.from_pretrained(str(tiny_mlm), require_head=False).bert.state_dict()
    saved = TildeV2Model.from_pretrained(str(tmp_path / "t0")).bert.state_dict()
    assert saved.keys() == base.keys() and all(torch.equal(saved[k], base[k]) for k in base)


def test_tildev2_with_bm25_prior_weights_scores_exactly_wordpiece_bm25(tiny_mlm):
    from transformers import AutoTokenizer

    from lsr_pyserini.models.tildev2.training import bm25_prior, exact_match_scores
    from lsr_pyserini.kernels.wordpiece_bm25 import CorpusVectors

    tokenizer = AutoTokenizer.from_pretrained(tiny_mlm)
    vectors = CorpusVectors(str(CORPUS), tokenizer, 0.9, 0.4, bm25=True)
    texts = {d["_id"]: f"{d['title']} {d['text']}" for d in map(json.loads, CORPUS.read_text().splitlines())}
    docids = sorted(texts)[:5]
    docs = tokenizer([texts[d] for d in docids], padding=True, return_tensors="pt")
    keep = docs["attention_mask"].bool() & ~torch.isin(docs["input_ids"], torch.tensor(tokenizer.all_special_ids))
    bm25 = vectors.matrix(docids)
    weights = bm25.gather(1, docs["input_ids"]) * keep  # each passage token weighted as BM25 weighs it
    assert bm25_prior(weights, docs["input_ids"], keep, bm25) == 0
    assert torch.isclose(bm25_prior(weights + 0.5 * keep, docs["input_ids"], keep, bm25), torch.tensor(0.25))
    query = tokenizer(["calcium vitamin d vitamin absorption"], add_special_tokens=False, return_tensors="pt")
    counts = torch.zeros(bm25.shape[1]).index_add_(0, query["input_ids"][0], torch.ones(query["input_ids"].shape[1]))
    scores = exact_match_scores(query["input_ids"], query["attention_mask"].float(), docs["input_ids"], weights)
    assert (scores > 0).any() and torch.allclose(scores, (counts @ bm25.T)[None])


def test_tildev2_head_fitted_to_bm25_by_least_squares(tiny_mlm):
    from transformers import AutoTokenizer

    from lsr_pyserini.models.tildev2.encoder import TildeV2Model
    from lsr_pyserini.models.tildev2.training import fit_head_to_bm25
    from lsr_pyserini.kernels.wordpiece_bm25 import CorpusVectors

    tokenizer = AutoTokenizer.from_pretrained(tiny_mlm)
    model = TildeV2Model.from_pretrained(str(tiny_mlm), require_head=False).eval()  # no dropout when comparing
    bm25 = CorpusVectors(str(CORPUS), tokenizer, 0.9, 0.4, bm25=True)
    passages = [(d["_id"], f"{d['title']} {d['text']}") for d in map(json.loads, CORPUS.read_text().splitlines())]
    encoded = tokenizer([text for _, text in passages], padding=True, return_tensors="pt")
    keep = encoded["attention_mask"].bool() & ~torch.isin(encoded["input_ids"], torch.tensor(tokenizer.all_special_ids))
    target = bm25.matrix([docid for docid, _ in passages]).gather(1, encoded["input_ids"])[keep]

    def linear_error():
        with torch.no_grad():
            return float(((model.tok_proj(model.bert(**encoded).last_hidden_state).squeeze(-1)[keep] - target) ** 2).mean())

    before = linear_error()
    r2 = fit_head_to_bm25(model, tokenizer, passages, bm25, max_length=512, batch_size=3)
    after = linear_error()
    assert after < before and 0 < r2 < 1
    assert abs(r2 - (1 - after / float(target.var(unbiased=False)))) < 1e-3


def test_exact_match_scores_and_tildev2_vectors(tiny_mlm, tmp_path):
    from lsr_pyserini.models.tildev2.encoder import TildeV2Encoder, TildeV2Model, document_vectors
    from lsr_pyserini.models.tildev2.training import exact_match_scores

    query_ids = torch.tensor([[5, 7, 0]])
    query_mask = torch.tensor([[1.0, 1.0, 0.0]])
    doc_ids = torch.tensor([[5, 9, 5, 7], [8, 8, 8, 8]])
    weights = torch.tensor([[0.5, 3.0, 1.5, 2.0], [1.0, 1.0, 1.0, 1.0]])
    assert exact_match_scores(query_ids, query_mask, doc_ids, weights).tolist() == [[1.5 + 2.0, 0.0]]
    vocab = [f"t{i}" for i in range(10)]
    assert document_vectors(weights[:1], doc_ids[:1], torch.tensor([[True, True, True, False]]), vocab) == \
        [{"t5": 1.5, "t9": 3.0}]

    folder = tmp_path / "published-layout"
    model = TildeV2Model.from_pretrained(str(tiny_mlm), require_head=False)
    torch.nn.init.constant_(model.tok_proj.bias, 0.25)
    model.save(folder)
    from transformers import AutoTokenizer

    AutoTokenizer.from_pretrained(tiny_mlm).save_pretrained(folder)
    encoder = TildeV2Encoder(str(folder), doc_max_length=32)
    assert torch.equal(encoder.model.tok_proj.bias, torch.tensor([0.25]))
    text = "vitamin d vitamin bones"
    vector = encoder.encode_documents([text])[0]
    encoded = encoder.tokenizer([text], return_tensors="pt")
    with torch.no_grad():
        direct = torch.relu(model.tok_proj(model.bert(**encoded).last_hidden_state)).squeeze(-1)[0]
    tokens = encoder.tokenizer.convert_ids_to_tokens(encoded["input_ids"][0])
    expected = {}
    for token, weight in zip(tokens[1:-1], direct[1:-1].tolist()):
        if weight > 0:
            expected[token] = max(expected.get(token, 0.0), weight)
    assert vector.keys() == expected.keys() and all(abs(vector[k] - expected[k]) < 1e-5 for k in expected)
    assert encoder.encode_queries(["vitamin d vitamin"])[0] == {"vitamin": 2.0, "d": 1.0}
    with pytest.raises(InputError, match="not a TILDEv2 checkpoint"):
        TildeV2Encoder(str(tiny_mlm)).encode_documents(["x"])


def test_the_loops_flags_reach_the_loop(tiny_mlm, negatives, tmp_path, monkeypatch):
    """--warmup-ratio, --save-every and --negatives-depth (read by every family: one loop, one data
    path) at non-default values, each seen where it acts: the schedule's warm-up steps, the steps a
    checkpoint is saved at, the negatives each query draws from."""
    from lsr_pyserini.train import __main__ as command, loop

    schedules, saved, data = [], [], []
    linear, save, training_data = loop._linear_schedule, loop._save_checkpoint, command.TrainingData
    monkeypatch.setattr(loop, "_linear_schedule", lambda total, warmup: schedules.append((total, warmup))
                        or linear(total, warmup))
    monkeypatch.setattr(loop, "_save_checkpoint", lambda path, model, optimizer, scheduler, step, *rest, **kw:
                        saved.append(step) or save(path, model, optimizer, scheduler, step, *rest, **kw))
    monkeypatch.setattr(command, "TrainingData", lambda *args: data.append(training_data(*args)) or data[-1])
    command.main(["splade", "--queries", str(QUERIES), "--qrels", str(QRELS), "--corpus", str(CORPUS),
                  "--negatives", str(negatives), "--output", str(tmp_path / "out"), "--base", str(tiny_mlm),
                  "--batch-size", "2", "--max-steps", "3", "--doc-max-length", "16", "--query-max-length", "8",
                  "--warmup-ratio", "0.5", "--save-every", "1", "--negatives-depth", "3", "--quiet"])
    assert schedules == [(3, 1)]  # half of the 3 steps (rounded down) warm up, none at the default 0.1
    assert saved == [1, 2]  # every step but the last (none at the default 50)
    pools = data[0].negatives
    assert pools and all(len(pool) <= 3 for pool in pools.values())  # of the top 3 (all 12 at the default 100)


# family -> (flags every run of the family gets, [flags at a non-default value, one run each]): each run's
# final loss must differ from the run without them (two steps; a flag parsed and ignored leaves it equal)
LOSS_FLAGS = {
    "splade": (["--teacher", "NEGATIVES"], [["--lambda-d", "0.5"], ["--lambda-q", "0.5"], ["--flops-warmup-steps", "1"],
                                            ["--margin-mse-weight", "0.5"]]),
    "sparseembed": ([], [["--lambda-d", "0.5"], ["--lambda-q", "0.5"], ["--lambda-w", "0.5"],
                         ["--flops-warmup-steps", "1"], ["--doc-top-k", "5"], ["--query-top-k", "3"]]),
    "tildev2": (["--teacher", "NEGATIVES", "--bm25-prior-weight", "0.5"],
                [["--b", "0.2"], ["--no-in-batch"], ["--margin-mse-weight", "0.5"]]),
    "tilde": ([], [["--balanced"]]),
    "bm25aug": ([], [["--lambda-aug", "0.5"], ["--no-augmentation"], ["--no-weighting"], ["--uniform-penalty"],
                     ["--no-bm25"]]),
    "bgem3": ([], [["--temperature", "0.5"], ["--sparse-init-bias", "1.0"]]),
}


@pytest.mark.parametrize("family", sorted(LOSS_FLAGS))
def test_each_loss_flag_changes_the_loss(family, tiny_mlm, negatives, tmp_path):
    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.train.__main__ import main

    common, varied = LOSS_FLAGS[family]
    common = [str(negatives) if flag == "NEGATIVES" else flag for flag in common]

    def final_loss(*flags) -> float:
        out = tmp_path / "out"
        main([family, "--queries", str(QUERIES), "--qrels", str(QRELS), "--corpus", str(CORPUS), "--negatives",
              str(negatives), "--output", str(out), "--base", str(tiny_mlm), "--batch-size", "2", "--max-steps", "2",
              "--quiet", "--overwrite", *common, *flags])
        release_outputs()
        return json.loads((out / "lsr_training.json").read_text())["final"]["loss"]

    default = final_loss()
    for flags in varied:
        assert final_loss(*flags) != default, flags
