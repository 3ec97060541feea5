"""BGE-M3 mechanics on tiny random XLM-RoBERTa checkpoints in the published layout.

No BGE-M3 checkpoint is reachable here, so each head is checked against a direct computation
(FlagEmbedding's formulas written out) on a 2-layer, 32-hidden model whose Unigram tokenizer is
trained in the test, plus the `encode` command end to end and its refusals of bad checkpoints.
"""
import json
import shutil
import urllib.parse
from collections import Counter

import pytest
import torch
import torch.nn.functional as F

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core.readers import InputError
from lsr_pyserini.encoders import build_encoder
from lsr_pyserini.models.bgem3.config import HYBRID_WEIGHTS
from lsr_pyserini.models.bgem3.encoder import BgeM3Encoder
from lsr_pyserini.models.bgem3.model import BgeM3Model, hybrid_score, term_for_piece
from lsr_pyserini.encoders.query import encoder_settings
from lsr_pyserini.core.writer import manifest_path, to_impacts

XLMR_SPECIAL = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]  # XLM-R's ids 0..4
PHRASE = "new york"  # an added token with a space in it: a piece Lucene would split
TEXTS = ["Vitamin D helps the intestine absorb calcium, calcium and more calcium!",
         "In new york 50% of adults take vitamin D; VITAMIN d is cheap",
         "", "bm25 ~ 🙂"]


def sample_sentences() -> list[str]:
    docs = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    return [f"{d.get('title', '')} {d['text']}" for d in docs] + ["About 50% of New York adults take vitamin D."]


def build_tiny_bgem3(folder, seed=0, heads=("sparse", "colbert")):
    """A BGE-M3-layout folder: XLMRobertaModel + tokenizer + sparse_linear.pt / colbert_linear.pt."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import XLMRobertaConfig, XLMRobertaModel, XLMRobertaTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    trainer_tokenizer = Tokenizer(models.Unigram())
    trainer_tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always")])
    trainer = trainers.UnigramTrainer(vocab_size=300, special_tokens=XLMR_SPECIAL, unk_token="<unk>")
    trainer_tokenizer.train_from_iterator(sample_sentences(), trainer=trainer)
    # The trained piece set is reproducible, its order and scores are not (hash order in the trainer):
    # sort the pieces and score them by a fixed rule (fewest pieces per word, then longer pieces).
    trained = [piece for piece, _ in json.loads(trainer_tokenizer.to_str())["model"]["vocab"]]
    pieces = sorted(set(trained) - set(XLMR_SPECIAL))
    vocab = [(piece, 0.0) for piece in XLMR_SPECIAL] + [(piece, -1.0 + 0.01 * len(piece)) for piece in pieces]
    tokenizer = XLMRobertaTokenizer(vocab=vocab)
    tokenizer.add_tokens([PHRASE])
    tokenizer.save_pretrained(folder)

    torch.manual_seed(seed)
    hidden = 32
    config = XLMRobertaConfig(vocab_size=len(tokenizer), hidden_size=hidden, num_hidden_layers=2,
                              num_attention_heads=2, intermediate_size=64, max_position_embeddings=520,
                              pad_token_id=1, bos_token_id=0, eos_token_id=2)
    XLMRobertaModel(config).save_pretrained(folder)
    if "sparse" in heads:
        sparse_linear = torch.nn.Linear(hidden, 1)
        with torch.no_grad():  # about 2 in 3 positions get a weight; ReLU still zeroes the rest
            sparse_linear.bias.fill_(0.1)
        torch.save(sparse_linear.state_dict(), folder / "sparse_linear.pt")
    if "colbert" in heads:
        torch.save(torch.nn.Linear(hidden, hidden).state_dict(), folder / "colbert_linear.pt")
    return folder


@pytest.fixture(scope="module")
def tiny_bgem3(tmp_path_factory):
    return build_tiny_bgem3(tmp_path_factory.mktemp("tiny-bge-m3"))


@pytest.fixture(scope="module")
def m3(tiny_bgem3):
    return BgeM3Model(str(tiny_bgem3), doc_max_length=64, query_max_length=16)


def direct(model_dir, texts, max_length):
    """FlagEmbedding's computation written out: hidden states, then each head from the saved files."""
    from transformers import AutoTokenizer, XLMRobertaModel

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = XLMRobertaModel.from_pretrained(model_dir).eval()
    sparse_linear, colbert_linear = torch.nn.Linear(32, 1), torch.nn.Linear(32, 32)
    sparse_linear.load_state_dict(torch.load(model_dir / "sparse_linear.pt"))
    colbert_linear.load_state_dict(torch.load(model_dir / "colbert_linear.pt"))
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
        token_weights = torch.relu(sparse_linear(hidden)).squeeze(-1)
        colbert = F.normalize(colbert_linear(hidden[:, 1:]) * encoded["attention_mask"][:, 1:, None], dim=-1)
    per_vocab = torch.zeros(len(texts), len(tokenizer)).scatter_reduce(
        1, encoded["input_ids"], token_weights, reduce="amax")
    unused = [tokenizer.cls_token_id, tokenizer.eos_token_id, tokenizer.pad_token_id, tokenizer.unk_token_id]
    per_vocab[:, unused] = 0
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    sparse = [{pieces[i]: row[i].item() for i in torch.nonzero(row).flatten().tolist()} for row in per_vocab]
    lengths = encoded["attention_mask"].sum(1) - 1
    return {"encoded": encoded, "token_weights": token_weights, "sparse": sparse,
            "dense": F.normalize(hidden[:, 0], dim=-1), "colbert": [c[:n] for c, n in zip(colbert, lengths)]}


