"""A PISA index (the engine inside `pyterrier-pisa`'s wheel, the `[pisa]` extra) of the
JsonVectorCollection shards Lucene indexes: the same integer impacts, the same scores, PISA's
compressed posting lists and dynamic pruning (MaxScore, WAND and their block-max forms).

    build_pisa_index(VECTORS_DIR, INDEX_DIR, PisaBuild(...))      # INDEX_DIR.partial/ -> .building/ -> INDEX_DIR
    PisaIndex(INDEX_DIR).search([(qid, {term: impact})], k)    # {qid: [(docid, score)]}

Building: each shard is read into one part of INDEX_DIR.partial/ (resumable: an interrupted build
keeps its finished parts); then the parts become PISA's uncompressed collection (`inv.docs`,
`inv.freqs`, `inv.sizes`, `fwd.terms`, `fwd.documents` and their binary lexicons), which PISA
compresses (`--encoding`, block_simdbp by default) with its block-max score bounds
(`quantized.q0.bmw.BLOCK`) in INDEX_DIR.building/, renamed to INDEX_DIR when complete; the
manifest `pisa.json` records the shards' manifest (their encoder), the settings and counts.

Scores: PISA's `quantized` scorer with the query weighted by term count sums query impact x
document impact, the Lucene impact score (integers, exact in float32 below 2^24). Ties: documents
are numbered in the order of their docids' UTF-8 bytes, and PISA orders equal scores by that
number, which is Anserini's order; at the k-th position the search is widened until every
document tied with it is seen (its heap keeps any of them). MaxScore, block-max MaxScore, WAND,
block-max WAND and exhaustive OR are exact; the conjunctive algorithms (`ranked_and`,
`block_max_ranked_and`) return only documents holding every query term.

The library's own module (`_pisathon`) is loaded without `pyterrier_pisa/__init__.py`, which
imports PyTerrier (a second of start-up and nothing this engine uses).
"""
from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import sys
import tempfile
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ...core.errors import InputError
from ...core.indexes import input_location, shards_encoder_record
from ...core.hits import Ranking, top_k_with_ties
from ...core.outputs import atomic_write
from ...stores.base import ShardedStoreWriter, range_positions, read_manifest, store_kind, write_manifest
from ...stores.vectors import check_shards, read_vector_file, vector_files

LOG = logging.getLogger(__name__)
MANIFEST = "pisa.json"
FORMAT = "lsr-pyserini-pisa-1"
INSTALL = "pip install 'lsr-pyserini[pisa]'"
SCORER = "quantized"  # score = sum of query weight x stored integer (the impact)
EXACT_ALGORITHMS = ("maxscore", "block_max_maxscore", "block_max_wand", "wand", "ranked_or")
CONJUNCTIVE_ALGORITHMS = ("ranked_and", "block_max_ranked_and")
ALGORITHMS = EXACT_ALGORITHMS + CONJUNCTIVE_ALGORITHMS
DEFAULT_ALGORITHM = "maxscore"
ENCODINGS = ("block_simdbp", "block_optpfor", "block_varintg8iu", "block_streamvbyte", "block_maskedvbyte",
             "block_interpolative", "block_qmx", "block_varintgb", "block_simple8b", "block_simple16",
             "ef", "single", "pefuniform", "pefopt")
MAX_IMPACT = 2**32 - 1  # PISA stores term frequencies as uint32

PISA_INDEX = store_kind("a PISA index (with pisa.json)", MANIFEST, lambda manifest: manifest.get("format") == FORMAT)


def require_pisa():
    """PISA's Python module (`pyterrier_pisa._pisathon`), or one line naming the extra."""
    name = "pyterrier_pisa._pisathon"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.find_spec("pyterrier_pisa")
    locations = list(spec.submodule_search_locations or []) if spec else []
    libraries = [path for folder in locations for path in sorted(Path(folder).glob("_pisathon*.so"))]
    if not libraries:
        raise InputError(f"the PISA engine needs pyterrier-pisa: {INSTALL}")
    loader = importlib.machinery.ExtensionFileLoader(name, str(libraries[0]))
    module = importlib.util.module_from_spec(importlib.util.spec_from_file_location(name, libraries[0], loader=loader))
    try:
        loader.exec_module(module)
    except ImportError as err:  # its shared libraries (tbb) missing
        raise InputError(f"pyterrier-pisa does not load ({err}): {INSTALL}") from None
    sys.modules[name] = module
    return module


@dataclass(frozen=True)
class PisaBuild:
    """Build settings: PISA's posting-list `encoding` and the `block_size` of its block-max bounds."""

    encoding: str = "block_simdbp"
    block_size: int = 64


