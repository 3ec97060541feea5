"""SSR mechanics on tiny random BERTs: TopK SAE, stores, pseudo-terms, exact re-ranking, refusals."""
from __future__ import annotations

import json
import shutil

import numpy as np
import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core.readers import InputError

FIT = ["--latents", "64", "--k", "8", "--cls-latents", "32", "--cls-k", "4", "--steps", "30", "--cls-steps", "10",
       "--batch-size", "64", "--cls-batch-size", "4", "--dead-after", "100", "--quiet"]


def in_process(tool: str, *args) -> None:
    """`python -m lsr_pyserini.TOOL ARGS` in this process (the command-line runs are in test_refusals)."""
    import importlib

    module = importlib.import_module(f"lsr_pyserini.{tool}")
    if not hasattr(module, "main"):  # a package: its command is in __main__
        module = importlib.import_module(f"lsr_pyserini.{tool}.__main__")
    module.main([str(a) for a in args])


@pytest.fixture(scope="module")
def pipeline(tiny_encoder_only, tmp_path_factory):
    """embed -> fit -> index on the sample corpus; the folders of each step."""
    work = tmp_path_factory.mktemp("ssr")
    in_process("ssr", "embed", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl", "--output",
               work / "tokens", "--max-length", "64", "--quiet")
    in_process("ssr", "fit", "--tokens", work / "tokens", "--output", work / "model", *FIT)
    in_process("ssr", "index", "--model", work / "model", "--tokens", work / "tokens", "--output", work / "vectors",
               "--codes", work / "codes", "--quiet")
    return work


def write_old_style(model, folder, backbone=None, **settings):
    """The SSR model folder `model` as `ssr fit` wrote it before settings were declared: the backbone, SAE
    sizes, retrieval settings and training record in its own ssr_config.json, the tensors without
    metadata, and lsr_family.json's config holding the family's defaults of then (no retrieval setting);
    `backbone` and `settings` change what ssr_config.json records."""
    from safetensors.torch import load_file, save_file

    from lsr_pyserini.models.ssr.sae import SSRModel

    loaded = SSRModel.load(str(model))
    folder.mkdir(parents=True)
    save_file(load_file(str(model / "sae.safetensors")), str(folder / "sae.safetensors"), metadata={"format": "pt"})
    config = {"family": "ssr", "backbone": {**loaded.backbone, **(backbone or {})},
              "token_sae": loaded.token_sae.describe(), "cls_sae": loaded.cls_sae.describe(),
              **{**loaded.settings, **settings}, "training": loaded.training}
    (folder / "ssr_config.json").write_text(json.dumps(config, indent=2) + "\n")
    (folder / "lsr_family.json").write_text(json.dumps({"family": "ssr", "config": {
        "impact_scale": 100, "query_impact_scale": 20, "batch_size": 32, "backbone": None}}, indent=2) + "\n")


def test_a_model_folder_records_its_settings_in_the_family_marker_only(pipeline):
    """`ssr fit` writes every declared setting in lsr_family.json's config, as every family's checkpoint,
    and no config file of its own; what the SAEs are (backbone, sizes, training record: no setting) is
    the marker's `structure` beside the config."""
    marker = json.loads((pipeline / "model" / "lsr_family.json").read_text())
    assert set(marker) == {"family", "config", "structure"}
    assert set(marker["structure"]) == {"backbone", "token_sae", "cls_sae", "training"}
    assert isinstance(marker["structure"]["backbone"], dict) and marker["config"]["backbone"] is None
    assert {k: marker["config"][k] for k in ("query_term_budget", "query_k_min", "cls_terms", "cls_weight")} == \
        {"query_term_budget": 256, "query_k_min": 4, "cls_terms": True, "cls_weight": 1.0}
    assert sorted(p.name for p in (pipeline / "model").iterdir()) == ["lsr_family.json", "sae.safetensors"]