def test_sparse_weights_equal_direct_computation(m3, tiny_bgem3):
    out = m3.encode(TEXTS, "documents")
    reference = direct(tiny_bgem3, TEXTS, 64)
    for vector, expected in zip(out.sparse, reference["sparse"]):
        assert vector.keys() == {term_for_piece(p) for p in expected}
        for piece, weight in expected.items():
            assert vector[term_for_piece(piece)] == pytest.approx(weight, abs=1e-6)
    assert out.sparse[2] == {}  # empty text: only <s> </s>, both dropped
    # The cases the rules are about actually occur in these texts:
    ids, weights = reference["encoded"]["input_ids"][0].tolist(), reference["token_weights"][0].tolist()
    tokenizer = m3.tokenizer
    unk_or_special = {tokenizer.unk_token_id, tokenizer.cls_token_id, tokenizer.eos_token_id}
    assert unk_or_special <= set(ids)  # '!' is unknown to the tiny tokenizer
    assert any(w > 0 for i, w in zip(ids, weights) if i in unk_or_special)  # dropped, not just zeroed by ReLU
    assert not {"<s>", "</s>", "<unk>", "<pad>"} & set().union(*out.sparse)
    repeated = [i for i in set(ids) if ids.count(i) > 1 and i not in unk_or_special]
    spread = [i for i in repeated if len({round(w, 6) for j, w in zip(ids, weights) if j == i}) > 1]
    assert spread, "no repeated token with different weights: max pooling untested"
    for i in spread:
        term = m3.terms[i]
        assert out.sparse[0].get(term, 0.0) == pytest.approx(max(w for j, w in zip(ids, weights) if j == i), abs=1e-6)
    never_positive = {i for i in set(ids) - unk_or_special if max(w for j, w in zip(ids, weights) if j == i) == 0}
    assert never_positive and not {m3.terms[i] for i in never_positive} & set(out.sparse[0])  # ReLU zeros
    assert "new%20york" in out.sparse[1]  # the added piece 'new york', escaped
    assert "%25" in out.sparse[1]  # the piece '%'
    assert all(w > 0 for v in out.sparse for w in v.values())


def test_dense_and_colbert_heads_equal_direct_computation(m3, tiny_bgem3):
    out = m3.encode(TEXTS, "documents")
    reference = direct(tiny_bgem3, TEXTS, 64)
    assert out.dense.shape == (len(TEXTS), 32)
    assert torch.allclose(out.dense.norm(dim=-1), torch.ones(len(TEXTS)), atol=1e-5)
    assert torch.allclose(out.dense, reference["dense"], atol=1e-5)
    lengths = reference["encoded"]["attention_mask"].sum(1).tolist()
    for vectors, expected, length in zip(out.colbert, reference["colbert"], lengths):
        assert vectors.shape == (length - 1, 32)  # every real token but <s>, </s> included
        assert torch.allclose(vectors.norm(dim=-1), torch.ones(length - 1), atol=1e-5)
        assert torch.allclose(vectors, expected, atol=1e-5)


