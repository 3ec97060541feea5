"""`--quantize int8`: the int8 projection filter is exact where it must be, encoders record the
quantisation, a resumed run cannot mix float32 and int8 shards, a family without int8 is refused,
and a dense store built in int8 says so (and its queries are encoded the same way).
Tiny random models (seconds, every random tensor seeded), and the real SPLADE-tiny's int8 impacts
against its float32 ones; the SciFact figures are in docs/quantization.md."""
import json

import numpy as np
import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.kernels.int8 import Int8Projection, quantize_linears
from lsr_pyserini.core.writer import to_impacts


def test_int8_projection_filter_is_exact_above_the_threshold():
    generator = torch.Generator().manual_seed(0)
    weight = torch.randn(5000, 48, generator=generator) * 0.1  # two slices
    bias = torch.randn(5000, generator=generator) - 12.0
    rows = torch.randn(30, 48, generator=generator) * 3.0
    rows[:, 7] *= 8  # an outlier dimension, as transformers have
    projection = Int8Projection(weight, bias)
    exact = (rows @ weight.T).amax(0) + bias
    approx, bound = projection.approximate_max(rows)
    assert not torch.allclose(approx + bias, exact, atol=1e-6)  # int8 really ran: it is not float32
    assert bool(((approx + bias - exact).abs() <= bound).all())  # and within the proven bound
    terms, best = projection.max_logits(rows)
    assert set(torch.nonzero(exact > 0).flatten().tolist()) <= set(terms.tolist())
    torch.testing.assert_close(best, exact[terms], rtol=1e-5, atol=1e-5)
    assert len(terms) < len(exact) / 2  # a filter: most terms are never projected in float32
    top_terms, top_best = projection.top_max_logits(rows, 64)
    assert top_terms.tolist() == torch.topk(exact, 64).indices.tolist()
    torch.testing.assert_close(top_best, torch.topk(exact, 64).values, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("pooling", ["max", "sum"])
def test_splade_int8_impacts_equal_float32(tiny_mlm, pooling):
    from lsr_pyserini.encoders import build_encoder

    texts = [line for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()][:8]
    settings = {"family": "splade", "model": str(tiny_mlm), "pooling": pooling, "doc_max_length": 64}
    plain, int8 = build_encoder(settings), build_encoder({**settings, "quantize": "int8"})
    pairs = equal = 0
    for a, b in zip(plain.encode_documents(texts), int8.encode_documents(texts)):
        a, b = to_impacts(a, 100), to_impacts(b, 100)
        pairs += len(a.keys() | b.keys())
        equal += sum(a.get(t) == b.get(t) for t in a.keys() | b.keys())
    assert pairs > 1000 and equal == pairs  # docs/quantization.md: 100% (1,688 and 1,690 pairs here)
    assert int8.describe()["quantize"] == "int8" and "quantize" not in plain.describe()


def test_encode_records_int8_and_refuses_to_mix(tiny_preset, tmp_path):
    out = tmp_path / "vectors"
    args = ["corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl", "--output", out, "--quiet"]
    run_tool("encode", *args, "--quantize", "int8", check=True)
    manifest = json.loads(out.with_name("vectors.manifest.json").read_text())
    assert manifest["settings"]["encoder"]["quantize"] == "int8"
    assert manifest["settings"]["encoder"]["quantize_backend"].startswith("torch-")
    mixed = run_tool("encode", *args)  # float32 into int8 shards: refused, naming the difference
    assert mixed.returncode == 2 and "other settings (encoder differs)" in error_lines(mixed)[0]
    queries = run_tool("encode", "queries", "--encoder", tiny_preset, "--input", SAMPLE / "queries.test.tsv",
                       "--output", tmp_path / "q.tsv", "--quantize", "int8", "--quiet")
    assert queries.returncode == 0, queries.stderr


def test_a_family_without_int8_is_refused(tmp_path):
    result = run_tool("encode", "corpus", "--encoder", "promptreps-llama3-8b-instruct", "--input",
                      SAMPLE / "corpus.jsonl", "--output", tmp_path / "v", "--quantize", "int8")
    assert result.returncode == 2
    assert "--quantize" in error_lines(result)[0] and "promptreps" in error_lines(result)[0]


def test_quantize_linears_replaces_every_linear():
    torch.manual_seed(0)  # the Linear layers' initial weights and the input
    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 4))
    x = torch.randn(8, 16)
    before = model(x)
    quantize_linears(model)
    assert not any(isinstance(m, torch.nn.Linear) and type(m) is torch.nn.Linear for m in model.modules())
    after = model(x)
    assert not torch.equal(before, after) and torch.allclose(before, after, atol=0.1)


def test_int8_dense_store_is_flagged_and_rebuilds_int8_queries(tiny_encoder_only, tmp_path):
    from lsr_pyserini.models.dense.encoder import build_dense_encoder
    from lsr_pyserini.stores.dense import DenseStore

    stores = {}
    for mode in ("none", "int8"):
        stores[mode] = tmp_path / f"store.{mode}"
        run_tool("encode", "dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl", "--output",
                 stores[mode], "--pooling", "mean", "--normalize", "--quantize", mode, check=True)
    plain, int8 = DenseStore(str(stores["none"])), DenseStore(str(stores["int8"]))
    assert int8.manifest["encoder"]["quantize"] == "int8" and "quantize" not in plain.manifest["encoder"]
    cosines = (plain.vectors * int8.vectors).sum(1)
    assert cosines.min() > 0.98 and not np.array_equal(plain.vectors, int8.vectors)
    encoder = build_dense_encoder(int8.encoder_settings)  # what `rerank --reranker dense` does
    assert encoder.quantize == "int8"