def test_non_default_retrieval_settings_are_saved_reloaded_and_used(pipeline, tmp_path):
    """`ssr fit --query-term-budget 8 --query-k-min 1 --no-cls-terms --cls-weight 0.25`: each recorded in
    lsr_family.json, each back on reload (SSRModel, resolve_settings), and encoding follows them (no c<n>
    terms; fewer neurons per query token); the Python API overrides one through its declaration."""
    import lsr_pyserini
    from lsr_pyserini.models.configs import resolve_settings
    from lsr_pyserini.models.ssr.sae import SSRModel, adaptive_k

    model = tmp_path / "model"
    in_process("ssr", "fit", "--tokens", pipeline / "tokens", "--output", model, *FIT, "--query-term-budget", "8",
               "--query-k-min", "1", "--no-cls-terms", "--cls-weight", "0.25")
    chosen = {"query_term_budget": 8, "query_k_min": 1, "cls_terms": False, "cls_weight": 0.25}
    config = json.loads((model / "lsr_family.json").read_text())["config"]
    assert {k: config[k] for k in chosen} == chosen
    assert SSRModel.load(str(model)).settings == chosen
    assert {k: resolve_settings(str(model))[k] for k in chosen} == chosen
    assert adaptive_k(SSRModel.load(str(model)), 4) == 2 and adaptive_k(SSRModel.load(str(pipeline / "model")), 4) == 8
    texts = ["vitamin d and bone health in older adults"]
    own = lsr_pyserini.load_encoder(str(model)).encode_queries(texts)[0]
    default = lsr_pyserini.load_encoder(str(pipeline / "model")).encode_queries(texts)[0]
    assert own and not any(t.startswith("c") for t in own) and any(t.startswith("c") for t in default)
    assert len(own) < len([t for t in default if not t.startswith("c")])  # budget 8 over the tokens: K = 1 or 2
    # the preset with --model DIR encodes as DIR says; an argument overrides through the declaration
    preset = lsr_pyserini.load_encoder("ssr", model=str(model)).encode_queries(texts)[0]
    assert preset == own
    overridden = lsr_pyserini.load_encoder(str(model), cls_terms=True).encode_queries(texts)[0]
    assert any(t.startswith("c") for t in overridden)
    with pytest.raises(InputError, match="cls_weight"):
        lsr_pyserini.load_encoder(str(model), cls_weight=-1)


def test_a_folder_written_before_with_its_own_config_file_loads_to_the_same_settings(pipeline, tmp_path):
    """A folder as `ssr fit` wrote it before (ssr_config.json of its own, non-default retrieval settings
    there): SSRModel, resolve_settings and the encoder read the same settings, and encode as the folder
    written now with those settings does; `train ssr` from it records them in its lsr_family.json."""
    import lsr_pyserini
    from lsr_pyserini.models.configs import resolve_settings
    from lsr_pyserini.models.ssr.sae import SSR_MODEL, SSRModel

    chosen = {"query_term_budget": 8, "query_k_min": 1, "cls_terms": False, "cls_weight": 0.25}
    old = tmp_path / "old"
    write_old_style(pipeline / "model", old, **chosen)
    loaded = SSRModel.load(str(old))
    new = SSRModel.load(str(pipeline / "model"))
    assert loaded.settings == chosen and loaded.backbone == new.backbone and loaded.training == new.training
    assert torch.equal(loaded.token_sae.W_enc, new.token_sae.W_enc)
    assert {k: resolve_settings(str(old))[k] for k in chosen} == chosen
    assert SSR_MODEL.recognise(old) and SSR_MODEL.recognise(pipeline / "model")
    rewritten = tmp_path / "rewritten"
    loaded.save(rewritten)  # the same model, written now
    assert not (rewritten / "ssr_config.json").exists()
    assert SSRModel.load(str(rewritten)).settings == chosen
    texts = ["vitamin d and bone health in older adults", "sleep"]
    assert lsr_pyserini.load_encoder(str(old)).encode_queries(texts) == \
        lsr_pyserini.load_encoder(str(rewritten)).encode_queries(texts)
    assert lsr_pyserini.load_encoder("ssr", model=str(old)).encode_queries(texts) == \
        lsr_pyserini.load_encoder(str(old)).encode_queries(texts)


def test_topk_codes_shape_sparsity_and_unit_norm_decoder():
    from lsr_pyserini.models.ssr.sae import SAEFit, TopKSAE
    from lsr_pyserini.train.loop import train

    torch.manual_seed(0)
    sae = TopKSAE(16, 48, 5)
    x = torch.randn(200, 16)
    indices, values = sae.encode(x)
    assert indices.shape == values.shape == (200, 5)
    dense = sae.dense_codes(indices, values)
    assert ((dense != 0).sum(-1) <= 5).all() and (dense >= 0).all()
    pre = sae.pre_activations(x)  # the kept values are the 5 largest ReLU pre-activations
    assert torch.allclose(values, pre.sort(-1, descending=True).values[:, :5])
    decoded = sae.decode(indices, values)
    assert torch.allclose(decoded, dense @ sae.W_dec.T + sae.b_pre, atol=1e-5)
    with torch.no_grad():  # latents 0-9 start nearly dead: they never win a top-5 place
        sae.b_enc[:10] = -2.5
    fit = SAEFit(sae, aux_k=8, aux_weight=1 / 32, dead_after=50)

    class Rows:  # the whole of x at every step, through the loop every family trains with
        def __len__(self):
            return len(x)

        def epoch_batches(self, epoch, seed, batch_size, group_size):
            yield x

    run = lambda steps: train(fit, Rows(), None, {}, epochs=steps, batch_size=len(x), group_size=1, lr=1e-2,
                              seed=0, quiet=True)["final"]
    first = run(1)
    dead_bias = sae.b_enc[:10].detach().clone()
    logs = run(1)
    assert logs["dead"] >= 10 and logs["aux"] > 0  # the auxiliary loss sees the dead latents ...
    assert (sae.b_enc[:10] > dead_bias).any()  # ... and pushes some of them back towards firing
    logs = run(30)
    assert torch.allclose(sae.W_dec.norm(dim=0), torch.ones(48), atol=1e-5)
    assert logs["nmse"] < first["nmse"]


