"""The SparseEmbed store: each document's activated terms and their embeddings, memory-mapped.

    STORE/sparseembed.json   {"format", "identity": {"model", "fingerprint", "dim", "vocab_size"},
                              "documents", "terms", "term_dtype", ...}
    STORE/docids.txt         one document id a line, in row order
    STORE/offsets.npy        int64, documents + 1: document r's terms are rows offsets[r]:offsets[r+1]
    STORE/terms.bin          term ids, ascending within a document (uint16 when |V| < 65536, else int32)
    STORE/masks.bin          uint8, terms x ceil(dim / 8): which of a term's dim components are non-zero
                             (numpy.packbits of each row), row-aligned with terms.bin
    STORE/values.bin         float16, the non-zero components of every term's embedding, term after term
    STORE/value_offsets.npy  int64, documents + 1: document r's values are values[value_offsets[r]:...[r+1]]

The embeddings are ReLU outputs, mostly exact zeros (83% of the components of the H' = 64 SciFact
model's), so only the non-zero float16 components are kept, with a bit mask per term: lossless, and
several times smaller than dense float16 rows. terms.bin, masks.bin and values.bin are opened with
numpy.memmap, so re-ranking reads only the candidates' rows. The identity says which model and H' wrote the store: a re-ranker whose query model differs
is refused, and so is a store whose files are shorter than the manifest says (truncated copy).
While encoding, parts go to STORE.partial/ shard by shard (resumable, as for the dense store);
STORE appears only when complete.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.outputs import atomic_write
from .base import ShardedStoreWriter, range_positions, read_manifest, store_kind, write_manifest
from .dense import DOCIDS_FILE

STORE_FORMAT = "lsr-pyserini-sparseembed-store/2"
META_FILE, OFFSETS_FILE, TERMS_FILE = "sparseembed.json", "offsets.npy", "terms.bin"
MASKS_FILE, VALUES_FILE, VALUE_OFFSETS_FILE = "masks.bin", "values.bin", "value_offsets.npy"
SPARSEEMBED_STORE = store_kind("a SparseEmbed store", META_FILE, lambda manifest: manifest.get("format") == STORE_FORMAT)
_POPCOUNT = np.unpackbits(np.arange(256, dtype=np.uint8)[:, None], axis=1).sum(1).astype(np.int64)


def shared_term_positions(terms, starts, ends, lookup, positions, owner, slot):
    """Compiled kernel: the positions p in starts[d]:ends[d] whose term the query activated
    (lookup[terms[p]] >= 0), candidate after candidate, with the candidate d and lookup's slot; the
    count, or -1 at a term id outside lookup (a damaged terms.bin: nothing is read out of bounds)."""
    found = 0
    size = lookup.shape[0]
    for d in range(starts.shape[0]):
        for p in range(starts[d], ends[d]):
            term = terms[p]
            if term < 0 or term >= size:
                return -1
            s = lookup[term]
            if s >= 0:
                positions[found] = p
                owner[found] = d
                slot[found] = s
                found += 1
    return found


def unpack_embeddings(masks, positions, value_starts, value_bits, half_table, out):
    """Compiled kernel: out[i] = the dense embedding of term row positions[i] (its mask's set bits,
    most significant first as numpy.packbits sets them, take its float16 values in order)."""
    for i in range(positions.shape[0]):
        p = positions[i]
        v = value_starts[p]
        for j in range(out.shape[1]):
            if (masks[p, j >> 3] >> (7 - (j & 7))) & 1:
                out[i, j] = half_table[value_bits[v]]
                v += 1


def term_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.int32)


class SparseEmbedStoreWriter(ShardedStoreWriter):
    """Shard parts in STORE.partial/ (docids, per-document term counts, term ids, float16
    embeddings), concatenated into contiguous arrays by :meth:`finish`. A shard's records are
    ``(docids, [(term ids, embeddings k x dim), ...])``."""

    output_kind = SPARSEEMBED_STORE

    def write_shard(self, index: int, records) -> None:
        docids, parts = records
        dim = self.settings["identity"]["dim"]
        terms = np.concatenate([ids for ids, _ in parts]).astype(np.int64) if parts else np.zeros(0, np.int64)
        embeddings = np.concatenate([e.reshape(-1, dim) for _, e in parts]).astype(np.float16) if parts \
            else np.zeros((0, dim), np.float16)
        self.write_part(index, docids=np.array(docids, dtype=object).astype(str),
                        lengths=np.array([len(ids) for ids, _ in parts], dtype=np.int64),
                        terms=terms, embeddings=embeddings)

    def finish(self, expected_documents: int, summary: dict | None = None) -> dict:
        identity = self.settings["identity"]
        docids: list[str] = []
        lengths, terms, embeddings = [], [], []
        for part in self.parts():
            with np.load(part) as data:
                docids.extend(data["docids"].tolist())
                lengths.append(data["lengths"])
                terms.append(data["terms"])
                embeddings.append(data["embeddings"])
        self.check_count(len(docids), expected_documents, "documents' term embeddings")
        offsets = np.zeros(len(docids) + 1, dtype=np.int64)
        np.cumsum(np.concatenate(lengths), out=offsets[1:])
        dense = np.concatenate(embeddings).astype(np.float16)
        nonzero = dense != 0
        value_offsets = np.concatenate([[0], np.cumsum(nonzero.sum(1))]).astype(np.int64)[offsets]
        dtype = term_dtype(identity["vocab_size"])
        manifest = {"format": STORE_FORMAT, **self.settings, "documents": len(docids), "terms": int(offsets[-1]),
                    "values": int(value_offsets[-1]), "term_dtype": dtype.name, "embedding_dtype": "float16",
                    **(summary or {})}
        building = self.begin()
        np.concatenate(terms).astype(dtype).tofile(building / TERMS_FILE)
        np.packbits(nonzero, axis=1).tofile(building / MASKS_FILE)
        dense[nonzero].tofile(building / VALUES_FILE)  # row-major: term after term, components ascending
        np.save(building / OFFSETS_FILE, offsets)
        np.save(building / VALUE_OFFSETS_FILE, value_offsets)
        atomic_write(building / DOCIDS_FILE, (f"{docid}\n" for docid in docids))
        write_manifest(building / META_FILE, manifest)
        self.publish(building)
        return manifest


class SparseEmbedStore:
    """A store opened for reading; every file is checked against the manifest before use."""

    def __init__(self, store_dir: str):
        self.path = Path(store_dir)
        meta_file = self.path / META_FILE
        self.meta = read_manifest(meta_file, f"{store_dir}: not a SparseEmbed store (no {META_FILE}; build one with "
                                             f"`python -m lsr_pyserini.encode corpus --encoder sparseembed "
                                             f"--dense-store STORE`)")
        if self.meta.get("format") != STORE_FORMAT:
            raise InputError(f"{meta_file}: unknown store format {self.meta.get('format')!r}")
        self.identity = self.meta["identity"]
        self.dim = int(self.identity["dim"])
        documents, terms, values = int(self.meta["documents"]), int(self.meta["terms"]), int(self.meta["values"])
        dtype = np.dtype(self.meta["term_dtype"])
        self.mask_bytes = (self.dim + 7) // 8
        expected = {TERMS_FILE: terms * dtype.itemsize, MASKS_FILE: terms * self.mask_bytes, VALUES_FILE: values * 2}
        for name, size in expected.items():
            actual = (self.path / name).stat().st_size if (self.path / name).is_file() else None
            if actual != size:
                raise InputError(f"{self.path / name}: store file is truncated or damaged ({actual} bytes, "
                                 f"the manifest says {size}): encode the corpus again")
        self.offsets, self.value_offsets = (self._load_offsets(name) for name in (OFFSETS_FILE, VALUE_OFFSETS_FILE))
        self.docids = (self.path / DOCIDS_FILE).read_text(encoding="utf-8").splitlines()
        if len(self.docids) != documents or self.offsets.shape != (documents + 1,) or self.offsets[-1] != terms \
                or self.value_offsets.shape != (documents + 1,) or self.value_offsets[-1] != values:
            raise InputError(f"{self.path}: store file is truncated or damaged ({len(self.docids)} document ids "
                             f"and {len(self.offsets) - 1} offsets for {documents} documents)")
        self.row = {docid: i for i, docid in enumerate(self.docids)}
        self.terms = np.memmap(self.path / TERMS_FILE, dtype=dtype, mode="r", shape=(terms,)) if terms else \
            np.zeros(0, dtype)
        self.masks = np.memmap(self.path / MASKS_FILE, dtype=np.uint8, mode="r", shape=(terms, self.mask_bytes)) \
            if terms else np.zeros((0, self.mask_bytes), np.uint8)
        self.values = np.memmap(self.path / VALUES_FILE, dtype=np.float16, mode="r", shape=(values,)) if values else \
            np.zeros(0, np.float16)
        self._value_starts: np.ndarray | None = None
        # query term -> its row in the query's embeddings, -1 elsewhere (reset after each query)
        self._lookup = np.full(int(self.identity["vocab_size"]), -1, dtype=np.int64)

    def _load_offsets(self, name: str) -> np.ndarray:
        try:
            return np.load(self.path / name)
        except (OSError, ValueError) as err:
            raise InputError(f"{self.path / name}: store file is truncated or damaged ({err})") from None

    def _embeddings(self, masks: np.ndarray, counts: np.ndarray, value_starts: np.ndarray) -> np.ndarray:
        """Dense float32 embeddings (len(masks) x dim) of terms with these masks and non-zero
        counts, whose non-zero components start at these indices of values.bin."""
        index = np.repeat(value_starts - np.cumsum(counts) + counts, counts) + np.arange(int(counts.sum()))
        dense = np.zeros((len(masks), self.dim), dtype=np.float32)
        dense[np.unpackbits(masks, axis=1, count=self.dim).astype(bool)] = self.values[index]
        return dense

    def document_embeddings(self, docid: str) -> np.ndarray:
        """One document's term embeddings (its terms x dim, float32), rows as in terms.bin."""
        row = self.row[docid]
        masks = self.masks[self.offsets[row]:self.offsets[row + 1]]
        counts = _POPCOUNT[masks].sum(1)
        return self._embeddings(masks, counts, self.value_offsets[row] + np.cumsum(counts) - counts)

    def check_model(self, identity: dict) -> None:
        """Refuse queries from another model or another H' than the documents'."""
        mine = self.identity
        if identity["dim"] != mine["dim"]:
            raise InputError(f"{self.path}: store holds {mine['dim']}-dimensional term embeddings, the query "
                             f"model {identity['model']!r} makes {identity['dim']}-dimensional ones")
        if identity["fingerprint"] != mine["fingerprint"]:
            raise InputError(f"{self.path}: store was encoded by model {mine['model']!r} (fingerprint "
                             f"{mine['fingerprint']}), not by the query model {identity['model']!r} "
                             f"(fingerprint {identity['fingerprint']})")

    def missing(self, docids) -> list[str]:
        return [d for d in docids if d not in self.row]

    @property
    def value_starts(self) -> np.ndarray:
        """Where each term's non-zero components start in values.bin (int64, one per term): the
        running popcount of the masks, computed once on first use and checked against
        value_offsets.npy (the document-level starts the writer recorded)."""
        if self._value_starts is None:
            counts = np.zeros(len(self.terms), dtype=np.int64)
            for start in range(0, len(counts), 1 << 20):  # bounded scratch for the popcount table
                counts[start:start + (1 << 20)] = _POPCOUNT[self.masks[start:start + (1 << 20)]].sum(1)
            starts = np.zeros(len(counts) + 1, dtype=np.int64)
            np.cumsum(counts, out=starts[1:])
            if not np.array_equal(starts[self.offsets], self.value_offsets):
                raise InputError(f"{self.path}: masks.bin does not match value_offsets.npy (store damaged): "
                                 f"encode the corpus again")
            self._value_starts = starts[:-1]
        return self._value_starts

    def scores(self, query_terms: np.ndarray, query_embeddings: np.ndarray, docids: list[str],
               compiled: bool = True) -> np.ndarray:
        """Per document: sum over its terms that the query activated of e^Q . e^D (float32).

        Only the candidates' term ids are scanned; masks and values are read for the shared terms
        alone (their value starts are precomputed per term, `value_starts`). The compiled kernels
        (`kernels.jit`; compiled=False or none: numpy) find and unpack the shared terms; the products
        and sums stay numpy's, so both paths give the same bits."""
        rows = np.fromiter((self.row[d] for d in docids), dtype=np.int64, count=len(docids))
        starts, ends = self.offsets[rows], self.offsets[rows + 1]
        shared = self._compiled_shared_terms(query_terms, starts, ends) if compiled else None
        if shared is not None:
            owner, slot, document_vectors = shared
            contributions = np.einsum("th,th->t", document_vectors, query_embeddings[slot])
            return np.bincount(owner, weights=contributions, minlength=len(rows)).astype(np.float32)
        lengths = ends - starts
        positions = range_positions(starts, lengths)
        terms = self.terms[positions]
        if len(terms) and int(terms.max()) >= len(self._lookup):
            raise self._damaged_terms()
        lookup = self._lookup
        lookup[query_terms] = np.arange(len(query_terms))
        try:
            slot = lookup[terms]
        finally:
            lookup[query_terms] = -1
        hit = np.flatnonzero(slot >= 0)
        shared = positions[hit]
        masks = self.masks[shared]
        document_vectors = self._embeddings(masks, _POPCOUNT[masks].sum(1), self.value_starts[shared])
        contributions = np.einsum("th,th->t", document_vectors, query_embeddings[slot[hit]])
        owner = np.searchsorted(np.cumsum(lengths), hit, side="right")  # the candidate each shared term is in
        return np.bincount(owner, weights=contributions, minlength=len(rows)).astype(np.float32)

    def _damaged_terms(self) -> InputError:
        return InputError(f"{self.path / TERMS_FILE}: holds a term id outside the store's vocabulary of "
                          f"{len(self._lookup)} (a damaged store: build it again)")

    def _compiled_shared_terms(self, query_terms, starts, ends):
        """(owner, slot, embeddings) of the candidates' terms the query shares, in candidate and
        stored order, as the numpy path finds them; None where `kernels.jit` runs no compiled kernel."""
        from ..kernels.jit import compiled, half_to_float

        find, unpack = compiled(shared_term_positions), compiled(unpack_embeddings)
        if find is None or unpack is None:
            return None
        lookup = self._lookup
        lookup[query_terms] = np.arange(len(query_terms))
        try:
            total = int((ends - starts).sum())
            positions, owner, slot = (np.empty(total, dtype=np.int64) for _ in range(3))
            found = find(np.asarray(self.terms), starts, ends, lookup, positions, owner, slot)
        finally:
            lookup[query_terms] = -1
        if found < 0:
            raise self._damaged_terms()
        positions, owner, slot = positions[:found], owner[:found], slot[:found]
        embeddings = np.zeros((found, self.dim), dtype=np.float32)
        unpack(np.asarray(self.masks), positions, self.value_starts, np.asarray(self.values).view(np.uint16),
               half_to_float(), embeddings)
        return owner, slot, embeddings

    def document_frequencies(self) -> dict[str, int]:
        """{term: documents that activated it}, terms named by the store's model's tokenizer."""
        from ..core.hf import load_tokenizer
        from ..core.presets import resolve_model

        counts = np.bincount(np.asarray(self.terms, dtype=np.int64), minlength=int(self.identity["vocab_size"]))
        tokens = load_tokenizer(resolve_model(self.identity["model"])).convert_ids_to_tokens(list(range(len(counts))))
        return {token: int(n) for token, n in zip(tokens, counts) if n}

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())