def test_an_index_of_int8_shards_is_flagged_in_its_record(tmp_path):
    from lsr_pyserini.engines.lucene.command import record_encoding

    shards, index = tmp_path / "vectors", tmp_path / "index"
    shards.mkdir()
    index.mkdir()
    encoder = {"family": "splade", "quantize": "int8", "quantize_backend": "torch-2.13.0-x86"}
    shards.with_name("vectors.manifest.json").write_text(json.dumps({"settings": {"encoder": encoder}, "shards": {}}))
    (tmp_path / "index.lsr.json").write_text(json.dumps({"kind": "impact"}))  # an earlier index's, beside it
    record_encoding(["--collection", "JsonVectorCollection", "--input", str(shards), "--index", "x"], index, index)
    record = json.loads((index / "lsr_index.json").read_text())
    assert record["quantize"] == "int8" and record["quantize_backend"] == "torch-2.13.0-x86"
    assert record["shards_manifest_relative"] == "../vectors.manifest.json"
    assert not (tmp_path / "index.lsr.json").exists()  # the stale record beside it is gone
    record_encoding(["--input", str(tmp_path / "plain-documents"), "--index", "x"], index, index)  # not our shards
    assert json.loads((index / "lsr_index.json").read_text()) == {"kind": "bm25"}


def test_sparseembed_int8_selects_the_float32_top_k(tiny_mlm):
    from lsr_pyserini.models.sparseembed.encoder import SparseEmbedModel

    torch.manual_seed(0)  # the fresh heads' initial weights
    model = SparseEmbedModel(str(tiny_mlm), dim=16).eval()
    texts = [line for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()][:4]
    with torch.no_grad():
        weights, ids, active, context = model.select(texts, 32, 24)
        model.int8 = Int8Projection(model._head_weight().detach(), model._head_bias().detach())
        weights8, ids8, active8, context8 = model.select(texts, 32, 24)
    assert ids8.shape == ids.shape
    for row in range(len(texts)):  # the same terms (ties aside) with the same weights
        assert set(ids8[row].tolist()) == set(ids[row].tolist())
    torch.testing.assert_close(weights8.sort(1).values, weights.sort(1).values)


@pytest.mark.slow
def test_real_splade_tiny_int8_impacts_equal_float32(shared_data):
    """docs/quantization.md's 100%: the real SPLADE-tiny (`splade-tiny`) with `quantize: int8` against
    float32, on the 12 sample documents and the first 8 SciFact documents (7 truncated at 256 tokens)
    in length-ordered batches of 32 as `encode corpus` runs them, and the 300 SciFact test queries:
    in batches of 32 (the int8 filter on any CPU) and the first 50 one at a time (as `encode queries`
    runs them: the int8 filter where the CPU has int8 dot products, else the float32 packed
    projection). Integer impacts equal on every (text, term) pair of either side. The float weights
    were bit-identical too on an AMD EPYC Zen 3 (family 25, AVX2, no VNNI); asserted to 1e-6, as the
    float32 rescoring multiplies other row sets than float32's slices (summation order)."""
    import gzip
    import itertools

    from lsr_pyserini.api import QueryEncoder
    from lsr_pyserini.core.length_order import encode_in_length_order
    from lsr_pyserini.encoders.query import encoder_settings
    from lsr_pyserini.core.readers import document_text
    from lsr_pyserini.encoders import build_encoder

    documents = [json.loads(line) for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()]
    with gzip.open(shared_data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as lines:
        documents += [json.loads(line) for line in itertools.islice(lines, 8)]
    texts = [document_text(document) for document in documents]
    queries = [line.split("\t", 1)[1] for line in
               (shared_data / "scifact" / "queries.test.tsv").read_text(encoding="utf-8").splitlines()]
    settings = encoder_settings("splade-tiny")
    plain, int8 = build_encoder(settings), build_encoder({**settings, "quantize": "int8"})
    assert int8.describe()["quantize"] == "int8" and int8.model._int8 is not None

    def compared(a_vectors, b_vectors) -> int:
        pairs = 0
        for row, (a, b) in enumerate(zip(a_vectors, b_vectors, strict=True)):
            assert a.keys() == b.keys(), row
            assert all(abs(a[term] - b[term]) <= 1e-6 for term in a), row
            impacts, impacts8 = to_impacts(a, 100), to_impacts(b, 100)
            pairs += len(impacts.keys() | impacts8.keys())
            assert impacts == impacts8, row
        return pairs

    batch = settings["batch_size"]
    document_pairs = compared(encode_in_length_order(plain.encode_documents, texts, batch),
                              encode_in_length_order(int8.encode_documents, texts, batch))
    query_pairs = compared(encode_in_length_order(plain.encode_queries, queries, batch),
                           encode_in_length_order(int8.encode_queries, queries, batch))
    single = compared(QueryEncoder("splade-tiny").encode_floats(queries[:50]),
                      QueryEncoder("splade-tiny", quantize="int8").encode_floats(queries[:50]))
    # measured on Zen 3: 2,970 document pairs, 15,680 query pairs, 2,111 single-query pairs
    assert document_pairs > 2_900 and query_pairs > 15_000 and single > 2_000