def test_store_round_trip(tmp_path):
    from lsr_pyserini.stores.tokens import TokenRows, TokenRowsWriter

    rng = np.random.default_rng(0)
    docs = {"a": rng.normal(size=(3, 4)), "b": np.zeros((0, 4)), "c": rng.normal(size=(5, 4))}
    writer = TokenRowsWriter(str(tmp_path / "store"), "tokens", {"backbone": {"dim": 4}})
    for docid, rows in docs.items():
        writer.add(docid, {"tokens": rows.astype(np.float16)}, {"pooled": rows.sum(0).astype(np.float16)})
    writer.finish()
    store = TokenRows(str(tmp_path / "store"), "tokens")
    bounds, arrays = store.gather(["c", "b", "a"], ["tokens"])
    assert bounds.tolist() == [0, 5, 5, 8]
    np.testing.assert_array_equal(arrays["tokens"], np.concatenate([docs["c"], docs["a"]]).astype(np.float16))
    np.testing.assert_array_equal(store.document_rows(["a"], "pooled")[0], docs["a"].sum(0).astype(np.float16))
    assert store.missing(["a", "z"]) == ["z"]
    with pytest.raises(Exception, match="not an SSR codes store"):
        TokenRows(str(tmp_path / "store"), "codes")


def test_sum_of_max_and_code_similarities_match_dense_products():
    from lsr_pyserini.models.ssr.reranker import code_similarities, sum_of_max

    rng = np.random.default_rng(1)
    latents, k = 30, 4
    query_index = np.stack([rng.choice(latents, k, replace=False) for _ in range(3)])
    query_value = rng.random((3, k)).astype(np.float32)
    doc_index = np.stack([rng.choice(latents, k, replace=False) for _ in range(7)])
    doc_value = rng.random((7, k)).astype(np.float32)
    dense = lambda i, v: np.stack([np.bincount(r, w, minlength=latents) for r, w in zip(i, v)])
    expected = dense(doc_index, doc_value) @ dense(query_index, query_value).T
    similarities = code_similarities(query_index, query_value, doc_index, doc_value, latents)
    np.testing.assert_allclose(similarities, expected, rtol=1e-5)
    bounds = np.array([0, 2, 2, 7])
    np.testing.assert_allclose(sum_of_max(similarities, bounds),
                               [expected[:2].max(0).sum(), 0.0, expected[2:].max(0).sum()], rtol=1e-5)


def direct_codes(sae, rows):
    with torch.no_grad():
        indices, values = sae.encode(torch.as_tensor(np.asarray(rows, dtype=np.float32)))
        return sae.dense_codes(indices, values).numpy()


def test_pseudo_terms_are_max_activations_and_queries_adapt_k(pipeline, tiny_encoder_only):
    from lsr_pyserini.models.ssr.codes import query_terms
    from lsr_pyserini.models.ssr.sae import SSRModel, adaptive_k
    from lsr_pyserini.stores.tokens import TokenRows

    model = SSRModel.load(str(pipeline / "model"))
    tokens = TokenRows(str(pipeline / "tokens"), "tokens")
    records = [json.loads(line) for line in (pipeline / "vectors" / "part-00000.jsonl").open()]
    assert len(records) == len(tokens.docids)
    record = records[0]
    row = tokens.row[record["id"]]
    token_codes = direct_codes(model.token_sae, tokens.arrays["tokens"][tokens.offsets[row]:tokens.offsets[row + 1]])
    cls_codes = direct_codes(model.cls_sae, tokens.arrays["pooled"][row:row + 1])[0]
    expected = {f"s{n}": int(round(100 * w)) for n, w in enumerate(token_codes.max(0))}
    expected.update({f"c{n}": int(round(100 * w)) for n, w in enumerate(cls_codes)})
    assert record["vector"] == {t: w for t, w in expected.items() if w > 0}
    assert adaptive_k(model, 1) == 8 and adaptive_k(model, 10_000) == 4  # budget 256 / tokens within [4, K=8]
    vector = query_terms(model, np.asarray(tokens.arrays["tokens"][:3], dtype=np.float32),
                         np.asarray(tokens.arrays["pooled"][0], dtype=np.float32))
    summed = direct_codes(model.token_sae, tokens.arrays["tokens"][:3]).sum(0)
    assert {t: round(w, 4) for t, w in vector.items() if t.startswith("s")} == \
           {f"s{n}": round(float(w), 4) for n, w in enumerate(summed) if w > 0}


