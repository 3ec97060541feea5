"""Single-query fast paths (core/fastpath.py): the checked trace of the transformer gives the eager
forward's hidden states bit for bit, at every query length; a trace that differs, or inputs other
than the model's defaults, run eagerly; the packed projection gives the eager maxima bit for bit or
turns itself off; the SPLADE query path returns the eager impacts with every combination of the two
switches."""
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
    for trace, projection in (("1", "torch"), ("0", "auto"), ("1", "auto")):
        encoder, impacts = eager_impacts(tiny_mlm, monkeypatch, trace, projection)
        assert impacts == reference, (trace, projection)
        assert encoder._traced.enabled == (trace == "1")
        assert (encoder._packed is not None) == (projection == "auto" and fastpath.use_packed_projection())
    # the trace was checked at several lengths and kept
    assert len(encoder._traced.checked) == min(fastpath.CHECKS, len({len(encoder.tokenizer(q)["input_ids"])
                                                                      for q in QUERIES}))


@pytest.mark.parametrize("dot_products", [False, True])
def test_int8_single_queries_take_the_packed_projection_only_without_int8_dot_products(tiny_mlm, monkeypatch,
                                                                                        dot_products):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", "auto")
    monkeypatch.setattr("lsr_pyserini.encoders.splade.int8_dot_products", lambda: dot_products)
    plain = SpladeEncoder(str(tiny_mlm), query_max_length=32)
    int8 = SpladeEncoder(str(tiny_mlm), query_max_length=32, quantize="int8")
    pairs = [(quantize(plain.encode_queries([text])[0], 100), quantize(int8.encode_queries([text])[0], 100))
             for text in QUERIES]
    assert (int8._packed is None) == dot_products and plain._packed is not None
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


def test_the_packed_projection_gives_the_eager_maxima_bit_for_bit():
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    torch.manual_seed(0)
    weight = torch.randn(1000, 16)
    eager = lambda positions: torch.cat([(positions @ part.T).amax(0) for part in weight.split(300)])  # noqa: E731
    projection = fastpath.PackedProjection(weight, eager)
    for length in (2, 3, 7, 20, 33, 64, 2, 20, 64):
        positions = torch.randn(length, 16)
        assert torch.allclose(projection.logits(positions), positions @ weight.T, atol=1e-5)
        assert torch.equal(projection(positions), eager(positions)), length
        assert (length, torch.get_num_threads()) in projection.verdicts
    assert len(projection.verdicts) == 6
    # where the packed product gives other bits, that length keeps the eager maxima
    positions = torch.randn(5, 16)
    projection.verdicts[(5, torch.get_num_threads())] = False
    assert torch.equal(projection(positions), eager(positions))
    # where it gave the same bits, the packed product answers from then on
    projection.verdicts[(5, torch.get_num_threads())] = True
    projection.logits = lambda positions: torch.zeros(len(positions), 1000)
    assert torch.equal(projection(positions), torch.zeros(1000))


def test_a_packed_projection_that_always_differs_is_dropped_after_the_checks():
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    weight = torch.randn(100, 8)
    wrong = lambda positions: (positions @ weight.T).amax(0) + 1e-6  # noqa: E731
    projection = fastpath.PackedProjection(weight, wrong)
    for length in range(4, 4 + fastpath.CHECKS + 2):
        positions = torch.randn(length, 8)
        assert torch.equal(projection(positions), wrong(positions))
    assert not any(projection.verdicts.values()) and len(projection.verdicts) == fastpath.CHECKS
    assert projection.packed is None


def test_a_torch_without_the_onednn_operators_keeps_the_eager_projection(monkeypatch):
    def missing(*_):
        raise RuntimeError("no such operator")

    monkeypatch.setattr(torch.ops.mkldnn, "_reorder_linear_weight", missing)
    weight = torch.randn(100, 8)
    eager = lambda positions: (positions @ weight.T).amax(0)  # noqa: E731
    projection = fastpath.PackedProjection(weight, eager)
    positions = torch.randn(6, 8)
    assert projection.packed is None and torch.equal(projection(positions), eager(positions))
    assert projection.verdicts == {}


def test_a_bad_projection_choice_is_one_line(monkeypatch):
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", "gpu")
    with pytest.raises(InputError, match="LSR_PYSERINI_PROJECTION='gpu': expected one of auto, torch"):
        fastpath.use_packed_projection()


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
