"""PromptReps mechanics on tiny random Llama, Qwen2 and Gemma3 models with a chat template built here:
the prompt, the harvested position, sparse terms restricted to the text, padding invariance,
term escaping, the CLI pipeline (sparse Lucene + dense store + fusion) and bad input."""
import json

import numpy as np
import pytest
import torch

from conftest import LLAMA3_STYLE_TEMPLATE, SAMPLE, error_lines, run_tool
from lsr_pyserini.core.fusion import interpolate
from lsr_pyserini.core.readers import read_run
from lsr_pyserini.models.promptreps.encoder import ASSISTANT_PREFIX, PromptRepsEncoder, escape_term

TEXTS = ["Vitamin D and bone health: 100% of trials", "zinc",
         "Exercise reduces the risk of type 2 diabetes in adults who walk every day"]


@pytest.fixture(scope="module", params=["llama", "qwen2", "gemma3"])
def encoder(request, tiny_llama, tiny_qwen, tiny_gemma3):
    folder = {"llama": tiny_llama, "qwen2": tiny_qwen, "gemma3": tiny_gemma3}[request.param]
    return PromptRepsEncoder(str(folder), dtype="float32")


def test_prompt_follows_the_paper(encoder):
    prompt = encoder.prompt("Vitamin D", "queries")
    assert prompt.startswith("<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
                             "You are an AI assistant that can understand human language.<|eot_id|>")
    assert ('user<|end_header_id|>\n\nQuery: "Vitamin D". Use one word to represent the query in a retrieval '
            'task. Make sure your word is in lowercase.<|eot_id|>') in prompt
    assert prompt.endswith('<|start_header_id|>assistant<|end_header_id|>\n\nThe word is: "')
    assert 'Passage: "Vitamin D". Use one word to represent the passage' in encoder.prompt("Vitamin D", "documents")


def test_harvests_the_last_position_of_the_unpadded_prompt(encoder):
    """Dense = normalised final hidden state, sparse = log(1+ReLU(logits)), both at the last token."""
    text = TEXTS[0]
    encoded = encoder.tokenizer(encoder.prompt(text, "documents"), add_special_tokens=False, return_tensors="pt")
    assert encoder.tokenizer.decode(encoded["input_ids"][0, -3:]).endswith(ASSISTANT_PREFIX[-5:])
    with torch.no_grad():
        out = encoder.model(**encoded, output_hidden_states=True)
    expected_dense = torch.nn.functional.normalize(out.hidden_states[-1][0, -1], dim=-1).numpy()
    weights = torch.log1p(torch.relu(out.logits[0, -1]))
    sparse, dense = encoder.encode_both([text], "documents")[0]
    np.testing.assert_allclose(dense, expected_dense, atol=1e-5)
    assert abs(np.linalg.norm(dense) - 1) < 1e-5
    ids = encoder.text_token_ids(text)
    by_term = {encoder.terms[i]: float(weights[i]) for i in ids}
    assert sparse and all(w == pytest.approx(by_term[t], abs=1e-5) for t, w in sparse.items())
    other = torch.nn.functional.normalize(out.hidden_states[-1][0, -2], dim=-1).numpy()
    assert not np.allclose(dense, other, atol=1e-3)  # the position matters


def test_sparse_vector_holds_only_tokens_of_the_text(encoder):
    vectors = [sparse for sparse, _ in encoder.encode_both(TEXTS, "documents")]
    assert sum(map(bool, vectors)) >= 2  # so that an encoder giving empty vectors fails
    for text, sparse in zip(TEXTS, vectors):
        allowed = set()
        for word in text.lower().replace(":", " ").replace("%", " ").split():
            allowed |= {escape_term(p) for p in encoder.tokenizer.tokenize(word)}
        assert set(sparse) <= allowed, (text, set(sparse) - allowed)
        assert all(w > 0 for w in sparse.values())
    capped = PromptRepsEncoder(encoder.path, dtype="float32", doc_top_k=2).encode_documents([TEXTS[2]])[0]
    full = encoder.encode_documents([TEXTS[2]])[0]
    assert len(full) > 2 and capped == dict(sorted(full.items(), key=lambda kv: -kv[1])[:2])