def read_scores(path):
    scores = {}
    for line in path.open():
        qid, _, docid, _, score, _ = line.split()
        scores[(qid, docid)] = float(score)
    return scores


@pytest.fixture(scope="module")
def first_stage(pipeline):
    """Encoded queries, a Lucene impact index of the pseudo-terms and its run."""
    in_process("encode", "queries", "--encoder", "ssr", "--model", pipeline / "model", "--input",
               SAMPLE / "queries.test.tsv", "--output", pipeline / "queries.tsv", "--quiet")
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", pipeline / "vectors", "--index",
             pipeline / "index", "--generator", "DefaultLuceneDocumentGenerator", "--impact", "--pretokenized",
             "--threads", "1", check=True)
    run_tool("lucene", "search", "--index", pipeline / "index", "--topics", pipeline / "queries.tsv", "--output",
             pipeline / "run.txt", "--impact", "--hits", "5", check=True)
    return pipeline / "run.txt"


def test_ssr_and_maxsim_scores_equal_a_direct_computation(pipeline, first_stage, tiny_encoder_only, tmp_path):
    from lsr_pyserini.core.readers import read_queries, read_run
    from lsr_pyserini.models.ssr.backbone import TokenEncoder
    from lsr_pyserini.models.ssr.sae import SSRModel
    from lsr_pyserini.stores.tokens import TokenRows

    run = read_run(str(first_stage))
    assert run and all(len(r) == 5 for r in run.values())
    in_process("rerank", "--reranker", "ssr", "--run", first_stage, "--queries", SAMPLE / "queries.test.tsv",
               "--store", pipeline / "codes", "--output", tmp_path / "ssr-cls.txt", "--cls-weight", "0.5")
    in_process("rerank", "--reranker", "maxsim", "--run", first_stage, "--queries", SAMPLE / "queries.test.tsv",
               "--store", pipeline / "tokens", "--output", tmp_path / "maxsim.txt")
    model = SSRModel.load(str(pipeline / "model"))
    tokens = TokenRows(str(pipeline / "tokens"), "tokens")
    encoder = TokenEncoder(**model.backbone)
    texts = {q.id: q.text for q in read_queries(str(SAMPLE / "queries.test.tsv"))}
    ssr, maxsim = read_scores(tmp_path / "ssr-cls.txt"), read_scores(tmp_path / "maxsim.txt")
    cls_parts = []
    assert set(ssr) == set(maxsim) == {(q, d) for q, r in run.items() for d, _ in r}
    for qid in run:
        pooled, query_tokens = encoder.encode([texts[qid]], "queries")[0]
        z_q, c_q = direct_codes(model.token_sae, query_tokens), direct_codes(model.cls_sae, pooled[None])[0]
        for docid, _ in run[qid]:
            row = tokens.row[docid]
            doc_tokens = tokens.arrays["tokens"][tokens.offsets[row]:tokens.offsets[row + 1]]
            # the code store keeps activations in float16
            z_d = direct_codes(model.token_sae, doc_tokens).astype(np.float16).astype(np.float32)
            c_d = direct_codes(model.cls_sae, tokens.arrays["pooled"][row:row + 1])[0].astype(np.float16)
            cls_part = 0.5 * float(c_q @ c_d.astype(np.float32))
            cls_parts.append(cls_part)
            expected = (z_q @ z_d.T).max(1).sum() + cls_part
            assert ssr[(qid, docid)] == pytest.approx(expected, abs=2e-6, rel=1e-4)
            # ... which is the model's one score (training's), on the same codes
            doc_codes = model.token_sae.encode(torch.as_tensor(np.asarray(doc_tokens, dtype=np.float32)))
            doc_cls = torch.as_tensor(c_d.astype(np.float32))[None]
            query_side = (tuple(c[None] for c in model.token_sae.encode(torch.as_tensor(query_tokens))),
                          torch.as_tensor(c_q)[None])
            doc_side = ((doc_codes[0][None], doc_codes[1].half().float()[None]), doc_cls)
            with torch.no_grad():
                defined, _ = model.score(query_side, doc_side, 0.5)
                heavy, token_part = model.score(query_side, doc_side, 1e4)  # the [CLS] term made visible
            assert ssr[(qid, docid)] == pytest.approx(float(defined[0, 0]), abs=2e-6, rel=1e-4)
            assert float(heavy[0, 0] - token_part[0, 0]) == pytest.approx(2e4 * cls_part, rel=1e-3, abs=1e-6)
            dense = (query_tokens @ np.asarray(doc_tokens, dtype=np.float32).T).max(1).sum()
            assert maxsim[(qid, docid)] == pytest.approx(dense, abs=2e-6, rel=1e-4)
    assert max(cls_parts) > 0  # the [CLS] codes overlap somewhere: a score without that term would differ
    # the re-ranker's two kernels (compiled where numba runs, numpy otherwise) give the same bits
    from lsr_pyserini.rerankers import build_reranker

    reranker = build_reranker("ssr", str(pipeline / "codes"), {"cls_weight": 0.5})
    for query, qid in zip(reranker.encode_queries([texts[q] for q in run]), run):
        docs = [d for d, _ in run[qid]]
        assert np.array_equal(reranker.score_encoded(query, docs), reranker.score_encoded(query, docs, compiled=False))


