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

Encoders here map texts to float32 numpy rows: :class:`TransformerDenseEncoder` for any
sentence-transformers or Hugging Face encoder (pooling and normalisation are read from a
sentence-transformers folder when present), and the PromptReps family (encoders/promptreps.py)
through :func:`build_dense_encoder`.
"""
from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from .data import InputError
from .writer import atomic_write

STORE_FORMAT = "lsr-pyserini-dense-store/1"
POOLINGS = ("cls", "mean")
INDEX_FILE, DOCIDS_FILE, MANIFEST_FILE = "index.faiss", "docids.txt", "manifest.json"
RAGGED_DATA, RAGGED_OFFSETS = ".data.npy", ".offsets.npy"


# -- encoders ---------------------------------------------------------------------------------

def sentence_transformers_defaults(path: str) -> dict:
    """Pooling, normalisation and max length from a sentence-transformers folder ({} otherwise)."""
    folder = Path(path)
    modules_file = folder / "modules.json"
    if not modules_file.is_file():
        return {}
    defaults: dict = {}
    try:
        modules = json.loads(modules_file.read_text())
        for module in modules:
            kind = module.get("type", "")
            if kind.endswith("Pooling"):
                config = json.loads((folder / module.get("path", "") / "config.json").read_text())
                if config.get("pooling_mode_cls_token"):
                    defaults["pooling"] = "cls"
                elif config.get("pooling_mode_mean_tokens"):
                    defaults["pooling"] = "mean"
            elif kind.endswith("Normalize"):
                defaults["normalize"] = True
            elif kind.endswith("Transformer") and module.get("path"):
                defaults["transformer_path"] = str(folder / module["path"])  # older layouts: 0_Transformer/
        bert_config = folder / "sentence_bert_config.json"
        if bert_config.is_file():
            defaults["max_length"] = json.loads(bert_config.read_text()).get("max_seq_length")
    except (OSError, json.JSONDecodeError, AttributeError) as err:
        raise InputError(f"{folder}: unreadable sentence-transformers configuration ({err})") from None
    return {k: v for k, v in defaults.items() if v is not None}


class TransformerDenseEncoder:
    """Texts -> L2-normalised (optional) CLS or mean-pooled last hidden states, float32."""

    def __init__(self, model: str, pooling: str | None = None, normalize: bool | None = None,
                 max_length: int | None = None, query_prefix: str = "", doc_prefix: str = "", **_ignored):
        import torch  # noqa: F401
        from transformers import AutoModel

        from .encoders.base import load_tokenizer, model_error
        from .presets import resolve_model

        self.model_reference = model
        self.path = resolve_model(model)
        defaults = sentence_transformers_defaults(self.path) if Path(self.path).is_dir() else {}
        self.pooling = pooling or defaults.get("pooling", "cls")
        if self.pooling not in POOLINGS:
            raise InputError(f"pooling {self.pooling!r} is not one of {', '.join(POOLINGS)}")
        self.normalize = bool(defaults.get("normalize", False) if normalize is None else normalize)
        weights = defaults.get("transformer_path", self.path)
        self.tokenizer = load_tokenizer(weights)
        try:
            self.model = AutoModel.from_pretrained(weights).eval()
        except Exception as err:
            raise model_error(self.path, err) from None
        limit = getattr(self.model.config, "max_position_embeddings", 512)
        self.max_length = int(max_length or defaults.get("max_length") or min(limit, 512))
        self.prefixes = {"queries": query_prefix or "", "documents": doc_prefix or ""}
        self.dim = int(self.model.config.hidden_size)

    def encode(self, texts: list[str], side: str) -> np.ndarray:
        import torch

        prefix = self.prefixes[side]
        encoded = self.tokenizer([prefix + t for t in texts], padding=True, truncation=True,
                                 max_length=self.max_length, return_tensors="pt")
        with torch.inference_mode():
            hidden = self.model(**encoded).last_hidden_state.float()
        if self.pooling == "cls":
            vectors = hidden[:, 0]
        else:
            mask = encoded["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            vectors = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
        if self.normalize:
            vectors = torch.nn.functional.normalize(vectors, p=2, dim=-1)
        return vectors.numpy().astype(np.float32, copy=False)

    def encode_documents(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, "documents")

    def encode_queries(self, texts: list[str]) -> np.ndarray:
        return self.encode(texts, "queries")

    def describe(self) -> dict:
        return {"family": "transformer", "model": self.model_reference, "pooling": self.pooling,
                "normalize": self.normalize, "max_length": self.max_length,
                "query_prefix": self.prefixes["queries"], "doc_prefix": self.prefixes["documents"]}


def build_dense_encoder(settings: dict, overrides: dict | None = None):
    """The encoder a store's manifest describes; ``overrides`` (e.g. ``model``: another location of
    the same checkpoint) replace its settings where not None."""
    settings = {**settings, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    family = settings.get("family")
    if family == "transformer":
        return TransformerDenseEncoder(**{k: v for k, v in settings.items() if k != "family"})
    if family == "promptreps":
        from .encoders.promptreps import PromptRepsEncoder

        return PromptRepsEncoder(**settings).dense
    if family == "bgem3":
        from .encoders.bgem3 import dense_encoder

        return dense_encoder(settings)
    raise InputError(f"unknown dense encoder family {family!r} (known: transformer, promptreps, bgem3)")


# -- the store ----------------------------------------------------------------------------------

def faiss_module():
    try:
        import faiss
    except ImportError:
        raise InputError("faiss is not installed: pip install faiss-cpu") from None
    return faiss


class DenseStoreWriter:
    """Collects document vectors shard by shard in STORE.partial/ and builds STORE at the end.

    Duck-types the shard writer interface of :func:`lsr_pyserini.writer.write_corpus_shards`
    (``is_complete``, ``adopt``, ``write_shard``, ``abandon``); a shard's records are
    ``(docids, matrix)``. Refuses to replace a complete store unless ``overwrite``.
    """

    def __init__(self, store_dir: str, settings: dict, overwrite: bool = False):
        self.store = Path(store_dir.rstrip("/\\") or store_dir)
        self.partial = self.store.with_name(self.store.name + ".partial")
        self.settings = settings
        if overwrite:
            for path in (self.store, self.partial):
                if path.is_dir():
                    shutil.rmtree(path)
        if self.store.exists():
            raise InputError(f"{self.store}: dense store already exists: choose another folder or pass --overwrite")
        settings_file = self.partial / "settings.json"
        if self.partial.is_dir():
            try:
                previous = json.loads(settings_file.read_text())
            except (OSError, json.JSONDecodeError):
                previous = None
            if previous != settings:
                raise InputError(f"{self.partial}: holds vectors encoded with other settings "
                                 f"(or unreadable): pass --overwrite to start again")
        self.partial.mkdir(parents=True, exist_ok=True)
        atomic_write(settings_file, [json.dumps(settings, sort_keys=True)])

    def _part(self, index: int) -> Path:
        return self.partial / f"part-{index:05d}.npz"

    def is_complete(self, index: int) -> bool:
        return self._part(index).is_file()

    def adopt(self, index: int) -> None:
        """Nothing to do: a complete part is read back by :meth:`finish`."""

    def write_shard(self, index: int, records: tuple) -> None:
        """``(docids, matrix)``, or ``(docids, matrix, ragged)`` where ``ragged`` maps a name to one
        array per document (any number of rows each, same row shape and dtype)."""
        docids, matrix, *rest = records
        arrays = {}
        for name, rows in (rest[0] if rest else {}).items():
            arrays[f"{name}.data"] = np.concatenate(rows) if rows else np.zeros(0)
            arrays[f"{name}.lengths"] = np.asarray([len(r) for r in rows], dtype=np.int64)
        tmp = self.partial / f".part-{index:05d}.tmp.npz"
        np.savez(tmp, docids=np.array(docids, dtype=object).astype(str), vectors=matrix.astype(np.float32),
                 **arrays)
        os.replace(tmp, self._part(index))

    def documents_done(self) -> int:
        """Documents in complete parts (this run's and earlier ones)."""
        total = 0
        for part in self.partial.glob("part-*.npz"):
            with np.load(part) as data:
                total += len(data["docids"])
        return total

    def abandon(self) -> None:
        for tmp in self.partial.glob(".part-*.tmp.npz"):
            tmp.unlink(missing_ok=True)

    def finish(self, expected_documents: int, summary: dict | None = None) -> dict:
        """Build the faiss index from every part, write STORE atomically, drop STORE.partial."""
        faiss = faiss_module()
        parts = sorted(self.partial.glob("part-*.npz"))
        docids: list[str] = []
        matrices = []
        ragged: dict[str, tuple[list, list]] = {}
        for part in parts:
            with np.load(part) as data:
                docids.extend(data["docids"].tolist())
                matrices.append(data["vectors"])
                for key in data.files:
                    if key.endswith(".data"):
                        name = key[: -len(".data")]
                        ragged.setdefault(name, ([], []))[0].append(data[key])
                        ragged[name][1].append(data[f"{name}.lengths"])
        if len(docids) != expected_documents:
            raise InputError(f"{self.partial}: holds {len(docids)} of {expected_documents} document vectors "
                             f"(was an earlier run made without this store?): pass --overwrite to start again")
        matrix = np.ascontiguousarray(np.concatenate(matrices), dtype=np.float32)
        index = faiss.IndexFlatIP(matrix.shape[1])
        index.add(matrix)
        manifest = {"format": STORE_FORMAT, **self.settings, "dim": int(matrix.shape[1]),
                    "documents": len(docids), "metric": "inner_product", "index": "IndexFlatIP",
                    **(summary or {})}
        building = self.store.with_name(self.store.name + ".building")
        shutil.rmtree(building, ignore_errors=True)
        building.mkdir(parents=True)
        faiss.write_index(index, str(building / INDEX_FILE))
        for name, (chunks, lengths) in ragged.items():
            np.save(building / f"{name}{RAGGED_DATA}", np.concatenate(chunks))
            np.save(building / f"{name}{RAGGED_OFFSETS}", np.concatenate([[0], np.cumsum(np.concatenate(lengths))]))
        atomic_write(building / DOCIDS_FILE, (f"{docid}\n" for docid in docids))
        atomic_write(building / MANIFEST_FILE, [json.dumps(manifest, indent=2, sort_keys=True) + "\n"])
        os.replace(building, self.store)
        shutil.rmtree(self.partial, ignore_errors=True)
        return manifest


class DenseStore:
    """A dense store opened for reading: document vectors by id, and exact inner-product search."""

    def __init__(self, store_dir: str):
        self.path = Path(store_dir)
        manifest_file = self.path / MANIFEST_FILE
        if not manifest_file.is_file():
            raise InputError(f"{store_dir}: not a dense store (no {MANIFEST_FILE}; build one with "
                             f"`python -m lsr_pyserini.encode dense`)")
        try:
            self.manifest = json.loads(manifest_file.read_text())
        except json.JSONDecodeError as err:
            raise InputError(f"{manifest_file}: malformed JSON ({err.msg})") from None
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
        return self.manifest["encoder"]

    @property
    def vectors(self) -> np.ndarray:
        """All document vectors (rows in docid order), reconstructed once."""
        if self._vectors is None:
            self._vectors = self.index.reconstruct_n(0, self.index.ntotal)
        return self._vectors

    def missing(self, docids) -> list[str]:
        return [d for d in docids if d not in self.row]

    def ragged(self, name: str, docids: list[str]) -> list[np.ndarray]:
        """Each document's rows of the per-document array ``name`` (memory-mapped, read on demand)."""
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
        data, offsets = self._ragged[name]
        rows = [self.row[d] for d in docids]
        return [np.asarray(data[offsets[r]:offsets[r + 1]]) for r in rows]

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