def test_batching_does_not_change_any_head(m3):
    together = m3.encode(TEXTS, "documents")
    for i, text in enumerate(TEXTS):
        alone = m3.encode([text], "documents")
        assert torch.allclose(alone.dense[0], together.dense[i], atol=1e-5)
        assert torch.allclose(alone.colbert[0], together.colbert[i], atol=1e-5)
        assert alone.sparse[0].keys() == together.sparse[i].keys()
        assert all(abs(alone.sparse[0][t] - together.sparse[i][t]) < 1e-5 for t in alone.sparse[0])


def test_query_side_uses_its_own_length_and_only_asked_heads(m3, tiny_bgem3):
    long_text = TEXTS[1]
    out = m3.encode([long_text], "queries", heads=("sparse",))
    assert out.dense is None and out.colbert is None
    expected = direct(tiny_bgem3, [long_text], 16)["sparse"][0]
    assert out.sparse[0].keys() == {term_for_piece(p) for p in expected}
    with pytest.raises(ValueError, match="side must be"):
        m3.encode(["x"], "passages")


def test_scores_and_hybrid_weights(m3):
    query = m3.encode(["vitamin D and calcium"], "queries")
    docs = m3.encode(TEXTS[:2], "documents")
    scores = {head: s[0] for head, s in m3.scores(["vitamin D and calcium"], TEXTS[:2]).items()}
    assert set(scores) == {"dense", "sparse", "colbert"} and all(s.shape == (2,) for s in scores.values())
    for j in range(2):
        q_sparse, d_sparse = query.sparse[0], docs.sparse[j]
        by_hand = sum(w * d_sparse[t] for t, w in q_sparse.items() if t in d_sparse)
        assert by_hand > 0 and scores["sparse"][j].item() == pytest.approx(by_hand, rel=1e-6)
        assert scores["dense"][j].item() == pytest.approx(float(query.dense[0] @ docs.dense[j]), abs=1e-6)
        token_scores = torch.einsum("in,jn->ij", query.colbert[0], docs.colbert[j])
        expected_colbert = token_scores.max(-1).values.sum() / query.colbert[0].shape[0]
        assert scores["colbert"][j].item() == pytest.approx(expected_colbert.item(), abs=1e-6)
    assert HYBRID_WEIGHTS == {"dense": 1.0, "sparse": 0.3, "colbert": 0.0}
    assert torch.allclose(hybrid_score(scores), scores["dense"] + 0.3 * scores["sparse"])
    all_three = hybrid_score(scores, {"dense": 1.0, "sparse": 0.3, "colbert": 1.0})
    assert torch.allclose(all_three, scores["dense"] + 0.3 * scores["sparse"] + scores["colbert"])
    assert hybrid_score({"dense": 0.5, "sparse": 2.0}) == pytest.approx(1.1)
    with pytest.raises(ValueError, match="colbert"):
        hybrid_score({"dense": 1.0, "sparse": 1.0}, {"dense": 1.0, "sparse": 0.3, "colbert": 1.0})
    with pytest.raises(ValueError, match="unknown heads"):
        hybrid_score(scores, {"lexical": 1.0})


def test_terms_have_no_whitespace_and_stay_distinct():
    pieces = ["▁Vitamin", "▁vitamin", "ing", "new york", "new%20york", "50%", "a\tb", "▁\u3000x", "日本"]
    terms = [term_for_piece(p) for p in pieces]
    assert terms[:3] == ["▁Vitamin", "▁vitamin", "ing"]  # ordinary pieces are kept as they are
    assert terms[3:6] == ["new%20york", "new%2520york", "50%25"]
    assert terms[-1] == "日本"
    assert len(set(terms)) == len(terms)
    assert all(not any(ch.isspace() for ch in t) for t in terms)
    assert [urllib.parse.unquote(t) for t in terms] == pieces  # reversible: one term per piece