def test_refusals(pipeline, first_stage, tiny_encoder_only, tmp_path):
    # K > h
    result = run_tool("ssr", "fit", "--tokens", pipeline / "tokens", "--output", tmp_path / "m", "--latents", "8",
                      "--k", "16")
    assert result.returncode == 2 and error_lines(result) == [
        "error: SAE k=16 exceeds its number of latents h=8: K must be at most h"]
    assert not (tmp_path / "m").exists()
    # an SAE whose input size is not the backbone's: a token store from a 48-dimensional backbone
    from transformers import BertConfig, BertModel

    other = tmp_path / "bert48"
    shutil.copytree(tiny_encoder_only, other)
    config = BertConfig.from_pretrained(other)
    config.hidden_size, config.intermediate_size = 48, 96
    BertModel(config).save_pretrained(other)
    in_process("ssr", "embed", "--model", other, "--input", SAMPLE / "corpus.jsonl", "--output", tmp_path / "tok48",
               "--max-length", "32", "--quiet")
    result = run_tool("ssr", "index", "--model", pipeline / "model", "--tokens", tmp_path / "tok48", "--output",
                      tmp_path / "v", "--codes", tmp_path / "c")
    assert result.returncode == 2 and len(error_lines(result)) == 1
    assert "SAE input size 32 does not match the token store" in error_lines(result)[0]
    assert not (tmp_path / "c").exists()
    broken = tmp_path / "model48"  # a folder as written before (its own ssr_config.json) recording another backbone
    write_old_style(pipeline / "model", broken, backbone={"model": str(other), "dim": 48})
    with pytest.raises(InputError) as refused:
        in_process("encode", "queries", "--encoder", "ssr", "--model", broken, "--input",
                   SAMPLE / "queries.test.tsv", "--output", tmp_path / "q.tsv")
    assert str(refused.value) == f"token SAE input size 32 does not match the backbone's embedding size 48 ({other})"
    assert not (tmp_path / "q.tsv").exists()
    # a code store missing a candidate document
    run = tmp_path / "run.txt"
    run.write_text(first_stage.read_text() + "q1 Q0 nowhere 99 0.1 x\n")
    result = run_tool("rerank", "--reranker", "ssr", "--run", run, "--queries", SAMPLE / "queries.test.tsv",
                      "--store", pipeline / "codes", "--output", tmp_path / "out.txt")
    assert result.returncode == 2 and len(error_lines(result)) == 1
    assert "document 'nowhere' is not in the store" in error_lines(result)[0]
    assert not (tmp_path / "out.txt").exists()
    # the wrong kind of store
    with pytest.raises(InputError, match="a 'tokens' store, not an SSR codes store"):
        in_process("rerank", "--reranker", "ssr", "--run", first_stage, "--queries", SAMPLE / "queries.test.tsv",
                   "--store", pipeline / "tokens", "--output", tmp_path / "out.txt")


def test_preset_without_model_and_help(capsys):
    with pytest.raises(InputError, match="no SSR model folder"):
        in_process("encode", "queries", "--encoder", "ssr", "--input", SAMPLE / "queries.test.tsv",
                   "--output", "/nonexistent/q.tsv")
    for command in ("embed", "fit", "index"):
        with pytest.raises(SystemExit) as exited:
            in_process("ssr", command, "--help")
        assert exited.value.code == 0 and "--" in capsys.readouterr().out


def test_training_score_is_the_code_late_interaction():
    from lsr_pyserini.models.ssr.training import late_interaction

    rng = np.random.default_rng(2)
    latents, k = 20, 3
    q_index = torch.as_tensor(rng.integers(0, latents, (2, 4, k)))
    q_value = torch.as_tensor(rng.random((2, 4, k)), dtype=torch.float32)
    q_value[1, 3] = 0  # a padded query token
    d_index = torch.as_tensor(rng.integers(0, latents, (3, 5, k)))
    d_value = torch.as_tensor(rng.random((3, 5, k)), dtype=torch.float32)
    dense = lambda i, v: torch.zeros(*i.shape[:-1], latents).scatter_add(-1, i, v)
    z_q, z_d = dense(q_index, q_value), dense(d_index, d_value)
    expected = torch.stack([torch.stack([(z_q[b] @ z_d[d].T).amax(1).sum() for d in range(3)]) for b in range(2)])
    assert torch.allclose(late_interaction((q_index, q_value), (d_index, d_value), latents), expected, atol=1e-5)


