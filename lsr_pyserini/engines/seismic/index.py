"""A Seismic index (`pyseismic-lsr`, the `[seismic]` extra): a second engine serving the same
JsonVectorCollection shards Lucene indexes, with the same integer impacts and the same scores.

    build_seismic_index(VECTORS_DIR, INDEX_DIR, SeismicBuild(...))   # INDEX_DIR.building/ -> INDEX_DIR
    SeismicIndex(INDEX_DIR).search([(qid, {term: impact})], k)    # {qid: [(docid, score)]}

The folder holds `index.index.seismic` (Seismic's own file), `vocabulary.json` (our term -> component
id mapping: component i is the i-th term in first-seen order; Seismic addresses it as the string "i")
and the manifest `seismic.json` (settings, counts, whether the index is exact). Seismic's component
ids are 16-bit; a vocabulary beyond 65,536 terms (SSR neurons, BGE-M3) is built with its
large-vocabulary classes (`SeismicDatasetLV`/`SeismicIndexLV`, 32-bit ids), or refused in one line
with `large_vocabulary="never"`.

Exact search: an index built with no static pruning (`n_postings` None: every posting kept) and
`summary_energy=1.0` (each block summary keeps every component at its maximum, an upper bound of
every document in the block), searched with the whole query (`query_cut` None) and
`heap_factor=1.0` (a block is skipped only when its upper bound cannot enter the top k) gives the
Lucene impact scores (sum of query impact x document impact, integers, exact in float32 below 2^24)
and the same top k. Ties are ordered as Pyserini's Lucene searchers order them: by docid (string
order); at the k-th position the search is widened until every document tied with it is seen.
"""
from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...core.errors import InputError
from ...core.indexes import input_location, shards_encoder_record
from ...core.hits import Ranking, top_k_with_ties
from ...core.outputs import atomic_write
from ...stores.base import StoreWriter, read_manifest, store_kind, write_manifest
from ...stores.vectors import check_shards, read_impact_queries, read_vectors, vector_bytes, vector_files  # noqa: F401 (their old home)

MANIFEST = "seismic.json"
VOCABULARY = "vocabulary.json"
INDEX_FILE = "index"  # Seismic appends `.index.seismic`
FORMAT = "lsr-pyserini-seismic-1"
SMALL_VOCABULARY = 2**16  # component ids of SeismicIndex are u16
INSTALL = "pip install 'lsr-pyserini[seismic]'"
LARGE_VOCABULARY_CHOICES = ("auto", "never")
MAX_FLOAT32_INTEGER = 2**24  # scores above this are no longer exact integers in float32

SEISMIC_INDEX = store_kind("a Seismic index (with seismic.json)", MANIFEST,
                           lambda manifest: manifest.get("format") == FORMAT)


def require_seismic():
    """The `seismic` module of pyseismic-lsr, or one line naming the extra."""
    try:
        import seismic
    except ImportError:
        raise InputError(f"the Seismic engine needs pyseismic-lsr: {INSTALL}") from None
    if not hasattr(seismic, "SeismicIndex"):  # another module called seismic shadows the package
        raise InputError(f"{getattr(seismic, '__file__', 'seismic')} is not pyseismic-lsr: {INSTALL}")
    return seismic


@dataclass(frozen=True)
class SeismicBuild:
    """Build settings (see docs/seismic.md). `n_postings` None keeps every posting (exact)."""

    n_postings: int | None = None
    centroid_fraction: float = 0.1
    min_cluster_size: int = 2
    summary_energy: float = 1.0
    max_fraction: float = 1.5
    doc_cut: int = 15
    large_vocabulary: str = "auto"
    threads: int = 0  # 0: Rayon's default (all cores)


# -- building ------------------------------------------------------------------------------------

class SeismicIndexWriter(StoreWriter):
    output_kind = SEISMIC_INDEX