def test_preset_and_registry(tiny_bgem3):
    preset = encoder_settings("bge-m3")  # the preset over the family's defaults
    assert (preset["family"], preset["model"], preset["doc_max_length"], preset["query_max_length"],
            preset["impact_scale"]) == ("bgem3", "BAAI/bge-m3", 512, 64, 1000)
    encoder = build_encoder({**preset, "model": str(tiny_bgem3), "doc_top_k": 3})
    assert isinstance(encoder, BgeM3Encoder) and encoder.describe()["family"] == "bgem3"
    top3 = encoder.encode_documents([TEXTS[0]])[0]
    full = encoder.model.encode([TEXTS[0]], "documents", heads=("sparse",)).sparse[0]
    assert sorted(top3) == sorted(sorted(full, key=full.get, reverse=True)[:3])
    with pytest.raises(InputError, match="setting 'pooling' is not read by the bgem3 family"):
        build_encoder({**preset, "model": str(tiny_bgem3), "pooling": "max"})


def test_bad_checkpoints_are_refused_with_the_file_named(tiny_bgem3, tiny_mlm, tmp_path):
    no_sparse = build_tiny_bgem3(tmp_path / "no-sparse", heads=("colbert",))
    with pytest.raises(InputError, match="sparse_linear.pt is missing"):
        BgeM3Model(str(no_sparse))
    no_colbert = build_tiny_bgem3(tmp_path / "no-colbert", heads=("sparse",))
    with pytest.raises(InputError, match="colbert_linear.pt is missing"):
        BgeM3Model(str(no_colbert))
    torch.save(torch.nn.Linear(16, 1).state_dict(), no_colbert / "colbert_linear.pt")  # wrong hidden size
    with pytest.raises(InputError, match=r"colbert_linear.pt: not a state dict of torch.nn.Linear with weight \(n, 32\)"):
        BgeM3Model(str(no_colbert))
    (no_colbert / "colbert_linear.pt").write_bytes(b"not a torch file")
    with pytest.raises(InputError, match="colbert_linear.pt: cannot read the head"):
        BgeM3Model(str(no_colbert))
    with pytest.raises(InputError, match="a bert checkpoint, not a BGE-M3 one"):
        BgeM3Model(str(tiny_mlm))  # a SPLADE (BERT + MLM head) checkpoint
    from lsr_pyserini.models.splade.encoder import SpladeEncoder
    with pytest.raises(InputError, match="has no masked-LM head"):
        SpladeEncoder(str(tiny_bgem3))  # and the other way round


def shard_records(folder):
    return [json.loads(line) for p in sorted(folder.iterdir()) for line in p.read_text().splitlines()]


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_encode_command_end_to_end(tiny_bgem3, tmp_path):
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.tsv"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    queries.write_text("q1\tvitamin D in new york\nq2\tcalcium 50%\n")
    out = tmp_path / "vectors"
    result = run_tool("encode", "corpus", "--encoder", "bge-m3", "--model", tiny_bgem3, "--input", corpus,
                      "--output", out, "--shard-size", "3")
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    records = shard_records(out)
    encoder = BgeM3Encoder(str(tiny_bgem3), doc_max_length=512)
    expected = [to_impacts(v, 1000) for v in encoder.encode_documents(TEXTS)]
    assert [r["id"] for r in records] == ["d0", "d1", "d2", "d3"]
    for record, vector in zip(records, expected):
        assert record["vector"].keys() == vector.keys()
        assert all(abs(record["vector"][t] - vector[t]) <= 1 for t in vector)  # batch rounding at most 1
    terms = {t for r in records for t in r["vector"]}
    assert any(t.startswith("▁") for t in terms) and not any(ch.isspace() for t in terms for ch in t)
    manifest = json.loads(manifest_path(out).read_text())
    assert manifest["settings"]["encoder"]["family"] == "bgem3" and manifest["settings"]["impact_scale"] == 1000

    tsv, floats = tmp_path / "q.tsv", tmp_path / "q.jsonl"
    result = run_tool("encode", "queries", "--encoder", "bge-m3", "--model", tiny_bgem3, "--input", queries,
                      "--output", tsv, "--float-weights", floats)
    assert result.returncode == 0, result.stderr
    lines = tsv.read_text().splitlines()
    assert [line.split("\t")[0] for line in lines] == ["q1", "q2"]
    query_vectors = [json.loads(line)["vector"] for line in floats.read_text().splitlines()]
    for written, vector in zip(query_vectors, encoder.encode_queries(["vitamin D in new york", "calcium 50%"])):
        assert written.keys() == vector.keys()
        assert all(written[t] == pytest.approx(vector[t], abs=1e-5) for t in vector)
    query_terms = set(lines[0].split("\t")[1].split())
    assert query_terms == set(to_impacts(query_vectors[0], 1000))
    assert "new%20york" in query_terms and "new%20york" in records[1]["vector"]  # one mapping, both sides

    # Lucene keeps every term as written: its impact scores are the integer dot products exactly.
    index, run = tmp_path / "index", tmp_path / "run.txt"
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", out, "--index", index,
             "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1",
             check=True)
    run_tool("lucene", "search", "--index", index, "--topics", tsv, "--output", run, "--impact", "--hits", "10",
             check=True)
    doc_impacts = {r["id"]: r["vector"] for r in records if r["vector"]}  # a document without terms is not indexed
    # pyserini's impact searcher drops query terms of idf 0 (in every indexed document): here the piece '▁'
    everywhere = set.intersection(*(set(d) for d in doc_impacts.values()))
    query_impacts = {line.split("\t")[0]: {t: n for t, n in Counter(line.split("\t")[1].split()).items()
                                           if t not in everywhere} for line in lines}
    hits = [line.split() for line in run.read_text().splitlines()]
    assert {(qid, docid) for qid, _, docid, *_ in hits} == {
        (qid, docid) for qid, q in query_impacts.items() for docid, d in doc_impacts.items() if q.keys() & d.keys()}
    for qid, _, docid, _, score, _ in hits:
        assert float(score) == sum(n * doc_impacts[docid].get(t, 0) for t, n in query_impacts[qid].items())
    assert ["q1", "Q0", "d1"] in [hit[:3] for hit in hits]  # matched through 'new%20york' among others