def test_distillation_teacher_is_the_dense_maxsim_of_kept_tokens():
    from lsr_pyserini.models.ssr.training import dense_maxsim

    rng = np.random.default_rng(3)
    queries, documents = torch.as_tensor(rng.normal(size=(2, 4, 6)), dtype=torch.float32), \
        torch.as_tensor(rng.normal(size=(3, 5, 6)), dtype=torch.float32)
    query_keep, doc_keep = torch.ones(2, 4, dtype=torch.bool), torch.ones(3, 5, dtype=torch.bool)
    query_keep[1, 2:] = False
    doc_keep[0, 1:] = False
    doc_keep[2] = False  # a document without ordinary tokens scores 0
    expected = torch.zeros(2, 3)
    for b in range(2):
        for d in range(2):
            q, t = queries[b][query_keep[b]], documents[d][doc_keep[d]]
            expected[b, d] = (q @ t.T).amax(1).sum()
    assert torch.allclose(dense_maxsim(queries, query_keep, documents, doc_keep), expected, atol=1e-5)


def test_supervised_fine_tuning_writes_a_usable_model(pipeline, first_stage, tmp_path):
    from lsr_pyserini.models.ssr.sae import SSRModel

    in_process("train", "ssr", "--base", pipeline / "model", "--queries", SAMPLE / "queries.test.tsv", "--qrels",
               SAMPLE / "qrels.test.trec", "--corpus", SAMPLE / "corpus.jsonl", "--negatives", first_stage, "--output",
               tmp_path / "ft", "--batch-size", "2", "--max-steps", "2", "--lr", "1e-2", "--quiet")
    # documents' embeddings read from the token store instead of the backbone: the same path otherwise
    in_process("train", "ssr", "--base", pipeline / "model", "--tokens", pipeline / "tokens", "--queries",
               SAMPLE / "queries.test.tsv", "--qrels", SAMPLE / "qrels.test.trec", "--corpus", SAMPLE / "corpus.jsonl",
               "--negatives", first_stage, "--output", tmp_path / "ft-stored", "--batch-size", "2", "--max-steps", "1",
               "--distill-weight", "1", "--quiet")
    stored = SSRModel.load(str(tmp_path / "ft-stored")).training["supervised"]
    assert stored["tokens"] == str(pipeline / "tokens") and stored["distill_weight"] == 1
    assert "kl" in json.loads((tmp_path / "ft-stored" / "lsr_training.json").read_text())["final"]
    before, after = SSRModel.load(str(pipeline / "model")), SSRModel.load(str(tmp_path / "ft"))
    assert not torch.equal(before.token_sae.W_enc, after.token_sae.W_enc)
    assert torch.allclose(after.token_sae.W_dec.norm(dim=0), torch.ones(after.token_sae.latents), atol=1e-5)
    assert after.backbone == before.backbone and "supervised" in after.training
    with pytest.raises(InputError, match="--base must be an SSR model folder"):
        in_process("train", "ssr", "--queries", SAMPLE / "queries.test.tsv", "--qrels", SAMPLE / "qrels.test.trec",
                   "--corpus", SAMPLE / "corpus.jsonl", "--negatives", first_stage, "--output", tmp_path / "x")


# The flags of `ssr embed`, `ssr fit`, `ssr index` and `train ssr`, each at a non-default value and checked by
# its effect (tests/audit_defaults.py): the commands run in this process, a recorder wrapped around the part
# that does the work, where one is needed, says what it was given.

def recorded_threads() -> int:
    """A thread count other than the one the test runs at: `--threads` ignored would leave torch's own."""
    return torch.get_num_threads() + 1