def test_left_padding_gives_the_vectors_of_no_padding(encoder):
    assert encoder.tokenizer.padding_side == "left"
    batch = encoder.encode_both(TEXTS, "queries")
    assert sum(bool(sparse) for sparse, _ in batch) >= 2  # so that empty vectors do not pass as equal
    for text, (sparse, dense) in zip(TEXTS, batch):
        alone_sparse, alone_dense = encoder.encode_both([text], "queries")[0]
        np.testing.assert_allclose(dense, alone_dense, atol=1e-5)
        assert sparse.keys() == alone_sparse.keys()
        assert all(sparse[t] == pytest.approx(alone_sparse[t], abs=1e-5) for t in sparse)


def test_terms_are_escaped_one_to_one_and_without_whitespace(encoder):
    assert escape_term("Ġword") == "Ġword" and escape_term("▁a b") == "▁a%20b"
    assert escape_term("100%") == "100%25" and escape_term("\n\t") == "%0A%09"
    assert escape_term(b"a b\xff") == "a%20b%FF" and escape_term("\u3000x") == "%E3%80%80x"
    assert len(set(encoder.terms)) == len(encoder.terms)
    assert not any(ch.isspace() for term in encoder.terms for ch in term)


@pytest.fixture(scope="module")
def preset(tiny_llama, tmp_path_factory):
    path = tmp_path_factory.mktemp("presets") / "tiny-promptreps.yaml"
    path.write_text(f"family: promptreps\nmodel: {tiny_llama}\ndoc_max_length: 64\nquery_max_length: 16\n"
                    f"doc_top_k: 16\nquery_top_k: 16\nimpact_scale: 100\nbatch_size: 4\ndtype: float32\n")
    return path


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_pipeline_sparse_lucene_dense_faiss_fused(preset, tmp_path):
    queries = SAMPLE / "queries.test.tsv"
    vectors, store, qtsv = tmp_path / "vectors", tmp_path / "store", tmp_path / "q.tsv"
    result = run_tool("encode", "corpus", "--encoder", preset, "--input", SAMPLE / "corpus.jsonl", "--output", vectors,
                      "--dense-store", store, "--shard-size", "5")
    assert result.returncode == 0, result.stderr
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["encoder"]["family"] == "promptreps" and manifest["documents"] == 12
    assert "{{ bos_token }}" in manifest["encoder"]["chat_template"]
    records = [json.loads(line) for p in sorted(vectors.iterdir()) for line in p.read_text().splitlines()]
    assert len(records) == 12 and all(r["vector"] for r in records)
    assert run_tool("encode", "queries", "--encoder", preset, "--input", queries, "--output", qtsv).returncode == 0
    steps = [
        ("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index", tmp_path / "index",
         "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized", "--threads", "1"),
        ("lucene", "search", "--index", tmp_path / "index", "--topics", qtsv, "--output", tmp_path / "sparse.txt",
         "--impact", "--hits", "12"),
        ("search_dense", "--store", store, "--queries", queries, "--output", tmp_path / "dense.txt", "--hits", "12"),
        ("fuse", "--run", tmp_path / "sparse.txt", "--run", tmp_path / "dense.txt", "--output", tmp_path / "hybrid.txt"),
        ("rerank", "--reranker", "promptreps", "--run", tmp_path / "sparse.txt", "--queries", queries,
         "--store", store, "--output", tmp_path / "reranked.txt", "--interpolate", "0.3"),
    ]
    for tool, *args in steps:
        result = run_tool(tool, *args)
        assert result.returncode == 0, (tool, result.stdout[-2000:], result.stderr[-2000:])
    # Lucene's impact scores are the dot products of the written (escaped) term vectors
    sparse = read_run(str(tmp_path / "sparse.txt"))
    doc_vectors = {r["id"]: r["vector"] for r in records}
    for line in qtsv.read_text().splitlines():
        qid, _, terms = line.partition("\t")
        query = {}
        for term in terms.split():
            query[term] = query.get(term, 0) + 1
        expected = {d: sum(w * v.get(t, 0) for t, w in query.items()) for d, v in doc_vectors.items()}
        for doc, score in sparse.get(qid, []):
            assert score == pytest.approx(expected[doc], rel=1e-4), (qid, doc)
        assert len(sparse.get(qid, [])) == sum(s > 0 for s in expected.values())
    dense, hybrid = read_run(str(tmp_path / "dense.txt")), read_run(str(tmp_path / "hybrid.txt"))
    assert len(dense) == 7 and all(len(r) == 12 for r in dense.values())
    assert set(hybrid) == set(dense)
    # --interpolate 0.3: 0.7 x min-max normalised first-stage score + 0.3 x the re-ranker's own
    alone = run_tool("rerank", "--reranker", "promptreps", "--run", tmp_path / "sparse.txt", "--queries", queries,
                     "--store", store, "--output", tmp_path / "alone.txt")
    assert alone.returncode == 0, alone.stderr
    alone = read_run(str(tmp_path / "alone.txt"))
    expected, reranked = interpolate(sparse, alone, 0.3), read_run(str(tmp_path / "reranked.txt"))
    assert reranked.keys() == expected.keys() == sparse.keys() and len(sparse) > 0
    for qid, ranking in expected.items():
        span = max(s for _, s in alone[qid]) - min(s for _, s in alone[qid])
        rounding = 1e-6 / (span or 1) + 1e-6  # the runs hold 6 decimals; normalising divides by the span
        assert dict(reranked[qid]) == pytest.approx(dict(ranking), abs=rounding), qid