def test_encode_command_refuses_a_folder_without_the_sparse_head(tmp_path):
    folder = build_tiny_bgem3(tmp_path / "no-sparse", heads=("colbert",))
    out = tmp_path / "vectors"
    result = run_tool("encode", "corpus", "--encoder", "bge-m3", "--model", folder,
                      "--input", SAMPLE / "corpus.jsonl", "--output", out)
    assert result.returncode == 2, result.stderr
    assert len(error_lines(result)) == 1 and "sparse_linear.pt is missing" in error_lines(result)[0], result.stderr
    assert str(folder) in error_lines(result)[0] and "Traceback" not in result.stderr
    assert not out.exists()


def write_run(path, ranking: dict[str, list[str]]):
    path.write_text("".join(f"{qid} Q0 {d} {rank} {100 - rank} bm25\n"
                            for qid, docs in ranking.items() for rank, d in enumerate(docs, start=1)))


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_hybrid_reranker_reads_every_head_from_the_store(tiny_bgem3, tmp_path):
    """`encode corpus --dense-store` keeps the dense, ColBERT and full sparse heads of each document;
    `rerank --reranker bgem3` scores only queries and equals the direct computation for any weights."""
    corpus, queries = tmp_path / "corpus.jsonl", tmp_path / "queries.tsv"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    query_texts = {"q1": "vitamin D in new york", "q2": "calcium 50%"}
    queries.write_text("".join(f"{q}\t{t}\n" for q, t in query_texts.items()))
    store = tmp_path / "m3.store"
    run_tool("encode", "corpus", "--encoder", "bge-m3", "--model", tiny_bgem3, "--input", corpus,
             "--output", tmp_path / "vectors", "--shard-size", "3", "--dense-store", store, "--batch-size", "1",
             check=True)
    candidates = {"q1": ["d1", "d0", "d2", "d3"], "q2": ["d3", "d0"]}
    run = tmp_path / "run.txt"
    write_run(run, candidates)
    model = BgeM3Model(str(tiny_bgem3), doc_max_length=512, query_max_length=64)
    for weights, spec in ((HYBRID_WEIGHTS, None), ({"dense": 1.0, "sparse": 0.3, "colbert": 1.0},
                                                   "dense=1,sparse=0.3,colbert=1"), ({"colbert": 1.0}, "colbert=1")):
        out = tmp_path / f"reranked-{spec}.txt"
        result = run_tool("rerank", "--reranker", "bgem3", "--run", run, "--queries", queries, "--store", store,
                          "--output", out, *(["--hybrid-weights", spec] if spec else []))
        assert result.returncode == 0, result.stderr
        got = {(f[0], f[2]): float(f[4]) for f in (line.split() for line in out.read_text().splitlines())}
        for qid, docs in candidates.items():
            direct = hybrid_score(model.scores([query_texts[qid]], [TEXTS[int(d[1:])] for d in docs]), weights)[0]
            for doc, expected in zip(docs, direct.tolist()):
                assert got[(qid, doc)] == pytest.approx(expected, abs=2e-3)  # ColBERT vectors kept in float16
    # dense-only re-ranking and full dense search read the same store
    assert run_tool("rerank", "--reranker", "dense", "--run", run, "--queries", queries, "--store", store,
                    "--output", tmp_path / "dense.txt").returncode == 0
    assert run_tool("search_dense", "--store", store, "--queries", queries, "--output", tmp_path / "full.txt",
                    "--hits", "3").returncode == 0
    assert len((tmp_path / "full.txt").read_text().splitlines()) == 6

    bad = run_tool("rerank", "--reranker", "bgem3", "--run", run, "--queries", queries, "--store", store,
                   "--output", tmp_path / "bad.txt", "--hybrid-weights", "dense=1,lexical=2")
    assert bad.returncode == 2 and "argument --hybrid-weights: unknown head 'lexical'" in bad.stderr.splitlines()[-1]
    assert not (tmp_path / "bad.txt").exists()
    (store / "colbert.data.npy").write_bytes((store / "colbert.data.npy").read_bytes()[:-64])  # truncated
    bad = run_tool("rerank", "--reranker", "bgem3", "--run", run, "--queries", queries, "--store", store,
                   "--output", tmp_path / "bad.txt", "--hybrid-weights", "colbert=1")
    assert bad.returncode == 2 and "colbert.data.npy" in error_lines(bad)[0], bad.stderr
    assert not (tmp_path / "bad.txt").exists()