def index_files(block_size: int, encoding: str) -> tuple[str, str]:
    """The names of PISA's block-max data and compressed index in the folder (as PISA's Python
    binding names them, so that it finds them built)."""
    wand = f"{SCORER}.q0.bmw.{block_size}"
    return wand, f"{wand}.{encoding}"


# -- building ------------------------------------------------------------------------------------

class PisaIndexWriter(ShardedStoreWriter):
    output_kind = PISA_INDEX


def _read_part(path: Path, seen: set[str], progress, done: int) -> dict[str, np.ndarray]:
    """One shard as arrays: docids, postings per document, its terms and (term, impact) postings."""
    docids, lengths, terms_of, impacts = [], [], [], []
    vocabulary: dict[str, int] = {}
    number = vocabulary.__getitem__
    for docid, vector in read_vector_file(path, seen, progress, done):
        weights = np.fromiter(vector.values(), dtype=np.float64, count=len(vector))
        try:
            ids = np.fromiter(map(number, vector), dtype=np.int32, count=len(vector))
        except KeyError:
            for term in vector:
                vocabulary.setdefault(term, len(vocabulary))
            ids = np.fromiter(map(number, vector), dtype=np.int32, count=len(vector))
        keep = weights > 0
        if not np.array_equal(weights[keep], np.round(weights[keep])) or (len(weights) and weights.max() > MAX_IMPACT):
            raise InputError(f"{path}: document {docid!r} has impacts that are not integers in [0, 2^32): "
                             f"PISA indexes the integer impacts `encode corpus` writes")
        docids.append(docid)
        lengths.append(int(keep.sum()))
        terms_of.append(ids[keep])
        impacts.append(weights[keep].astype(np.uint32))
    terms = [None] * len(vocabulary)
    for term, position in vocabulary.items():
        terms[position] = term
    return {"docids": np.array(docids, dtype=str), "lengths": np.array(lengths, dtype=np.int64),
            "terms": np.array(terms, dtype=str),
            "term_ids": np.concatenate(terms_of) if terms_of else np.zeros(0, np.int32),
            "impacts": np.concatenate(impacts) if impacts else np.zeros(0, np.uint32)}


def build_pisa_index(vectors: str, index: str, build: PisaBuild = PisaBuild(), overwrite: bool = False,
                     progress=None) -> dict:
    """Build the PISA index of the shards in `vectors` into `index`; returns its manifest. Resumable:
    shards read before an interruption are not read again. `progress`: a tqdm-like bar over the
    shards' bytes (`vector_bytes`)."""
    if build.encoding not in ENCODINGS:
        raise InputError(f"encoding {build.encoding!r}: expected one of {', '.join(ENCODINGS)}")
    if build.block_size < 1:
        raise InputError(f"block_size {build.block_size}: expected a positive number")
    pisa = require_pisa()
    folder = Path(vectors)
    shards = check_shards(folder)  # bad input before claiming the index
    files = vector_files(folder)
    started = time.perf_counter()
    # what a resume is keyed by: each shard's name, size and modification time (a shard rewritten in
    # place, even to the same size, is other input: its finished part is not kept)
    writer = PisaIndexWriter(index, {"input": str(folder.resolve()), "files": [str(f.relative_to(folder)) for f in files],
                                     "bytes": [f.stat().st_size for f in files],
                                     "mtimes_ns": [f.stat().st_mtime_ns for f in files]}, overwrite)
    done = 0
    seen: set[str] = set()  # docids of the shards read in this run (the rest are checked at the end)
    for number, path in enumerate(files):
        if not writer.is_complete(number):
            try:
                part = _read_part(path, seen, progress, done)
            except InputError:
                if not writer.documents_done():  # bad input, nothing kept: leave nothing behind
                    writer.claim.drop_scratch(".partial")
                    writer.claim.release()
                raise
            writer.write_part(number, **part)
        done += path.stat().st_size
        if progress is not None:
            progress.update(done - progress.n)
    if progress is not None:
        progress.set_description(f"read {writer.documents_done():,} documents; PISA compresses them")
    building = writer.begin()
    counts = _write_collection([np.load(part) for part in writer.parts()], building, folder)
    pisa.build_binlex(str(building / "fwd.terms"), str(building / "fwd.termlex"))
    pisa.build_binlex(str(building / "fwd.documents"), str(building / "fwd.doclex"))
    with native_output_logged():  # PISA's C++ logs and progress bars, written to the process's stderr
        context = pisa.RetrievalContext()
        pisa.prepare_index(context, str(building), build.encoding, SCORER, "", block_size=build.block_size)
        del context
    for scratch in ("inv.docs", "inv.freqs"):  # compressed now; the uncompressed copy is the largest file
        (building / scratch).unlink()
    manifest = {
        "format": FORMAT, **input_location(folder, index), **counts,
        "encoder": shards_encoder_record(shards),
        "input_manifest": None if shards is None else {k: v for k, v in shards.items() if k != "environment"},
        "build": asdict(build), "pisa_version": _pisa_version(),
        "build_seconds": round(time.perf_counter() - started, 2),
    }
    write_manifest(building / MANIFEST, manifest)
    writer.publish(building)
    return manifest


