"""The vectorised re-ranking kernels against direct computations on tiny random stores.

Each fast path (SSR-tok codes found by a neuron table, SparseEmbed shared-term gather, BGE-M3 sparse head) must
give the numbers of the computation it replaced bit for bit (so re-ranked runs do not change),
and agree with the obvious per-document formula."""
import numpy as np
import pytest

from lsr_pyserini.kernels.jit import lowest_bit
from lsr_pyserini.models.ssr.reranker import code_similarities, ssr_tok_scores, sum_of_max


def random_codes(rng, tokens, k, latents):
    """Top-K-like codes: K distinct neurons per token, activations descending, a few exact zeros."""
    index = np.argsort(rng.random((tokens, latents)), axis=1)[:, :k]
    index[: tokens // 3, : k // 2] = index[0, : k // 2]  # tokens sharing many neurons (sum order matters)
    index[: tokens // 3] = np.stack([np.concatenate([row[: k // 2], [n for n in np.argsort(rng.random(latents))
                                                                      if n not in row[: k // 2]][: k - k // 2]])
                                     for row in index[: tokens // 3]])
    values = -np.sort(-rng.gamma(1.0, 0.3, size=(tokens, k)), axis=1)
    values[rng.random((tokens, k)) < 0.05] = 0
    return index.astype(np.uint16), np.sort(values, axis=1)[:, ::-1].astype(np.float16)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ssr_tok_scores_equal_the_gathered_computation_bit_for_bit(seed):
    rng = np.random.default_rng(seed)
    latents, k = 64, 8
    lengths = rng.integers(0, 12, size=40)
    lengths[3] = 0  # a document without tokens
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    index, values = random_codes(rng, int(bounds[-1]), k, latents)
    query_index, query_value = random_codes(rng, 5, k, latents)
    query_index[0] = index[0]  # a query token coded like a document token: many shared neurons
    query_value = query_value.astype(np.float32)
    fast = ssr_tok_scores(query_index, query_value, index, values, bounds, latents)
    direct = sum_of_max(code_similarities(query_index, query_value, index, values, latents), bounds)
    assert fast.dtype == direct.dtype and np.array_equal(fast, direct)
    # the definition: sum over query tokens of the best document token's code dot product
    dense_query = np.zeros((len(query_index), latents))
    np.put_along_axis(dense_query, query_index.astype(np.int64), query_value, axis=1)
    for score, start, n in zip(fast, bounds[:-1], lengths):
        dense_doc = np.zeros((n, latents))
        np.put_along_axis(dense_doc, index[start:start + n].astype(np.int64), values[start:start + n], axis=1)
        expected = (dense_doc @ dense_query.T).max(0).sum() if n else 0.0
        assert score == pytest.approx(expected, rel=1e-5, abs=1e-6)
    assert (fast > 0).sum() > 20
    assert not ssr_tok_scores(query_index, np.zeros_like(query_value), index, values, bounds, latents).any()
    far = np.full_like(query_index, latents - 1)  # a neuron no document uses
    index[index == latents - 1] = 0
    assert not ssr_tok_scores(far, query_value, index, values, bounds, latents).any()


@pytest.mark.parametrize("by_mask", [False, True])
@pytest.mark.parametrize("query_tokens", [1, 7, 8, 9, 20, 70])
def test_compiled_ssr_tok_kernel_gives_the_numpy_kernels_bits_on_rows_read_in_place(query_tokens, by_mask):
    from lsr_pyserini.kernels import jit
    from lsr_pyserini.models.ssr.reranker import compiled_ssr_tok_scores

    if not jit.enabled():
        pytest.skip("numba is not installed (or LSR_PYSERINI_NUMBA=0): the numpy kernel runs")
    rng = np.random.default_rng(query_tokens)
    latents, k = 96, 8
    lengths = rng.integers(0, 15, size=60)
    lengths[[3, 17]] = 0  # documents without tokens
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    index, values = random_codes(rng, int(offsets[-1]), k, latents)
    query_index, query_value = (a[:query_tokens] for a in random_codes(rng, max(query_tokens, 3), k, latents))
    query_index[0] = index[offsets[1]]  # a query token coded like a document token: many shared neurons
    query_value = query_value.astype(np.float32)
    query_value[-1, :3] = 0  # inactive codes
    picked = rng.permutation(len(lengths))[:45]  # candidates in another order than the store's, one twice
    picked[-1] = picked[0]
    starts, ends = offsets[picked], offsets[picked + 1]
    fast = compiled_ssr_tok_scores(query_index, query_value, index, values, starts, ends, latents, by_mask)
    bounds = np.concatenate([[0], np.cumsum(ends - starts)])
    gathered = [np.concatenate([a[s:e] for s, e in zip(starts, ends)]) for a in (index, values)]
    expected = ssr_tok_scores(query_index, query_value, *gathered, bounds, latents)
    assert fast.dtype == expected.dtype and np.array_equal(fast, expected)
    assert (fast > 0).sum() > 10
    assert not compiled_ssr_tok_scores(query_index, np.zeros_like(query_value), index, values, starts, ends,
                                       latents, by_mask).any()
    for other in ((index, values.astype(np.float32)), (index.astype(np.int32), values)):  # not a code store's
        assert compiled_ssr_tok_scores(query_index, query_value, *other, starts, ends, latents) is None  # numpy then


def test_compiled_ssr_tok_kernel_never_collects_by_mask_beyond_64_codes_a_token():
    from lsr_pyserini.kernels import jit
    from lsr_pyserini.models.ssr.reranker import compiled_ssr_tok_scores

    if not jit.enabled():
        pytest.skip("numba is not installed (or LSR_PYSERINI_NUMBA=0): the numpy kernel runs")
    rng = np.random.default_rng(7)
    latents, k = 300, 80  # more codes than a 64-bit mask holds: the kernel scans them instead
    index, values = random_codes(rng, 40, k, latents)
    query_index, query_value = random_codes(rng, 5, k, latents)
    starts, ends = np.arange(0, 40, 4), np.arange(4, 44, 4)
    expected = ssr_tok_scores(query_index, query_value.astype(np.float32), index, values, np.arange(0, 44, 4), latents)
    for by_mask in (False, True):
        fast = compiled_ssr_tok_scores(query_index, query_value.astype(np.float32), index, values, starts, ends,
                                       latents, by_mask)
        assert np.array_equal(fast, expected)


@pytest.mark.parametrize("value", [1, 2, 12, 2**31, 2**63 + 2**40, 2**64 - 1])
def test_lowest_bit_is_the_position_of_the_lowest_set_bit_in_python_and_compiled(value):
    from lsr_pyserini.kernels import jit

    expected = format(value, "b")[::-1].index("1")
    assert jit.lowest_bit(value) == expected
    if jit.enabled():
        kernel = jit.compiled(_lowest_bit_kernel)
        assert kernel(np.uint64(value)) == expected


def _lowest_bit_kernel(x):
    return lowest_bit(x)


def test_compiled_kernels_switch_off_with_the_environment_variable():
    import os
    import subprocess
    import sys

    code = "from lsr_pyserini.kernels import jit; print(jit.enabled())"
    off = subprocess.run([sys.executable, "-c", code], env={**os.environ, "LSR_PYSERINI_NUMBA": "0"},
                         capture_output=True, text=True, check=True)
    assert off.stdout.strip() == "False"


def previous_sparseembed_scores(store, query_terms, query_embeddings, docids):
    """The SparseEmbed kernel before the shared-term gather (every candidate term's mask unpacked)."""
    from lsr_pyserini.stores.sparseembed import _POPCOUNT

    rows = np.fromiter((store.row[d] for d in docids), dtype=np.int64, count=len(docids))
    starts, ends = store.offsets[rows], store.offsets[rows + 1]
    lengths = ends - starts
    owner = np.repeat(np.arange(len(rows)), lengths)
    positions = np.arange(lengths.sum()) + np.repeat(starts - np.cumsum(lengths) + lengths, lengths)
    lookup = np.full(int(store.identity["vocab_size"]), -1, dtype=np.int64)
    lookup[query_terms] = np.arange(len(query_terms))
    slot = lookup[store.terms[positions]]
    hit = slot >= 0
    masks = store.masks[positions]
    counts = _POPCOUNT[masks].sum(1)
    before = np.cumsum(counts) - counts
    first = np.append(before, 0)[np.cumsum(lengths) - lengths]
    starts_of_values = np.repeat(store.value_offsets[rows] - first, lengths) + before
    vectors = store._embeddings(masks[hit], counts[hit], starts_of_values[hit])
    contributions = np.einsum("th,th->t", vectors, query_embeddings[slot[hit]])
    return np.bincount(owner[hit], weights=contributions, minlength=len(rows)).astype(np.float32)


def test_sparseembed_scores_equal_the_previous_kernel_and_the_definition(tmp_path):
    from lsr_pyserini.stores.sparseembed import SparseEmbedStore, SparseEmbedStoreWriter

    rng = np.random.default_rng(0)
    dim, vocab, docs = 12, 60, {}
    for i in range(30):
        n = int(rng.integers(0, 15)) if i else 0
        embeddings = np.maximum(rng.normal(size=(n, dim)), 0).astype(np.float16)
        docs[f"d{i}"] = (np.sort(rng.choice(vocab, n, replace=False)), embeddings)
    writer = SparseEmbedStoreWriter(str(tmp_path / "store"), {"identity": {"dim": dim, "vocab_size": vocab}})
    names = list(docs)
    writer.write_shard(0, (names[:11], [docs[d] for d in names[:11]]))
    writer.write_shard(1, (names[11:], [docs[d] for d in names[11:]]))
    writer.finish(len(docs))
    store = SparseEmbedStore(str(tmp_path / "store"))
    for query_size in (1, 20, vocab):
        terms = np.sort(rng.choice(vocab, query_size, replace=False))
        query = np.maximum(rng.normal(size=(query_size, dim)), 0).astype(np.float32)
        candidates = [names[i] for i in rng.permutation(len(names))[:20]] + [names[3]]  # one twice
        fast = store.scores(terms, query, candidates)  # compiled kernels where numba runs
        assert np.array_equal(fast, previous_sparseembed_scores(store, terms, query, candidates))
        assert np.array_equal(fast, store.scores(terms, query, candidates, compiled=False))
        assert (store._lookup == -1).all()
        for docid, score in zip(candidates, fast):
            ids, embeddings = docs[docid]
            expected = sum(float(query[j] @ embeddings[list(ids).index(t)].astype(np.float32))
                           for j, t in enumerate(terms) if t in ids)
            assert score == pytest.approx(expected, rel=1e-5, abs=1e-5)
    with open(tmp_path / "store" / "masks.bin", "r+b") as handle:  # a flipped mask bit: counts disagree
        handle.seek(3)
        byte = handle.read(1)[0]
        handle.seek(3)
        handle.write(bytes([byte ^ 1]))
    from lsr_pyserini.core.errors import InputError

    with pytest.raises(InputError, match="masks.bin does not match"):
        SparseEmbedStore(str(tmp_path / "store")).scores(terms, query, candidates)


@pytest.mark.parametrize("compiled", [True, False])
def test_sparseembed_kernels_refuse_a_term_id_beyond_the_vocabulary(tmp_path, compiled):
    """Both paths stop with the same one-line error; neither reads outside the lookup table."""
    from lsr_pyserini.kernels import jit
    from lsr_pyserini.core.errors import InputError
    from lsr_pyserini.stores.sparseembed import SparseEmbedStore, SparseEmbedStoreWriter

    if compiled and not jit.enabled():
        pytest.skip("numba is not installed (or LSR_PYSERINI_NUMBA=0): the numpy kernel runs")
    dim, vocab = 8, 40
    embeddings = np.ones((3, dim), dtype=np.float16)
    writer = SparseEmbedStoreWriter(str(tmp_path / "store"), {"identity": {"dim": dim, "vocab_size": vocab}})
    writer.write_shard(0, (["a", "b"], [(np.array([1, 5, 9]), embeddings), (np.array([2, 5, 30]), embeddings)]))
    writer.finish(2)
    with open(tmp_path / "store" / "terms.bin", "r+b") as handle:  # term 30 of "b" becomes 60,000
        handle.seek(5 * 2)
        handle.write(np.array([60000], dtype=np.uint16).tobytes())
    store = SparseEmbedStore(str(tmp_path / "store"))
    query = np.ones((1, dim), dtype=np.float32)
    assert store.scores(np.array([5]), query, ["a"], compiled=compiled).tolist() == [8.0]
    with pytest.raises(InputError, match="terms.bin: holds a term id outside"):
        store.scores(np.array([5]), query, ["a", "b"], compiled=compiled)
    assert (store._lookup == -1).all()


def test_bgem3_sparse_scores_equal_the_python_sum(tmp_path):
    from lsr_pyserini.models.bgem3.reranker import BgeM3Reranker
    from lsr_pyserini.stores.dense import DenseStore, DenseStoreWriter

    rng = np.random.default_rng(0)
    docs = {}
    for i in range(25):
        n = int(rng.integers(0, 30)) if i else 0
        docs[f"d{i}"] = (rng.choice(200, n, replace=False).astype(np.int32), rng.gamma(1.0, 0.5, n).astype(np.float32))
    writer = DenseStoreWriter(str(tmp_path / "store"), {"encoder": {"family": "bgem3"}})
    writer.write_shard(0, (list(docs), [(rng.normal(size=4).astype(np.float32),
                                          {"sparse_ids": ids, "sparse_weights": weights})
                                         for ids, weights in docs.values()]))
    writer.finish(len(docs))

    class Scorer(BgeM3Reranker):
        def __init__(self):
            self.store = DenseStore(str(tmp_path / "store"))

    candidates = [f"d{i}" for i in rng.permutation(len(docs))] + ["d4"]  # one twice
    shared = {int(t): float(w) for t, w in zip(rng.choice(200, 40, replace=False),
                                               rng.gamma(1.0, 0.5, 40).astype(np.float32))}
    for query in ({}, shared, {**shared, 500: 1.0}, {7: 0.5}):  # an id beyond every document's
        fast = Scorer()._sparse(query, candidates)  # the compiled kernel where numba runs
        python = [sum(query.get(int(i), 0.0) * float(w) for i, w in zip(*docs[d])) for d in candidates]
        assert fast.tolist() == python
        assert Scorer()._sparse(query, candidates, compiled=False).tolist() == python
    from lsr_pyserini.kernels import jit

    assert (Scorer()._compiled_sparse(shared, candidates) is None) == (not jit.enabled())