# -- training (`train bgem3`): BGE-M3's unified fine-tuning on any body -------------------------
def training_args(**overrides):
    from argparse import Namespace

    return Namespace(**{**dict(doc_max_length=32, query_max_length=12, temperature=0.02, colbert_dim=None,
                                head_lr=None, self_distill=False, sparse_init_bias=None, seed=5), **overrides})


def toy_batch():
    from lsr_pyserini.train.data import Batch

    return Batch(["vitamin d and calcium", "what do mice cells do?"],
                 [TEXTS[0], "calcium absorption in the cells of mice", "mice cells divide", TEXTS[1]], 2)


@pytest.fixture(scope="module")
def bert_body(tmp_path_factory):
    from conftest import build_tiny_bert

    return build_tiny_bert(tmp_path_factory.mktemp("bert-body"), with_mlm_head=False)


@pytest.mark.parametrize("body", ["bert", "xlm-roberta"])
def test_training_scores_are_the_encoders_scores(body, bert_body, tiny_bgem3, tmp_path):
    """What training optimises is what the encoder and the re-ranker compute: each head's score
    matrix of the training family equals candidate_scores of the saved checkpoint."""
    from lsr_pyserini.models.bgem3.training import BgeM3Family

    family = BgeM3Family(str(bert_body if body == "bert" else tiny_bgem3), training_args()).eval()
    batch = toy_batch()
    with torch.no_grad():
        scores = family.m3.score(family.m3.represent(batch.queries, "queries"),
                                 family.m3.represent(batch.documents, "documents"))
    family.save(tmp_path / "m3")
    model = BgeM3Model(str(tmp_path / "m3"), doc_max_length=32, query_max_length=12)
    for row, query in enumerate(batch.queries):
        expected = model.scores([query], batch.documents)
        for head in ("dense", "sparse", "colbert"):
            assert torch.allclose(scores[head][row], expected[head][0].float(), atol=1e-5), head
    assert (scores["sparse"] > 0).any() and scores["colbert"].std() > 0
    if body == "xlm-roberta":  # a BGE-M3 base keeps its heads
        for name in ("sparse_linear.pt", "colbert_linear.pt"):
            saved, base = torch.load(tmp_path / "m3" / name), torch.load(tiny_bgem3 / name)
            assert all(torch.equal(saved[k], base[k]) for k in base)