def build_seismic_index(vectors: str, index: str, build: SeismicBuild = SeismicBuild(),
                        overwrite: bool = False, progress=None) -> dict:
    """Build the Seismic index of the shards in `vectors` into `index` (aside, then renamed);
    returns its manifest. `progress`: a tqdm-like bar over the shards' bytes (`vector_bytes`)."""
    if build.large_vocabulary not in LARGE_VOCABULARY_CHOICES:
        raise InputError(f"large_vocabulary: expected one of {', '.join(LARGE_VOCABULARY_CHOICES)}")
    seismic = require_seismic()
    folder = Path(vectors)
    vector_files(folder)  # bad input before claiming the index
    shards = check_shards(folder)  # their encoder, recorded in the index: it travels with the folder
    writer = SeismicIndexWriter(index, overwrite)
    started = time.perf_counter()
    vocabulary: dict[str, int] = {}
    docids: list[str] = []
    components, values, offsets = [], [], [0]
    integer = True
    empty = 0
    number = vocabulary.__getitem__
    for docid, vector in read_vectors(folder, progress):
        try:
            ids = np.fromiter(map(number, vector), dtype=np.int32, count=len(vector))
        except KeyError:  # terms not seen before: numbered in this document's order
            for term in vector:
                vocabulary.setdefault(term, len(vocabulary))
            ids = np.fromiter(map(number, vector), dtype=np.int32, count=len(vector))
        weights = np.fromiter(vector.values(), dtype=np.float64, count=len(vector))
        keep = weights > 0
        ids, weights = ids[keep], weights[keep]
        if not len(ids):
            empty += 1  # never retrieved by Lucene either (it matches no query term)
            continue
        integer = integer and bool(np.all(weights == np.round(weights)))
        order = np.argsort(ids)
        docids.append(docid)
        components.append(ids[order])
        values.append(weights[order].astype(np.float32))
        offsets.append(offsets[-1] + len(ids))
    if not docids:
        raise InputError(f"{vectors}: no document has a non-zero impact")
    if progress is not None:
        progress.set_description(f"read {len(docids):,} documents; Seismic builds blocks and summaries")
    large = len(vocabulary) > SMALL_VOCABULARY
    if large and build.large_vocabulary == "never":
        raise InputError(f"{vectors}: {len(vocabulary):,} distinct terms exceed Seismic's 16-bit component ids "
                         f"({SMALL_VOCABULARY:,}); build with the large-vocabulary index (large_vocabulary='auto')")
    # memory: 1M SPLADE documents are 247M postings; the per-document arrays, their concatenation
    # and Seismic's own copy are each gigabytes, so each goes as soon as the next one holds the data
    all_components = np.concatenate(components, dtype=np.int64)  # per document int32: half the bytes
    del components
    all_values = np.concatenate(values)
    del values
    lengths = np.bincount(all_components, minlength=len(vocabulary))
    nonzeros = len(all_values)
    dataset = (seismic.SeismicDatasetLV if large else seismic.SeismicDataset)()
    added = dataset.add_documents_by_id(docids, all_components, all_values, np.asarray(offsets, dtype=np.int64))
    del all_components, all_values, offsets
    if added != len(docids):
        raise InputError(f"{vectors}: Seismic took {added} of {len(docids)} documents")
    # n_postings=None: keep every posting; the global threshold keeps n_postings x lists postings
    # and at most n_postings x max_fraction in one list, so n_postings = longest list / max_fraction
    # (and at least the average) keeps them all
    longest = int(lengths.max())
    n_postings = build.n_postings or max(math.ceil(longest / build.max_fraction),
                                         math.ceil(nonzeros / len(vocabulary)), 1)
    pruned = n_postings * build.max_fraction < longest
    index_class = seismic.SeismicIndexLV if large else seismic.SeismicIndex
    building = writer.begin()
    index_object = index_class.build_from_dataset(
        dataset, n_postings=n_postings, centroid_fraction=build.centroid_fraction,
        min_cluster_size=build.min_cluster_size, summary_energy=build.summary_energy,
        max_fraction=build.max_fraction, doc_cut=build.doc_cut, num_threads=build.threads)
    del dataset  # the index holds the documents now
    index_object.save(str(building / INDEX_FILE))
    terms = [None] * len(vocabulary)
    for term, position in vocabulary.items():
        terms[position] = term
    atomic_write(building / VOCABULARY, [json.dumps(terms, ensure_ascii=False) + "\n"])
    manifest = {
        "format": FORMAT, **input_location(folder, index), "documents": len(docids), "empty_documents": empty,
        "terms": len(vocabulary), "nonzeros": int(nonzeros), "longest_posting_list": longest,
        "integer_impacts": integer, "large_vocabulary": large,
        "encoder": shards_encoder_record(shards),
        "build": {**asdict(build), "n_postings": n_postings, "n_postings_given": build.n_postings},
        "exact": bool(not pruned and build.summary_energy >= 1.0),
        "seismic_version": _seismic_version(), "build_seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(building / MANIFEST, manifest)
    writer.publish(building)
    return manifest


def _seismic_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyseismic-lsr")
    except PackageNotFoundError:
        return "unknown"


# -- searching -----------------------------------------------------------------------------------

class SeismicIndex:
    """Top-k search of a Seismic index with {term: impact} queries.

    `query_cut` None: the whole query; `heap_factor` 1.0: skip a block only when its summary
    cannot beat the k-th score (exact on an exact index, see the module's description)."""

    def __init__(self, index: str):
        self.path = Path(index)
        if not self.path.is_dir():
            raise InputError(f"{index}: no such Seismic index folder")
        self.manifest = read_manifest(self.path / MANIFEST, f"{index}: not a Seismic index (no {MANIFEST}; build it "
                                                            f"with `python -m lsr_pyserini.seismic index`)")
        if self.manifest.get("format") != FORMAT:
            raise InputError(f"{self.path / MANIFEST}: not a manifest this version reads")
        seismic = require_seismic()
        index_file = self.path / f"{INDEX_FILE}.index.seismic"
        vocabulary_file = self.path / VOCABULARY
        for file in (index_file, vocabulary_file):
            if not file.is_file():
                raise InputError(f"{file}: missing (an incomplete Seismic index: build it again)")
        try:
            terms = json.loads(vocabulary_file.read_text(encoding="utf-8"))
        except ValueError:
            raise InputError(f"{vocabulary_file}: truncated or not JSON (build the index again)") from None
        if not isinstance(terms, list) or len(terms) != self.manifest.get("terms"):
            raise InputError(f"{vocabulary_file}: does not match {MANIFEST} (build the index again)")
        self.vocabulary = {term: position for position, term in enumerate(terms)}
        self.string = seismic.get_seismic_string()
        index_class = seismic.SeismicIndexLV if self.manifest.get("large_vocabulary") else seismic.SeismicIndex
        try:
            self.index = index_class.load(str(index_file))
        except Exception as err:  # Seismic raises its own errors for a damaged file
            raise InputError(f"{index_file}: Seismic cannot load it ({type(err).__name__}: {err})") from None
        self.documents = int(self.manifest["documents"])

    def query_arrays(self, impacts: dict) -> tuple[np.ndarray, np.ndarray]:
        """A query's known terms as Seismic components ("id" strings) and float32 values."""
        known = [(self.vocabulary[term], value) for term, value in impacts.items()
                 if value > 0 and term in self.vocabulary]
        return (np.array([str(c) for c, _ in known], dtype=self.string),
                np.array([v for _, v in known], dtype=np.float32))

    def search_one(self, qid: str, impacts: dict, k: int, query_cut: int | None = None,
                   heap_factor: float = 1.0) -> Ranking:
        """The top k of one query: (docid, score), score descending, ties by docid."""
        components, values = self.query_arrays(impacts)
        if not len(components):
            return []
        cut = len(components) if query_cut is None else min(query_cut, len(components))

        def fetch(depth: int) -> Ranking:
            hits = self.index.search(qid, components, values, k=depth, query_cut=cut, heap_factor=heap_factor)
            return [(docid, float(score)) for _, score, docid in hits]

        return top_k_with_ties(fetch, k, self.documents)

    def search(self, queries: list[tuple[str, dict]], k: int, query_cut: int | None = None,
               heap_factor: float = 1.0, threads: int = 1) -> dict[str, Ranking]:
        """{qid: ranking} in query order; with `threads` > 1 the queries are spread over that many
        threads (Seismic releases the GIL; its index is only read)."""
        if threads == 1:
            return {qid: self.search_one(qid, impacts, k, query_cut, heap_factor) for qid, impacts in queries}
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as pool:
            rankings = list(pool.map(lambda query: self.search_one(query[0], query[1], k, query_cut, heap_factor),
                                     queries))
        return {qid: ranking for (qid, _), ranking in zip(queries, rankings)}
