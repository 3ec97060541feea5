"""Dense text vectors: transformer encoders (CLS or mean pooling) and the faiss store they fill.

A **dense store** is a folder written once at encoding time and read by re-rankers and by full
dense retrieval, so nothing on the document side is encoded at query time:

    STORE/index.faiss     faiss IndexFlatIP, row i = the i-th document
    STORE/docids.txt      one document id a line, in row order
    STORE/manifest.json   {"encoder": {...}, "dim", "documents", "metric": "inner_product", ...}
    STORE/NAME.data.npy   optional per-document arrays of any length (e.g. BGE-M3's ColBERT vectors),
    STORE/NAME.offsets.npy  all documents' rows concatenated in docid order, and the row offsets;
                          read through a memory map (`DenseStore.ragged`)

The manifest's ``encoder`` block says how queries must be encoded to match the documents (model,
pooling, normalisation, prefixes; or the PromptReps prompt), so a re-ranker rebuilds the query
encoder from the store alone. While encoding, vectors go to ``STORE.partial/`` one shard at a
time (resumable like the sparse shards); the folder STORE appears only when complete.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..core.errors import InputError
from ..core.outputs import atomic_write
from ..core.records import current_record
from .base import ShardedStoreWriter, range_positions, read_manifest, store_kind, write_manifest

STORE_FORMAT = "lsr-pyserini-dense-store/1"
INDEX_FILE, DOCIDS_FILE, MANIFEST_FILE = "index.faiss", "docids.txt", "manifest.json"
RAGGED_DATA, RAGGED_OFFSETS = ".data.npy", ".offsets.npy"
DENSE_STORE = store_kind("a dense store", MANIFEST_FILE, lambda manifest: manifest.get("format") == STORE_FORMAT)


def faiss_module():
    try:
        import faiss
    except ImportError:
        raise InputError("faiss is not installed: pip install 'lsr-pyserini[dense]' (or faiss-cpu)") from None
    return faiss


class DenseStoreWriter(ShardedStoreWriter):
    """Collects document vectors shard by shard in STORE.partial/ and builds STORE at the end.

    A shard's records are ``(docids, parts)``, one part per document: its vector, or
    ``(vector, {name: array})`` with per-document arrays of any number of rows (same row shape
    and dtype for every document), e.g. BGE-M3's ColBERT vectors.
    """

    output_kind = DENSE_STORE

    def write_shard(self, index: int, records: tuple) -> None:
        docids, parts = records
        vectors = [part[0] if isinstance(part, tuple) else part for part in parts]
        ragged: dict[str, list[np.ndarray]] = {}
        for part in parts:
            for name, rows in (part[1] if isinstance(part, tuple) else {}).items():
                ragged.setdefault(name, []).append(rows)
        arrays = {}
        for name, rows in ragged.items():
            arrays[f"{name}.data"] = np.concatenate(rows) if rows else np.zeros(0)
            arrays[f"{name}.lengths"] = np.asarray([len(r) for r in rows], dtype=np.int64)
        self.write_part(index, docids=np.array(docids, dtype=object).astype(str),
                        vectors=np.stack(vectors).astype(np.float32), **arrays)

    def finish(self, expected_documents: int, summary: dict | None = None) -> dict:
        """Build the faiss index from every part, write STORE atomically, drop STORE.partial."""
        faiss = faiss_module()
        docids: list[str] = []
        matrices = []
        ragged: dict[str, tuple[list, list]] = {}
        for part in self.parts():
            with np.load(part) as data:
                docids.extend(data["docids"].tolist())
                matrices.append(data["vectors"])
                for key in data.files:
                    if key.endswith(".data"):
                        name = key[: -len(".data")]
                        ragged.setdefault(name, ([], []))[0].append(data[key])
                        ragged[name][1].append(data[f"{name}.lengths"])
        self.check_count(len(docids), expected_documents, "document vectors")
        matrix = np.ascontiguousarray(np.concatenate(matrices), dtype=np.float32)
        index = faiss.IndexFlatIP(matrix.shape[1])
        index.add(matrix)
        manifest = {"format": STORE_FORMAT, **self.settings, "dim": int(matrix.shape[1]),
                    "documents": len(docids), "metric": "inner_product", "index": "IndexFlatIP",
                    **(summary or {})}
        building = self.begin()
        faiss.write_index(index, str(building / INDEX_FILE))
        for name, (chunks, lengths) in ragged.items():
            np.save(building / f"{name}{RAGGED_DATA}", np.concatenate(chunks))
            np.save(building / f"{name}{RAGGED_OFFSETS}", np.concatenate([[0], np.cumsum(np.concatenate(lengths))]))
        atomic_write(building / DOCIDS_FILE, (f"{docid}\n" for docid in docids))
        write_manifest(building / MANIFEST_FILE, manifest)
        self.publish(building)
        return manifest


class DenseStore:
    """A dense store opened for reading: document vectors by id, and exact inner-product search."""

    def __init__(self, store_dir: str):
        self.path = Path(store_dir)
        manifest_file = self.path / MANIFEST_FILE
        self.manifest = read_manifest(manifest_file, f"{store_dir}: not a dense store (no {MANIFEST_FILE}; build one "
                                                     f"with `python -m lsr_pyserini.encode dense`)")
        if self.manifest.get("format") != STORE_FORMAT:
            raise InputError(f"{manifest_file}: unknown store format {self.manifest.get('format')!r}")
        faiss = faiss_module()
        try:
            self.index = faiss.read_index(str(self.path / INDEX_FILE))
        except RuntimeError as err:
            raise InputError(f"{self.path / INDEX_FILE}: cannot read faiss index ({str(err).splitlines()[0]})") from None
        self.docids = (self.path / DOCIDS_FILE).read_text(encoding="utf-8").splitlines()
        if len(self.docids) != self.index.ntotal:
            raise InputError(f"{self.path}: {len(self.docids)} document ids for {self.index.ntotal} vectors")
        self.row = {docid: i for i, docid in enumerate(self.docids)}
        self._vectors: np.ndarray | None = None
        self._ragged: dict[str, tuple[np.ndarray, np.ndarray]] = {}

    @property
    def encoder_settings(self) -> dict:
        """The manifest's encoder record in today's names (a store written with family "transformer"
        or dense "pooling" reads as "dense", "pooling_mode": core/records.py)."""
        return current_record(self.manifest["encoder"])

    @property
    def vectors(self) -> np.ndarray:
        """All document vectors (rows in docid order), reconstructed once."""
        if self._vectors is None:
            self._vectors = self.index.reconstruct_n(0, self.index.ntotal)
        return self._vectors

    def missing(self, docids) -> list[str]:
        return [d for d in docids if d not in self.row]

    def _ragged_arrays(self, name: str) -> tuple[np.ndarray, np.ndarray]:
        """(memory-mapped rows, offsets) of the per-document array ``name``, opened once."""
        if name not in self._ragged:
            data_file, offsets_file = self.path / f"{name}{RAGGED_DATA}", self.path / f"{name}{RAGGED_OFFSETS}"
            if not (data_file.is_file() and offsets_file.is_file()):
                raise InputError(f"{self.path}: the store holds no {name!r} arrays (written by another encoder?)")
            try:
                data, offsets = np.load(data_file, mmap_mode="r"), np.load(offsets_file)
            except ValueError as err:
                raise InputError(f"{data_file}: unreadable ({err}; truncated?)") from None
            if len(offsets) != len(self.docids) + 1 or offsets[-1] != len(data):
                raise InputError(f"{data_file}: {len(data)} rows and {len(offsets) - 1} offsets for "
                                 f"{len(self.docids)} documents (truncated or from another store)")
            self._ragged[name] = (data, offsets)
        return self._ragged[name]

    def ragged(self, name: str, docids: list[str]) -> list[np.ndarray]:
        """Each document's rows of the per-document array ``name`` (memory-mapped, read on demand)."""
        data, offsets = self._ragged_arrays(name)
        rows = [self.row[d] for d in docids]
        return [np.asarray(data[offsets[r]:offsets[r + 1]]) for r in rows]

    def ragged_concat(self, name: str, docids: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """The given documents' rows of ``name`` concatenated in their order, read with one gather,
        and each document's number of rows."""
        data, starts, ends = self.ragged_ranges(name, docids)
        lengths = ends - starts
        positions = range_positions(starts, lengths)
        return data[positions], lengths

    def ragged_ranges(self, name: str, docids: list[str], *more: str) -> tuple[np.ndarray, ...]:
        """(the memory-mapped rows of ``name``, starts, ends, then the rows of each of ``more``): the
        given documents' rows are data[starts[i]:ends[i]], read in place (compiled kernels). The
        arrays of ``more`` are written row for row with ``name``'s (BGE-M3's sparse ids and weights)."""
        data, offsets = self._ragged_arrays(name)
        rows = self.rows(docids)
        return (data, offsets[rows], offsets[rows + 1], *(self._ragged_arrays(other)[0] for other in more))

    def rows(self, docids: list[str]) -> np.ndarray:
        """Row numbers (int64) of the given documents (all must be in the store)."""
        return np.fromiter((self.row[d] for d in docids), dtype=np.int64, count=len(docids))

    def scores(self, query_vector: np.ndarray, docids: list[str]) -> np.ndarray:
        """Inner products of one query vector with the given documents (all must be in the store)."""
        rows = np.fromiter((self.row[d] for d in docids), dtype=np.int64, count=len(docids))
        return self.vectors[rows] @ query_vector

    def search(self, query_vectors: np.ndarray, hits: int) -> list[list[tuple[str, float]]]:
        """Exact top-``hits`` documents per query by inner product."""
        scores, rows = self.index.search(np.ascontiguousarray(query_vectors, dtype=np.float32),
                                         min(hits, self.index.ntotal))
        return [[(self.docids[r], float(s)) for s, r in zip(row_scores, row_ids) if r >= 0]
                for row_scores, row_ids in zip(scores, rows)]

    def size_bytes(self) -> int:
        return sum(f.stat().st_size for f in self.path.iterdir() if f.is_file())
