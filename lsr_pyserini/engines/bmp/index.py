"""A BMP index (Block-Max Pruning: Mallia, Suel and Tonellotto, SIGIR 2024; the `bmp` library, the
`[bmp]` extra) of the JsonVectorCollection shards Lucene indexes.

    build_bmp_index(VECTORS_DIR, INDEX_DIR, BmpBuild(block_size=32))   # INDEX_DIR.building/ -> INDEX_DIR
    BmpIndex(INDEX_DIR).search([(qid, {term: impact})], k, alpha, beta)  # {qid: [(docid, score)]}

BMP keeps a document's impact in 8 bits, so impacts above 255 are scaled into 0..255 by the largest
one (a first pass over the shards finds it), as BMP's own PyTerrier indexer scales float weights; the
manifest `bmp.json` records that `scale`, and scores are given back divided by it, on the scale of
Lucene's impact scores. The rounding to 8 bits makes the engine approximate whenever an impact
exceeds 255 (SPLADE-tiny's do), even with `alpha` = `beta` = 1 (no pruning of blocks): its recall of
Lucene's exact top k is measured in docs/bmp.md. Lower `alpha` or `beta` prune more (faster, lower
recall). The build is atomic (INDEX_DIR appears complete) and not resumable: an interrupted build
starts again.
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ...core.errors import InputError
from ...core.hits import Ranking
from ...core.indexes import input_location, shards_encoder_record
from ...core.options import checked, float_in, positive_int
from ...stores.base import StoreWriter, read_manifest, store_kind, write_manifest
from ...stores.vectors import check_shards, read_vectors

MANIFEST = "bmp.json"
INDEX_FILE = "index.bmp"
FORMAT = "lsr-pyserini-bmp-1"
INSTALL = "pip install 'lsr-pyserini[bmp]'"
LARGEST_IMPACT = 255  # BMP's 8-bit impacts
BMP_INDEX = store_kind("a BMP index (with bmp.json)", MANIFEST, lambda manifest: manifest.get("format") == FORMAT)


def require_bmp():
    """The `bmp` library, or one line naming the extra."""
    try:
        import bmp
    except ImportError:
        raise InputError(f"the BMP engine needs the bmp library: {INSTALL}") from None
    if not hasattr(bmp, "Searcher"):
        raise InputError(f"{getattr(bmp, '__file__', 'bmp')} is not the BMP library: {INSTALL}")
    return bmp


@dataclass(frozen=True)
class BmpBuild:
    block_size: int = 32  # documents per block of BMP's block-max bounds

    def __post_init__(self):
        checked("block_size", self.block_size, positive_int)


class BmpIndexWriter(StoreWriter):
    output_kind = BMP_INDEX


def build_bmp_index(vectors: str, index: str, build: BmpBuild = BmpBuild(), overwrite: bool = False,
                    progress=None) -> dict:
    """Build the BMP index of the shards in `vectors` into `index`; returns its manifest. `progress`:
    a tqdm-like bar over the shards' bytes, read twice (the largest impact, then the documents)."""
    bmp = require_bmp()
    folder = Path(vectors)
    shards = check_shards(folder)  # bad input before claiming the index
    started = time.perf_counter()
    writer = BmpIndexWriter(index, overwrite)
    largest, documents = 0, 0
    for _, vector in read_vectors(folder, progress):
        largest = max(largest, max(vector.values(), default=0))
        documents += 1
    scale = LARGEST_IMPACT / largest if largest > LARGEST_IMPACT else 1.0
    building = writer.begin()
    if progress is not None:
        progress.reset()
        progress.set_description("indexing")
    indexer = bmp.Indexer(str(building / INDEX_FILE), bsize=build.block_size, compress_range=False)
    for docid, vector in read_vectors(folder, progress):
        indexer.add_document(docid, {term: int(round(weight * scale)) for term, weight in vector.items()
                                     if round(weight * scale) > 0})
    indexer.finish()
    manifest = {"format": FORMAT, **input_location(folder, index), "documents": documents,
                "largest_impact": largest, "scale": scale, "build": asdict(build),
                "encoder": shards_encoder_record(shards),
                "build_seconds": round(time.perf_counter() - started, 2)}
    write_manifest(building / MANIFEST, manifest)
    writer.publish(building)
    return manifest


class BmpIndex:
    """Top-k search of a BMP index with {term: impact} queries (approximate: see the module's description)."""

    def __init__(self, index: str):
        self.path = Path(index)
        if not self.path.is_dir():
            raise InputError(f"{index}: no such BMP index folder")
        self.manifest = read_manifest(self.path / MANIFEST, f"{index}: not a BMP index (no {MANIFEST}; build it "
                                                            f"with `python -m lsr_pyserini.bmp index`)")
        if self.manifest.get("format") != FORMAT:
            raise InputError(f"{self.path / MANIFEST}: not a manifest this version reads")
        if not (self.path / INDEX_FILE).is_file():
            raise InputError(f"{self.path / INDEX_FILE}: missing (an incomplete BMP index: build it again)")
        self.searcher = require_bmp().Searcher(str(self.path / INDEX_FILE))
        self.scale = float(self.manifest["scale"])
        self.documents = int(self.manifest["documents"])

    def search(self, queries: list[tuple[str, dict]], k: int, alpha: float = 1.0, beta: float = 1.0,
               threads: int = 1) -> dict[str, Ranking]:
        """{qid: ranking} in query order: (docid, score / scale), score descending. With `threads` > 1
        the queries are spread over that many threads (BMP's searcher releases the GIL and is only
        read: the same rankings, measured on SciFact)."""
        alpha, beta = checked("alpha", alpha, float_in(0, 1)), checked("beta", beta, float_in(0, 1))
        threads = checked("threads", threads, positive_int)

        def one(query: dict) -> Ranking:
            terms = {term: int(weight) for term, weight in query.items() if weight > 0}
            if not terms:
                return []
            docnos, scores = self.searcher.search(terms, k=k, alpha=alpha, beta=beta)
            return [(docid, float(score) / self.scale) for docid, score in zip(docnos, scores) if score > 0]

        if threads == 1 or len(queries) < 2:
            rankings = [one(query) for _, query in queries]
        else:
            from concurrent.futures import ThreadPoolExecutor

            with ThreadPoolExecutor(min(threads, len(queries))) as pool:
                rankings = list(pool.map(one, [query for _, query in queries]))
        return {qid: ranking for (qid, _), ranking in zip(queries, rankings)}