def test_a_model_without_chat_template_names_the_flag(tiny_llama_without_template, tmp_path):
    args = ("encode", "queries", "--encoder", "promptreps-llama3-8b-instruct", "--model", tiny_llama_without_template,
            "--input", SAMPLE / "queries.test.tsv", "--dtype", "float32")
    result = run_tool(*args, "--output", tmp_path / "q.tsv")
    assert result.returncode == 2
    assert len(error_lines(result)) == 1 and "has no chat template" in error_lines(result)[0]
    assert "--chat-template FILE" in error_lines(result)[0] and not (tmp_path / "q.tsv").exists()
    template = tmp_path / "template.jinja"
    template.write_text(LLAMA3_STYLE_TEMPLATE)
    result = run_tool(*args, "--chat-template", template, "--output", tmp_path / "q.tsv")
    assert result.returncode == 0, result.stderr
    missing = run_tool(*args, "--chat-template", tmp_path / "none.jinja", "--output", tmp_path / "q2.tsv")
    assert missing.returncode == 2 and "none.jinja: no such file" in error_lines(missing)[0]


def test_gemma3_dense_store_and_reranker(tiny_gemma3, tmp_path):
    """The promptreps-gemma3-270m preset's architecture and prompt on a random Gemma3: the store's
    vectors are the encoder's, and the re-ranker scores the query's dense vector against them."""
    from lsr_pyserini.core.presets import load_preset

    preset = tmp_path / "tiny-gemma3.yaml"
    template = load_preset("promptreps-gemma3-270m")["chat_template"]
    preset.write_text(json.dumps({"family": "promptreps", "model": str(tiny_gemma3), "doc_max_length": 64,
                                  "chat_template": template, "dtype": "float32", "batch_size": 4}))
    store, run = tmp_path / "store", tmp_path / "run.txt"
    result = run_tool("encode", "corpus", "--encoder", preset, "--input", SAMPLE / "corpus.jsonl",
                      "--output", tmp_path / "vectors", "--dense-store", store, "--quiet")
    assert result.returncode == 0, result.stderr
    docs = [json.loads(line)["_id"] for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    queries = dict(line.split("\t", 1) for line in (SAMPLE / "queries.test.tsv").read_text().splitlines())
    run.write_text("".join(f"{q} Q0 {d} {r + 1} {len(docs) - r} bm25\n" for q in queries for r, d in enumerate(docs)))
    result = run_tool("rerank", "--reranker", "promptreps", "--run", run, "--queries", SAMPLE / "queries.test.tsv",
                      "--store", store, "--output", tmp_path / "reranked.txt")
    assert result.returncode == 0, result.stderr
    encoder = PromptRepsEncoder(str(tiny_gemma3), chat_template=template, doc_max_length=64, dtype="float32")
    assert encoder.prompt("zinc", "queries").endswith('zinc". Use one word to represent the query in a retrieval '
                                                       'task. Make sure your word is in lowercase.\nThe word is: "')
    texts = {json.loads(line)["_id"]: json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()}
    vectors = encoder.dense.encode_documents([f"{texts[d]['title']} {texts[d]['text']}".strip() for d in docs])
    reranked = read_run(str(tmp_path / "reranked.txt"))
    for qid, text in list(queries.items())[:3]:
        expected = vectors @ encoder.dense.encode_queries([text])[0]
        scores = dict(reranked[qid])
        assert [scores[d] for d in docs] == pytest.approx(expected.tolist(), abs=1e-4), qid
