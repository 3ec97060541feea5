"""SSR exact re-ranking from a code store, and the dense MaxSim it approximates from a token store.

    ssr     SSR-tok = sum over query tokens i of max over document tokens t of z_q,i . z_d,t
            SSR-CLS = SSR-tok + cls_weight x z_q,CLS . z_d,CLS  (--cls-weight; 0 gives SSR-tok;
            default: the model's cls_weight). Document codes come from the code store written by
            `python -m lsr_pyserini.ssr index`; only queries are coded at query time. This is
            `SSRModel.score` (sae.py, the score training takes the gradient of) computed from the
            store's sparse rows: `ssr_tok_scores` and its compiled kernel are its fast paths, tested
            equal to it (tests/models/test_ssr.py) and bit-identical to each other (tests/models/test_rerank_fast.py).
    maxsim  sum over query tokens of max over document tokens of the cosine of the backbone's
            token embeddings (float16 in the token store of `python -m lsr_pyserini.ssr embed`).
    pooled  single-vector cosine of the backbone's pooled vectors from the same token store (the
            backbone's own single-vector ranking of the candidates, e.g. MiniLM's mean pooling).
"""
from __future__ import annotations

import logging
from functools import lru_cache

import numpy as np

from ...core.length_order import encode_in_length_order
from ...core.environment import cpuinfo_field
from ...core.errors import InputError
from ...kernels.jit import half_to_float, lowest_bit
from ...core.options import non_negative_float
from ...stores.tokens import TokenRows
from ..base import Option
from ..registry import reranker as register
from ..base import Reranker

log = logging.getLogger(__name__)


def sum_of_max(similarities: np.ndarray, bounds: np.ndarray) -> np.ndarray:
    """Per document (token rows bounds[j]:bounds[j+1] of a T x Lq matrix): sum over columns of the
    maximum over its rows; 0 for a document without tokens."""
    scores = np.zeros(len(bounds) - 1, dtype=np.float64)
    lengths = np.diff(bounds)
    nonempty = lengths > 0
    if nonempty.any() and similarities.shape[1]:
        maxima = np.maximum.reduceat(similarities, bounds[:-1][nonempty], axis=0)
        scores[nonempty] = maxima.sum(axis=1)
    return scores