@contextmanager
def native_output_logged():
    """What native code writes to stderr meanwhile goes to this module's log (debug level) instead
    of the terminal: the library prints nothing."""
    with tempfile.TemporaryFile() as captured:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(captured.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            os.close(saved)
            captured.seek(0)
            for line in captured.read().decode("utf-8", "replace").replace("\r", "\n").splitlines():
                if line.strip():
                    LOG.debug("PISA: %s", line)


def _write_collection(parts: list, folder: Path, source: Path) -> dict:
    """PISA's uncompressed collection from the parts: documents numbered in UTF-8 byte order of their
    docids (Anserini's tie order), terms in byte order (PISA's lexicons are searched by bisection)."""
    docids = np.concatenate([part["docids"] for part in parts])
    lengths = np.concatenate([part["lengths"] for part in parts])
    nonempty = lengths > 0  # a document without impacts matches no query (as in Lucene)
    keys = np.char.encode(docids, "utf-8")
    order = np.argsort(keys, kind="stable")
    duplicate = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    if len(duplicate):
        raise InputError(f"{source}: document id {str(docids[order][duplicate[0]])!r} appears twice")
    kept = order[nonempty[order]]  # document number -> position in the parts
    numbers = np.full(len(docids), -1, dtype=np.int64)
    numbers[kept] = np.arange(len(kept))
    if not len(kept):
        raise InputError(f"{source}: no document has a non-zero impact")
    vocabulary = np.unique(np.concatenate([part["terms"] for part in parts]))
    term_of, document_of, impact_of = [], [], []
    first = 0
    for part in parts:
        local = np.searchsorted(vocabulary, part["terms"])
        term_of.append(local[part["term_ids"]].astype(np.int32))
        part_numbers = numbers[first:first + len(part["lengths"])]
        document_of.append(np.repeat(part_numbers, part["lengths"]).astype(np.int32))
        impact_of.append(part["impacts"])
        first += len(part["lengths"])
    terms = np.concatenate(term_of)
    documents = np.concatenate(document_of)
    impacts = np.concatenate(impact_of)
    del term_of, document_of, impact_of
    postings = np.lexsort((documents, terms))
    terms, documents, impacts = terms[postings], documents[postings].astype(np.uint32), impacts[postings]
    del postings
    frequencies = np.bincount(terms, minlength=len(vocabulary)).astype(np.uint32)
    # a sequence is its length then its values (uint32): .docs opens with the sequence [documents]
    starts = np.cumsum(frequencies.astype(np.int64) + 1) - (frequencies.astype(np.int64) + 1)
    positions = range_positions(starts + 1, frequencies.astype(np.int64))
    for name, values, header in (("inv.docs", documents, [1, len(kept)]), ("inv.freqs", impacts, [])):
        sequences = np.empty(len(values) + len(vocabulary), dtype=np.uint32)
        sequences[starts] = frequencies
        sequences[positions] = values
        with open(folder / name, "wb") as handle:
            handle.write(np.asarray(header, dtype=np.uint32).tobytes())
            handle.write(sequences.tobytes())
        del sequences
    sizes = np.bincount(documents, weights=impacts, minlength=len(kept)).astype(np.uint32)
    with open(folder / "inv.sizes", "wb") as handle:
        handle.write(np.asarray([len(kept)], dtype=np.uint32).tobytes() + sizes.tobytes())
    atomic_write(folder / "fwd.terms", (f"{term}\n" for term in vocabulary.tolist()))
    atomic_write(folder / "fwd.documents", (f"{docid}\n" for docid in docids[kept].tolist()))
    return {"documents": int(len(kept)), "empty_documents": int((~nonempty).sum()), "terms": int(len(vocabulary)),
            "nonzeros": int(len(impacts)), "longest_posting_list": int(frequencies.max()),
            "largest_impact": int(impacts.max())}


def _pisa_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("pyterrier-pisa")
    except PackageNotFoundError:
        return "unknown"


# -- searching -----------------------------------------------------------------------------------

class PisaIndex:
    """Top-k search of a PISA index with {term: impact} queries (exact with the default algorithm;
    see the module's description). Safe to share between threads: PISA's index is only read."""

    def __init__(self, index: str, algorithm: str = DEFAULT_ALGORITHM):
        if algorithm not in ALGORITHMS:
            raise InputError(f"algorithm {algorithm!r}: expected one of {', '.join(ALGORITHMS)}")
        self.algorithm = algorithm
        self.path = Path(index)
        if not self.path.is_dir():
            raise InputError(f"{index}: no such PISA index folder")
        self.manifest = read_manifest(self.path / MANIFEST, f"{index}: not a PISA index (no {MANIFEST}; build it "
                                                            f"with `python -m lsr_pyserini.pisa index`)")
        if self.manifest.get("format") != FORMAT:
            raise InputError(f"{self.path / MANIFEST}: not a manifest this version reads")
        self.pisa = require_pisa()
        build = PisaBuild(**self.manifest["build"])
        for name in (*index_files(build.block_size, build.encoding), "fwd.termlex", "fwd.doclex"):
            if not (self.path / name).is_file():
                raise InputError(f"{self.path / name}: missing (an incomplete PISA index: build it again)")
        self.context = self.pisa.RetrievalContext()
        try:
            self.pisa.prepare_index(self.context, str(self.path), build.encoding, SCORER, "", block_size=build.block_size)
        except Exception as err:  # PISA raises its own errors for a damaged file
            raise InputError(f"{self.path}: PISA cannot load it ({type(err).__name__}: {err})") from None
        self.documents = int(self.manifest["documents"])
        self.exact = algorithm in EXACT_ALGORITHMS
        self._vocabulary: frozenset[str] | None = None

    @property
    def vocabulary(self) -> frozenset[str]:
        """The index's terms (read on first use: explanations need them, searching does not)."""
        if self._vocabulary is None:
            self._vocabulary = frozenset((self.path / "fwd.terms").read_text(encoding="utf-8").split("\n")[:-1])
        return self._vocabulary

    def _retrieve(self, queries: list[dict], depth: int, threads: int) -> list[Ranking]:
        """PISA's top `depth` of each query, in its order (score descending, ties by docid bytes)."""
        size = len(queries) * depth
        qidxs = np.empty(size, dtype=np.int32)
        docnos = np.empty(size, dtype=object)
        ranks = np.empty(size, dtype=np.int32)
        scores = np.empty(size, dtype=np.float32)
        inputs = [(i, {term: float(weight) for term, weight in query.items() if weight > 0})
                  for i, query in enumerate(queries)]
        found = self.pisa.retrieve(self.context, self.algorithm, inputs, k=depth, threads=threads, pretokenised=1,
                                   query_weighted=1, result_qidxs=qidxs, result_docnos=docnos,
                                   result_ranks=ranks, result_scores=scores)
        # each query's hits are contiguous; with several threads the queries come in any order
        counts = np.bincount(qidxs[:found], minlength=len(queries))
        firsts = np.full(len(queries), 0, dtype=np.int64)
        if found:
            changes = np.flatnonzero(np.concatenate(([True], qidxs[1:found] != qidxs[:found - 1])))
            firsts[qidxs[changes]] = changes
        doc_list, score_list = docnos[:found].tolist(), scores[:found].tolist()
        return [list(zip(doc_list[start:start + count], score_list[start:start + count]))
                for start, count in zip(firsts.tolist(), counts.tolist())]

    def search(self, queries: list[tuple[str, dict]], k: int, threads: int = 1) -> dict[str, Ranking]:
        """{qid: ranking} in query order: (docid, score), score descending, ties by docid. With
        `threads` > 1 PISA spreads the queries over that many threads (the GIL released)."""
        if not queries:
            return {}
        depth = min(k + 1, self.documents)
        firsts = self._retrieve([impacts for _, impacts in queries], depth, threads)
        run = {}
        for (qid, impacts), first in zip(queries, firsts):
            if len(first) <= k or first[k - 1][1] != first[k][1]:
                run[qid] = [hit for hit in first[:k] if hit[1] > 0]  # PISA's order is Anserini's
            else:  # a tie across the cut-off: the tied documents PISA's heap kept are any of them
                run[qid] = top_k_with_ties(lambda more, q=impacts: self._retrieve([q], more, 1)[0], k,
                                           self.documents, first)
        return run
