"""Single-query fast paths (core/fastpath.py): the checked trace of the transformer gives the eager
forward's hidden states bit for bit, at every query length; a trace that differs, or inputs other
than the model's defaults, run eagerly; the OpenBLAS projection gives torch's maxima; the SPLADE
query path returns the eager impacts with every combination of the two switches."""
import pytest
import torch

from lsr_pyserini.core import fastpath
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.writer import quantize
from lsr_pyserini.encoders.splade import SpladeEncoder

QUERIES = ["vitamin d", "does a search engine keep an inverted index of every term in the documents",
           "", "bm25 bm25 bm25", "calcium " * 40]


def eager_impacts(model, monkeypatch, trace: str, projection: str):
    monkeypatch.setenv("LSR_PYSERINI_TRACE", trace)
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", projection)
    encoder = SpladeEncoder(str(model), query_max_length=32)
    impacts = [quantize(encoder.encode_queries([text])[0], 100) for text in QUERIES]
    return encoder, impacts


def test_every_fast_path_combination_gives_the_eager_impacts(tiny_mlm, monkeypatch):
    _, reference = eager_impacts(tiny_mlm, monkeypatch, "0", "torch")
    assert any(reference)
    for trace, projection in (("1", "torch"), ("0", "numpy"), ("1", "numpy"), ("1", "auto")):
        encoder, impacts = eager_impacts(tiny_mlm, monkeypatch, trace, projection)
        assert impacts == reference, (trace, projection)
        assert encoder._traced.enabled == (trace == "1")
        assert (encoder._blas is not None) == (projection == "numpy" or
                                               (projection == "auto" and fastpath.use_blas_projection()))
    # the trace was checked at several lengths and kept
    assert len(encoder._traced.checked) == min(fastpath.CHECKS, len({len(encoder.tokenizer(q)["input_ids"])
                                                                      for q in QUERIES}))


@pytest.mark.parametrize("dot_products", [False, True])
def test_int8_single_queries_take_the_openblas_projection_only_without_int8_dot_products(tiny_mlm, monkeypatch,
                                                                                           dot_products):
    if fastpath._blas_controller() is None:
        pytest.skip("numpy's BLAS is not OpenBLAS (or threadpoolctl is missing)")
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", "numpy")
    monkeypatch.setattr("lsr_pyserini.encoders.splade.int8_dot_products", lambda: dot_products)
    plain = SpladeEncoder(str(tiny_mlm), query_max_length=32)
    int8 = SpladeEncoder(str(tiny_mlm), query_max_length=32, quantize="int8")
    pairs = [(quantize(plain.encode_queries([text])[0], 100), quantize(int8.encode_queries([text])[0], 100))
             for text in QUERIES]
    assert (int8._blas is None) == dot_products and plain._blas is not None
    if not dot_products:  # the same code as float32's: the same impacts, exactly
        assert all(a == b for a, b in pairs)
    else:  # the int8 filter with exact rescoring: float32's impacts up to the summation order
        terms = [t for a, b in pairs for t in a.keys() | b.keys()]
        equal = sum(a.get(t) == b.get(t) for a, b in pairs for t in a.keys() | b.keys())
        assert len(terms) > 20 and equal / len(terms) >= 0.99


def test_the_trace_is_bit_identical_at_every_length_and_padded_input_stays_eager(tiny_mlm, monkeypatch):
    monkeypatch.setenv("LSR_PYSERINI_TRACE", "1")
    encoder = SpladeEncoder(str(tiny_mlm), query_max_length=64)
    traced = encoder._traced
    with torch.inference_mode():
        for length in range(1, 40):
            ids = torch.randint(5, encoder.tokenizer.vocab_size, (1, length))
            encoded = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
            assert torch.equal(traced(encoded), encoder.head_inputs(encoded))
            assert traced.enabled
        padded = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        padded["attention_mask"][0, -1] = 0
        assert not fastpath._defaults_only(padded) and torch.equal(traced(padded), encoder.head_inputs(padded))


def test_a_trace_that_differs_is_turned_off_and_the_eager_result_returned(monkeypatch):
    model = torch.nn.Linear(3, 3)
    eager = lambda encoded: model(encoded["input_ids"].float())  # noqa: E731
    wrong = fastpath.TracedForward(lambda ids: model(ids.float()) + 1e-6, eager, model)
    with torch.inference_mode():
        for length in (2, 3):
            encoded = {"input_ids": torch.ones(1, length, 3, dtype=torch.long)}
            assert torch.equal(wrong(encoded), eager(encoded))
    assert not wrong.enabled


def test_the_openblas_projection_gives_torch_maxima():
    torch.manual_seed(0)
    weight, positions = torch.randn(1000, 16), torch.randn(7, 16)
    projection = fastpath.BlasProjection(weight)
    if fastpath._blas_controller() is None:
        pytest.skip("numpy has no OpenBLAS here")
    assert torch.allclose(projection.max_logits(positions), (positions @ weight.T).amax(0), atol=1e-5)
    before = fastpath._blas_controller().get_num_threads()
    torch_threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        projection.max_logits(positions)
    finally:
        torch.set_num_threads(torch_threads)
    assert fastpath._blas_controller().get_num_threads() == before  # restored


def test_a_bad_projection_choice_is_one_line(monkeypatch):
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", "gpu")
    with pytest.raises(InputError, match="LSR_PYSERINI_PROJECTION='gpu': expected one of auto, torch, numpy"):
        fastpath.use_blas_projection()


@pytest.mark.parametrize("quantize", ["none", "int8"])
def test_dense_queries_through_the_trace_equal_the_eager_vectors(tiny_encoder_only, monkeypatch, quantize):
    import numpy as np

    from lsr_pyserini.encoders.dense import TransformerDenseEncoder

    vectors = {}
    for trace in ("0", "1"):
        monkeypatch.setenv("LSR_PYSERINI_TRACE", trace)
        encoder = TransformerDenseEncoder(str(tiny_encoder_only), pooling="mean", quantize=quantize)
        vectors[trace] = [encoder.encode_queries([text]) for text in QUERIES]
        assert encoder._traced.enabled == (trace == "1")
    assert all(np.array_equal(a, b) for a, b in zip(vectors["0"], vectors["1"]))