def query_columns(query_index: np.ndarray, query_value: np.ndarray, latents: int,
                  width: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(column, query_matrix) of a query's codes: `column[n]` is neuron n's row in the query matrix
    (-1 for a neuron no query token uses) and `query_matrix[column[n], i]` query token i's
    activation of n (float32; `width` >= the query's tokens pads the columns with zeros)."""
    used = query_value > 0
    neurons = np.unique(query_index[used])
    column = np.full(latents, -1, dtype=np.int64)
    column[neurons] = np.arange(len(neurons))
    query_matrix = np.zeros((len(neurons), width or len(query_index)), dtype=np.float32)
    rows = np.broadcast_to(np.arange(len(query_index))[:, None], query_index.shape)
    np.add.at(query_matrix, (column[query_index[used]], rows[used]), query_value[used])
    return column, query_matrix


def code_similarities(query_index: np.ndarray, query_value: np.ndarray, doc_index: np.ndarray,
                      doc_value: np.ndarray, latents: int) -> np.ndarray:
    """T x Lq matrix of z_d,t . z_q,i from the sparse codes (only neurons the query uses are read)."""
    from scipy.sparse import csr_matrix

    column, query_matrix = query_columns(query_index, query_value, latents)
    doc_columns = column[doc_index]
    hit = doc_columns >= 0
    # row-major masking keeps the entries in token order: the CSR row pointers are the running hit counts
    pointers = np.zeros(len(doc_index) + 1, dtype=np.int64)
    np.cumsum(hit.sum(axis=1), out=pointers[1:])
    doc_matrix = csr_matrix((doc_value[hit].astype(np.float32), doc_columns[hit], pointers),
                            shape=(len(doc_index), query_matrix.shape[0]))
    return np.asarray(doc_matrix @ query_matrix)


def ssr_tok_scores(query_index: np.ndarray, query_value: np.ndarray, doc_index: np.ndarray, doc_value: np.ndarray,
                   bounds: np.ndarray, latents: int) -> np.ndarray:
    """`sum_of_max(code_similarities(...), bounds)`, bit for bit, with less work: the codes of
    neurons the query uses are found with a boolean table (one byte per code, not eight), read
    once by flat index, and only the tokens holding one get a row of similarities. Each row is
    still the CSR product of the token's hit codes in stored order (float32), so the similarities,
    the per-document maxima (similarities are >= 0, so tokens without a hit change no maximum)
    and the sums over query tokens are the direct computation's."""
    from scipy.sparse import csr_matrix

    documents = len(bounds) - 1
    scores = np.zeros(documents, dtype=np.float64)
    column, query_matrix = query_columns(query_index, query_value, latents)
    if not len(query_matrix) or not len(query_index) or not len(doc_index):
        return scores
    wanted = column >= 0
    k = doc_index.shape[1]
    flat = np.flatnonzero(wanted[doc_index])  # row-major: token after token, codes in stored order
    if not len(flat):
        return scores
    token = flat // k
    first = np.flatnonzero(np.diff(token, prepend=-1))  # each sharing token's first hit
    pointers = np.append(first, len(flat))
    doc_matrix = csr_matrix((doc_value.reshape(-1)[flat].astype(np.float32), column[doc_index.reshape(-1)[flat]],
                             pointers), shape=(len(first), query_matrix.shape[0]))
    similarities = np.asarray(doc_matrix @ query_matrix)  # one row per sharing token, in token order
    row_bounds = np.searchsorted(token[first], bounds)  # each document's first sharing-token row
    nonempty = np.diff(row_bounds) > 0
    maxima = np.zeros((documents, len(query_index)), dtype=np.float32)
    maxima[nonempty] = np.maximum.reduceat(similarities, row_bounds[:-1][nonempty], axis=0)
    scores[:] = maxima.sum(axis=1)
    return scores


LANES = 8  # query tokens a pass of the compiled kernel scores at once (one 256-bit register of float32)


def ssr_tok_maxima(doc_index, doc_bits, starts, ends, row_start, query_matrix, half_table, maxima, by_mask):
    """The compiled kernel (`kernels.jit`) of `ssr_tok_scores`, reading the store's rows in place:
    maxima[d, i] = max(0, max over tokens t of document d (rows starts[d]:ends[d]) of z_d,t . z_q,i).

    Per token, the codes of neurons the query uses (row_start[n] >= 0: the start of neuron n's row
    in the flattened query matrix) are collected without branches, in stored order; then, LANES
    query tokens at a time, each similarity is summed over them in that order in float32, as the
    CSR product does: the same bits. doc_bits are the float16 activations' bit patterns, turned
    into float32 by table; query_matrix has a multiple of LANES columns. Every index is unsigned,
    which spares numba's test for negative indices on each read (12.5 -> 7.8 ms a query).

    Two ways to collect a token's hits, the same codes in the same order: by_mask first sets one
    bit per hit code (at most 64 codes a token), then reads the set bits lowest first; otherwise
    each code's position is stored at the hit count, which the hit adds 1 to. The second was as
    fast or faster on an Intel Xeon; on an AMD EPYC (Zen 1) it took about twice the kernel's time,
    a store whose address hangs on the previous load (`mask_collection` chooses by CPU vendor;
    docs/benchmarks.md, re-ranking kernels)."""
    codes = np.uint64(doc_index.shape[1])
    width = np.uint64(query_matrix.shape[1])
    flat = query_matrix.ravel()
    o1, o2, o3, o4 = np.uint64(1), np.uint64(2), np.uint64(3), np.uint64(4)
    o5, o6, o7 = np.uint64(5), np.uint64(6), np.uint64(7)
    found = np.empty(codes, np.uint64)
    rows = np.empty(codes, np.uint64)
    values = np.empty(codes, np.float32)
    for d in range(starts.shape[0]):
        best = maxima[d]
        for t in range(np.uint64(starts[d]), np.uint64(ends[d])):
            hits = np.uint64(0)
            if by_mask:
                mask = np.uint64(0)
                for c in range(codes):
                    mask |= np.uint64(row_start[doc_index[t, c]] >= 0) << c
                while mask:
                    c = np.uint64(lowest_bit(mask))
                    rows[hits] = np.uint64(row_start[doc_index[t, c]])
                    values[hits] = half_table[doc_bits[t, c]]
                    hits += o1
                    mask &= mask - o1
            else:
                for c in range(codes):
                    found[hits] = c
                    hits += np.uint64(row_start[doc_index[t, c]] >= 0)
                for j in range(hits):
                    c = found[j]
                    rows[j] = np.uint64(row_start[doc_index[t, c]])
                    values[j] = half_table[doc_bits[t, c]]
            if hits == 0:
                continue
            for lane in range(np.uint64(0), width, np.uint64(LANES)):
                a = values[0]
                b = rows[0] + lane
                s0 = a * flat[b]
                s1 = a * flat[b + o1]
                s2 = a * flat[b + o2]
                s3 = a * flat[b + o3]
                s4 = a * flat[b + o4]
                s5 = a * flat[b + o5]
                s6 = a * flat[b + o6]
                s7 = a * flat[b + o7]
                for j in range(o1, hits):
                    a = values[j]
                    b = rows[j] + lane
                    s0 += a * flat[b]
                    s1 += a * flat[b + o1]
                    s2 += a * flat[b + o2]
                    s3 += a * flat[b + o3]
                    s4 += a * flat[b + o4]
                    s5 += a * flat[b + o5]
                    s6 += a * flat[b + o6]
                    s7 += a * flat[b + o7]
                best[lane] = max(best[lane], s0)
                best[lane + o1] = max(best[lane + o1], s1)
                best[lane + o2] = max(best[lane + o2], s2)
                best[lane + o3] = max(best[lane + o3], s3)
                best[lane + o4] = max(best[lane + o4], s4)
                best[lane + o5] = max(best[lane + o5], s5)
                best[lane + o6] = max(best[lane + o6], s6)
                best[lane + o7] = max(best[lane + o7], s7)


@lru_cache(maxsize=1)
def mask_collection() -> bool:
    """Whether the compiled kernel collects hits by mask (`ssr_tok_maxima`): on AMD CPUs."""
    return cpuinfo_field("vendor_id") == "AuthenticAMD"


def compiled_ssr_tok_scores(query_index: np.ndarray, query_value: np.ndarray, doc_index: np.ndarray,
                            doc_value: np.ndarray, starts: np.ndarray, ends: np.ndarray,
                            latents: int, by_mask: bool | None = None) -> np.ndarray | None:
    """`ssr_tok_scores` of the documents owning token rows starts[d]:ends[d] of a code store's
    arrays, read in place (memory-mapped, nothing gathered) by the compiled kernel, with the same
    bits; None where `kernels.jit` runs no compiled kernel, or the arrays are not a code store's uint16
    neuron ids (SAEs of up to 65,536 latents) and float16 activations. by_mask: how the kernel
    collects hits (None: `mask_collection`'s choice); never by mask above 64 codes a token."""
    from ...kernels.jit import compiled

    kernel = compiled(ssr_tok_maxima)
    if kernel is None or doc_value.dtype != np.float16 or doc_index.dtype != np.uint16 or doc_index.ndim != 2:
        return None
    scores = np.zeros(len(starts), dtype=np.float64)
    tokens = len(query_index)
    width = -(-tokens // LANES) * LANES
    column, query_matrix = query_columns(query_index, query_value, latents, width)
    if not len(query_matrix) or not tokens:
        return scores
    maxima = np.zeros((len(starts), width), dtype=np.float32)
    # one entry per uint16 id, so that no id of the store reads outside the table (ids >= latents: -1, no hit)
    row_start = np.full(1 << 16, -1, dtype=np.int32 if query_matrix.size < 2**31 else np.int64)
    row_start[:latents] = np.where(column >= 0, column * width, -1)
    kernel(np.asarray(doc_index), np.asarray(doc_value).view(np.uint16), np.asarray(starts, dtype=np.int64),
           np.asarray(ends, dtype=np.int64), row_start, query_matrix, half_to_float(), maxima,
           doc_index.shape[1] <= 64 and (mask_collection() if by_mask is None else bool(by_mask)))
    scores[:] = np.ascontiguousarray(maxima[:, :tokens]).sum(axis=1)  # the sum ssr_tok_scores takes
    return scores


class SSRReranker(Reranker):
    def __init__(self, store: str, options: dict):
        from .codes import SSRCoder

        self.store = TokenRows(store, "codes")
        recorded = self.store.manifest["model"]
        model = options.get("model") or recorded
        if options.get("model") and options["model"] != recorded:
            log.warning(f"queries are coded with {model!r}; the store's documents were coded with {recorded!r} "
                        f"(it must be the same SSR model)")
        self.coder = SSRCoder(model)
        sizes = (self.coder.model.token_sae.describe(), self.coder.model.cls_sae.describe())
        if sizes != (self.store.manifest["token_sae"], self.store.manifest["cls_sae"]):
            raise InputError(f"{store}: codes were written by SAEs of other sizes than {model}'s")
        weight = options.get("cls_weight")
        self.cls_weight = float(self.coder.model.settings["cls_weight"] if weight is None else weight)
        self.batch_size = int(options.get("batch_size") or 32)

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def encode_queries(self, texts: list[str]) -> list[tuple]:
        """Per query: token codes (indices, values) and the dense [CLS] code."""
        from .codes import codes

        model = self.coder.model
        pairs = encode_in_length_order(lambda batch: self.coder.embed(batch, "queries"), texts, self.batch_size)
        encoded = []
        for pooled, tokens in pairs:
            cls_index, cls_value = codes(model.cls_sae, pooled[None, :])
            cls_dense = np.zeros(model.cls_sae.latents, dtype=np.float32)
            cls_dense[cls_index[0]] = cls_value[0]
            encoded.append((*codes(model.token_sae, tokens), cls_dense))
        return encoded

    def score_encoded(self, query: tuple, docids: list[str], compiled: bool = True) -> np.ndarray:
        """Scores of docids; compiled=False runs the numpy kernel (the same bits; the benchmark's reference)."""
        query_index, query_value, cls_dense = query
        latents = self.coder.model.token_sae.latents
        scores = compiled_ssr_tok_scores(query_index, query_value, self.store.arrays["token_index"],
                                         self.store.arrays["token_value"], *self.store.row_ranges(docids),
                                         latents) if compiled else None
        if scores is None:
            bounds, arrays = self.store.gather(docids, ["token_index", "token_value"])
            scores = ssr_tok_scores(query_index, query_value, arrays["token_index"], arrays["token_value"], bounds,
                                    latents)
        if self.cls_weight:
            cls_index = self.store.document_rows(docids, "cls_index").astype(np.int64)
            cls_value = self.store.document_rows(docids, "cls_value").astype(np.float32)
            scores += self.cls_weight * (cls_dense[cls_index] * cls_value).sum(axis=1)
        return scores

    def score(self, query_ids, query_texts, candidates):
        return [self.score_encoded(q, docs).tolist() for q, docs in zip(self.encode_queries(query_texts), candidates)]

    def describe(self) -> dict:
        return {"store": str(self.store.path), "cls_weight": self.cls_weight}


class MaxSimReranker(Reranker):
    """Dense late interaction over the backbone's token embeddings (the reference SSR approximates)."""

    def __init__(self, store: str, options: dict):
        from .backbone import TokenEncoder

        self.store = TokenRows(store, "tokens")
        settings = dict(self.store.manifest["backbone"])
        if options.get("model"):
            settings["model"] = options["model"]
        self.settings = settings
        self._encoder, self._builder = None, TokenEncoder
        self.batch_size = int(options.get("batch_size") or 32)

    @property
    def encoder(self):
        if self._encoder is None:
            self._encoder = self._builder(**self.settings)
        return self._encoder

    def missing(self, docids: set[str]) -> list[str]:
        return self.store.missing(sorted(docids))

    def encode_queries(self, texts: list[str]) -> list[np.ndarray]:
        pairs = encode_in_length_order(lambda batch: self.encoder.encode(batch, "queries"), texts, self.batch_size)
        return [tokens for _, tokens in pairs]

    def score_encoded(self, query_tokens: np.ndarray, docids: list[str]) -> np.ndarray:
        bounds, arrays = self.store.gather(docids, ["tokens"])
        return sum_of_max(np.asarray(arrays["tokens"], dtype=np.float32) @ query_tokens.T, bounds)

    def score(self, query_ids, query_texts, candidates):
        return [self.score_encoded(q, docs).tolist() for q, docs in zip(self.encode_queries(query_texts), candidates)]

    def describe(self) -> dict:
        return {"store": str(self.store.path), "backbone": self.settings}


class PooledReranker(MaxSimReranker):
    """Cosine of the pooled query and document vectors (the single-vector backbone)."""

    def encode_queries(self, texts: list[str]) -> list[np.ndarray]:
        pairs = encode_in_length_order(lambda batch: self.encoder.encode(batch, "queries"), texts, self.batch_size)
        return [pooled for pooled, _ in pairs]

    def score_encoded(self, query_vector: np.ndarray, docids: list[str]) -> np.ndarray:
        return self.store.document_rows(docids, "pooled").astype(np.float32) @ query_vector


@register("ssr", options=(Option("--cls-weight", "weight of the [CLS] code similarity, >= 0; 0 = SSR-tok (default: the "
                                               "model's cls_weight)", non_negative_float),))
def build_ssr(store: str, options: dict) -> SSRReranker:
    return SSRReranker(store, options)


@register("maxsim")
def build_maxsim(store: str, options: dict) -> MaxSimReranker:
    return MaxSimReranker(store, options)


@register("pooled")
def build_pooled(store: str, options: dict) -> PooledReranker:
    return PooledReranker(store, options)