def test_training_loss_is_m3s_unified_loss(bert_body):
    """(L_dense + L_ensemble + 0.1 L_sparse + L_colbert) / 4 on scores / temperature, each the
    in-batch contrastive loss; self-distillation adds the ensemble as soft labels and halves."""
    from lsr_pyserini.models.bgem3.training import BgeM3Family

    batch = toy_batch()
    family = BgeM3Family(str(bert_body), training_args(temperature=0.05)).eval()
    with torch.no_grad():
        scores = {head: s / 0.05 for head, s in family.m3.score(family.m3.represent(batch.queries, "queries"),
                                                                  family.m3.represent(batch.documents, "documents")).items()}
        loss, logs = family.loss(batch, 0)
    labels = torch.tensor([0, 2])  # each query's positive heads its group of 2
    ce = {head: F.cross_entropy(s, labels) for head, s in scores.items()}
    ensemble = scores["dense"] + 0.3 * scores["sparse"] + scores["colbert"]
    ce["ensemble"] = F.cross_entropy(ensemble, labels)
    assert loss.item() == pytest.approx(((ce["dense"] + ce["ensemble"] + 0.1 * ce["sparse"] + ce["colbert"]) / 4).item(),
                                        rel=1e-5)
    assert logs == pytest.approx({head: value.item() for head, value in ce.items()}, rel=1e-5)
    family.args.self_distill = True
    with torch.no_grad():
        distilled, _ = family.loss(batch, 0)
    teacher = torch.softmax(ensemble, -1)
    kd = {head: -(teacher * torch.log_softmax(scores[head], -1)).sum(-1).mean() for head in ("dense", "sparse", "colbert")}
    expected = (loss + (kd["dense"] + 0.1 * kd["sparse"] + kd["colbert"]) / 3) / 2
    assert distilled.item() == pytest.approx(expected.item(), rel=1e-5)