def test_ssr_embed_pooling_projection_batch_size_threads_and_overwrite(tiny_encoder_only, tmp_path, monkeypatch):
    from safetensors.torch import load_file, save_file

    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.core.readers import read_corpus
    from lsr_pyserini.models.ssr.backbone import TokenEncoder
    from lsr_pyserini.stores.tokens import TokenRows

    colbert = tmp_path / "colbert"  # the tiny BERT with a ColBERT projection 32 -> 16 in its weights
    shutil.copytree(tiny_encoder_only, colbert)
    weights = load_file(str(colbert / "model.safetensors"))
    weights["linear.weight"] = torch.randn(16, 32, generator=torch.Generator().manual_seed(0))
    save_file(weights, str(colbert / "model.safetensors"), metadata={"format": "pt"})
    batches = []  # (texts, torch threads) of each forward pass
    encode = TokenEncoder.encode

    def recording(self, texts, side):
        batches.append((len(texts), torch.get_num_threads()))
        return encode(self, texts, side)

    monkeypatch.setattr(TokenEncoder, "encode", recording)
    corpus = SAMPLE / "corpus.jsonl"
    default_into = lambda output: ["ssr", "embed", "--model", colbert, "--input", corpus, "--output", output,
                                   "--max-length", "32", "--quiet"]
    projected = default_into(tmp_path / "projected")
    in_process(*projected)
    store = TokenRows(str(tmp_path / "projected"), "tokens")
    assert store.manifest["backbone"]["projection"] and store.arrays["tokens"].shape[1] == 16
    assert [size for size, _ in batches] == [12]  # one batch of the 12 documents (default 32 texts)
    threads = recorded_threads()
    batches.clear()
    in_process("ssr", "embed", "--model", colbert, "--input", corpus, "--output", tmp_path / "plain", "--max-length",
               "32", "--no-projection", "--pooling", "mean", "--batch-size", "5", "--threads", threads, "--quiet")
    assert [size for size, _ in batches] == [5, 5, 2] and {used for _, used in batches} == {threads}
    store = TokenRows(str(tmp_path / "plain"), "tokens")
    assert not store.manifest["backbone"]["projection"] and store.manifest["backbone"]["pooling"] == "mean"
    assert store.arrays["tokens"].shape[1] == 32  # the hidden states, not projected
    texts = {doc.id: doc.text for doc in read_corpus(str(corpus))}
    for pooling in ("mean", "cls"):
        direct = TokenEncoder(str(colbert), max_length=32, pooling=pooling, projection=False)
        for docid, text in texts.items():
            pooled = direct.encode([text], "documents")[0][0]
            close = np.allclose(store.document_rows([docid], "pooled")[0].astype(np.float32), pooled, atol=2e-3)
            assert close == (pooling == "mean"), (pooling, docid)  # the mean of the tokens, not [CLS]
    # a complete store with these settings: nothing to do, unless --overwrite says to embed again
    batches.clear()
    in_process(*projected)
    assert batches == []
    in_process(*projected, "--overwrite")
    assert [size for size, _ in batches] == [12]
    # another store's settings are refused without --overwrite, replaced with it
    with pytest.raises(InputError, match="already exists: pass --overwrite to replace it"):
        in_process(*default_into(tmp_path / "plain"))
    release_outputs()
    in_process(*default_into(tmp_path / "plain"), "--overwrite")
    assert TokenRows(str(tmp_path / "plain"), "tokens").arrays["tokens"].shape[1] == 16


def test_ssr_fit_seed_aux_loss_threads_and_overwrite(pipeline, tmp_path, monkeypatch):
    import lsr_pyserini.commands.ssr as command
    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.models.ssr.sae import SAEFit, SSRModel

    fits = []  # (aux_k, aux_weight, torch threads, dead latents at the last step) of each SAE trained

    class Recording(SAEFit):
        def loss(self, x, step=None):
            loss, logs = super().loss(x, step)
            self.last = (self.aux_k, self.aux_weight, torch.get_num_threads(), logs["dead"])
            return loss, logs

        def after_update(self):
            super().after_update()
            if not fits or fits[-1] is not self:
                fits.append(self)

    monkeypatch.setattr(command, "SAEFit", Recording)
    # latents die after one input without firing: the auxiliary loss, over many dead latents, shapes the training
    base = [*FIT, "--latents", "256", "--k", "4", "--dead-after", "1"]

    def fit(output, *flags):
        fits.clear()
        in_process("ssr", "fit", "--tokens", pipeline / "tokens", "--output", output, *base, *flags)
        return SSRModel.load(str(output)).token_sae.W_enc.detach().clone(), [f.last for f in fits]

    default, recorded = fit(tmp_path / "default")
    assert [r[:2] for r in recorded] == [(256, 1 / 32)] * 2 and min(r[3] for r in recorded) > 8
    threads = recorded_threads()
    seeded, recorded = fit(tmp_path / "seeded", "--seed", "7", "--threads", threads)
    assert {r[2] for r in recorded} == {threads} and not torch.equal(seeded, default)
    small_aux, recorded = fit(tmp_path / "aux-k", "--aux-k", "2")
    assert [r[0] for r in recorded] == [2, 2] and not torch.equal(small_aux, default)
    heavy_aux, recorded = fit(tmp_path / "aux-weight", "--aux-weight", "0.5")
    assert [r[1] for r in recorded] == [0.5, 0.5] and not torch.equal(heavy_aux, default)
    # an SSR model folder is replaced only with --overwrite: then it holds the seed-7 model
    with pytest.raises(InputError, match="already exists: pass --overwrite"):
        fit(tmp_path / "default", "--seed", "7", "--threads", threads)
    release_outputs()
    replaced, _ = fit(tmp_path / "default", "--seed", "7", "--threads", threads, "--overwrite")
    assert torch.equal(replaced, seeded)