def test_train_bgem3_on_a_bert_body_loads_everywhere(bert_body, tmp_path):
    """`train bgem3 --base BERT` writes the published layout; `encode --encoder bge-m3 --model DIR`,
    `rerank --reranker bgem3` and the Python API load it; its dropped tokens are BERT's, read from
    its tokenizer; --max-steps 0 writes the untrained model (new heads seeded by --seed)."""
    import lsr_pyserini

    negatives = tmp_path / "negatives.txt"  # every sample document for every query, as a BM25 run would
    qids = [line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
    negatives.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    for out, steps in (("untrained", "0"), ("untrained-again", "0"), ("trained", "3")):
        result = run_tool("train", "bgem3", "--base", bert_body, "--queries", SAMPLE / "queries.test.tsv",
                          "--qrels", SAMPLE / "qrels.test.trec", "--corpus", SAMPLE / "corpus.jsonl",
                          "--negatives", negatives, "--output", tmp_path / out, "--batch-size", "2",
                          "--max-steps", steps, "--head-lr", "1e-2", "--doc-max-length", "32",
                          "--query-max-length", "12", "--colbert-dim", "8", "--seed", "3", "--quiet")
        assert result.returncode == 0, result.stderr
    out = tmp_path / "trained"
    assert {"config.json", "model.safetensors", "tokenizer.json", "sparse_linear.pt", "colbert_linear.pt",
            "lsr_family.json", "lsr_training.json"} <= {p.name for p in out.iterdir()}
    marker = json.loads((out / "lsr_family.json").read_text())
    assert (marker["family"], marker["config"]["body"]) == ("bgem3", "bert") and set(marker) == {"family", "config"}
    # the full config: the training-time lengths, the family's impact scale (not the encoder default of 100)
    assert (marker["config"]["doc_max_length"], marker["config"]["query_max_length"],
            marker["config"]["impact_scale"]) == (32, 12, 1000)
    untrained = [torch.load(tmp_path / d / "sparse_linear.pt") for d in ("untrained", "untrained-again")]
    torch.manual_seed(3)
    fresh = torch.nn.Linear(32, 1).state_dict()  # torch's default initialisation, seeded with --seed
    assert all(torch.equal(untrained[0][k], fresh[k]) and torch.equal(untrained[1][k], fresh[k]) for k in fresh)
    trained = torch.load(out / "sparse_linear.pt")
    assert not torch.equal(trained["weight"], fresh["weight"])
    assert torch.load(out / "colbert_linear.pt")["weight"].shape == (8, 32)

    model = BgeM3Model(str(out))
    tokenizer = model.tokenizer
    assert model.dropped_ids == sorted([tokenizer.cls_token_id, tokenizer.sep_token_id, tokenizer.pad_token_id,
                                        tokenizer.unk_token_id])
    vectors = model.encode(["vitamin d helps calcium absorption [MASK] ?"], "documents", heads=("sparse",)).sparse
    assert vectors[0] and not {"[CLS]", "[SEP]", "[PAD]", "[UNK]"} & set(vectors[0])

    corpus = tmp_path / "corpus.jsonl"
    corpus.write_text("".join(json.dumps({"_id": f"d{i}", "text": t}) + "\n" for i, t in enumerate(TEXTS)))
    queries = tmp_path / "queries.tsv"
    queries.write_text("q1\tvitamin d calcium\nq2\tmice cells\n")
    run_tool("encode", "corpus", "--encoder", "bge-m3", "--model", out, "--input", corpus, "--output",
             tmp_path / "vectors", "--dense-store", tmp_path / "store", check=True)
    run_tool("encode", "queries", "--encoder", "bge-m3", "--model", out, "--input", queries, "--output",
             tmp_path / "q.tsv", check=True)
    run = tmp_path / "run.txt"
    write_run(run, {"q1": ["d0", "d1", "d3"], "q2": ["d1", "d2"]})
    reranked = tmp_path / "reranked.txt"
    run_tool("rerank", "--reranker", "bgem3", "--run", run, "--queries", queries, "--store", tmp_path / "store",
             "--output", reranked, check=True)
    got = {(f[0], f[2]): float(f[4]) for f in (line.split() for line in reranked.read_text().splitlines())}
    direct = hybrid_score(model.scores(["vitamin d calcium"], [TEXTS[0], TEXTS[1], TEXTS[3]]))[0]
    assert [got[("q1", d)] for d in ("d0", "d1", "d3")] == pytest.approx(direct.tolist(), abs=1e-4)
    api = lsr_pyserini.load_encoder("bge-m3", model=str(out))
    assert isinstance(api, BgeM3Encoder) and api.encode_queries(["vitamin d"]) == \
        BgeM3Encoder(str(out), query_max_length=64).encode_queries(["vitamin d"])
    assert isinstance(lsr_pyserini.load_encoder(str(out)), BgeM3Encoder)  # the folder alone: its family marker
    # body: a declared setting (default none), recorded by training, back on reload, and checked when loading
    from lsr_pyserini.models.configs import resolve_settings

    assert resolve_settings(str(out))["body"] == "bert" and resolve_settings("bge-m3")["body"] is None
    with pytest.raises(InputError, match="a bert body, not the xlm-roberta body its settings record"):
        lsr_pyserini.load_encoder(str(out), body="xlm-roberta")
    old = tmp_path / "old"  # a checkpoint of before: body beside the config
    shutil.copytree(out, old)
    config = {k: v for k, v in marker["config"].items() if k != "body"}
    (old / "lsr_family.json").write_text(json.dumps({"family": "bgem3", "body": "bert", "config": config}))
    assert resolve_settings(str(old))["body"] == "bert"
    (old / "lsr_family.json").write_text(json.dumps({"family": "bgem3", "body": "electra", "config": config}))
    with pytest.raises(InputError, match="a bert body, not the electra body"):
        lsr_pyserini.load_encoder(str(old))


def test_a_body_trained_for_another_family_is_refused(bert_body, tmp_path):
    import shutil

    from lsr_pyserini.core.hf import write_family

    folder = tmp_path / "splade-marked"
    shutil.copytree(bert_body, folder)
    torch.save(torch.nn.Linear(32, 1).state_dict(), folder / "sparse_linear.pt")
    torch.save(torch.nn.Linear(32, 32).state_dict(), folder / "colbert_linear.pt")
    with pytest.raises(InputError, match="a bert checkpoint, not a BGE-M3 one"):
        BgeM3Model(str(folder))  # a BERT without the marker `train bgem3` writes
    write_family(folder, "splade")
    with pytest.raises(InputError, match="trained as a 'splade' model, not 'bgem3'"):
        BgeM3Model(str(folder))
    write_family(folder, "bgem3")
    assert BgeM3Model(str(folder)).encoder.config.model_type == "bert"