def test_ssr_index_impact_scale_shard_size_threads_and_overwrite(pipeline, tmp_path, monkeypatch):
    import lsr_pyserini.commands.ssr as command
    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.core.writer import to_impacts
    from lsr_pyserini.models.ssr.codes import codes, document_terms
    from lsr_pyserini.models.ssr.sae import SSRModel
    from lsr_pyserini.stores.tokens import TokenRows
    from lsr_pyserini.stores.vectors import read_vectors

    coded_at = []  # torch threads of each coding call

    def recording(sae, rows, k=None):
        coded_at.append(torch.get_num_threads())
        return codes(sae, rows, k)

    monkeypatch.setattr(command, "codes", recording)
    threads = recorded_threads()
    index = ["ssr", "index", "--model", pipeline / "model", "--tokens", pipeline / "tokens", "--output",
             tmp_path / "vectors", "--codes", tmp_path / "codes", "--quiet"]
    in_process(*index, "--impact-scale", "7", "--shard-size", "5", "--threads", threads)
    assert coded_at and set(coded_at) == {threads}
    assert sorted(p.name for p in (tmp_path / "vectors").glob("*.jsonl")) == [
        "part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]  # 12 documents, 5 a shard
    model, tokens = SSRModel.load(str(pipeline / "model")), TokenRows(str(pipeline / "tokens"), "tokens")
    vectors = dict(read_vectors(tmp_path / "vectors"))
    assert set(vectors) == set(tokens.docids) and sum(map(len, vectors.values())) > 0
    for docid, vector in vectors.items():
        row = tokens.row[docid]
        weights = document_terms(model, codes(model.token_sae, tokens.arrays["tokens"][tokens.offsets[row]:
                                                                                        tokens.offsets[row + 1]]),
                                 codes(model.cls_sae, tokens.arrays["pooled"][row:row + 1]))
        assert vector == to_impacts(weights, 7)  # not the model's 100
    # the shards and code store of an earlier run are replaced only with --overwrite
    with pytest.raises(InputError, match="pass --overwrite"):
        in_process(*index)
    release_outputs()
    in_process(*index, "--overwrite")
    assert dict(read_vectors(tmp_path / "vectors")) == dict(read_vectors(pipeline / "vectors"))
    assert [p.name for p in (tmp_path / "vectors").glob("*.jsonl")] == ["part-00000.jsonl"]


def test_train_ssr_reconstruction_weight_score_scale_and_cls_weight_shape_the_loss(pipeline, tmp_path, monkeypatch):
    import importlib

    from lsr_pyserini.core.outputs import release_outputs
    from lsr_pyserini.models.base import Batch
    from lsr_pyserini.models.losses import contrastive_loss
    from lsr_pyserini.models.ssr.sae import late_interaction

    command = importlib.import_module("lsr_pyserini.train.__main__")
    built = []
    monkeypatch.setattr(command, "train", lambda model, *args, **kwargs: built.append(model) or
                        {"steps": 0, "seconds": 0})  # the model the flags built, not trained
    negatives = tmp_path / "negatives.txt"
    negatives.write_text("".join(f"q{q} Q0 s{d} {d} {20 - d} first\n" for q in range(1, 8) for d in range(1, 13)))
    try:
        in_process("train", "ssr", "--base", pipeline / "model", "--queries", SAMPLE / "queries.test.tsv", "--qrels",
                   SAMPLE / "qrels.test.trec", "--corpus", SAMPLE / "corpus.jsonl", "--negatives", negatives,
                   "--output", tmp_path / "ft", "--reconstruction-weight", "0.25", "--score-scale", "3",
                   "--train-cls-weight", "10000", "--quiet")
    finally:
        release_outputs()
    family, = built
    assert family.ssr.settings["cls_weight"] == 1.0  # the model's: 10000 is the training's own
    batch = Batch(["vitamin d and bone fractures", "vaccines and immune memory"],
                  ["vitamin d helps absorb calcium", "statins block an enzyme", "vaccines train memory cells",
                   "an inverted index maps terms"], 2, document_ids=["s1", "s2", "s3", "s4"])
    with torch.no_grad():
        loss, logs = family.loss(batch, 0)
        (query_codes, query_cls, _, _), (doc_codes, doc_cls, _, _) = (
            family.side(batch.queries, "queries"), family.side(batch.documents, "documents", batch.document_ids))
        tokens = late_interaction(query_codes, doc_codes, family.token_sae.latents)
        cls = query_cls @ doc_cls.T
    # the tiny [CLS] SAE's codes barely overlap (about 1e-5): a weight of 10000 makes their term count
    assert float(10000 * cls.abs().max()) > 0.05 and logs["nmse"] > 0.05
    ranking = {(scale, weight): float(contrastive_loss(scale * (tokens + weight * cls), 2))
               for scale in (1, 3) for weight in (1, 10000)}
    assert logs["rank"] == pytest.approx(ranking[(3, 10000)], rel=1e-5)  # score_scale 3, [CLS] weight 10000
    assert all(abs(ranking[(3, 10000)] - other) > 1e-3 for key, other in ranking.items() if key != (3, 10000))
    assert float(loss) == pytest.approx(logs["rank"] + 0.25 * logs["nmse"], rel=1e-5)  # not + 1 x nmse
