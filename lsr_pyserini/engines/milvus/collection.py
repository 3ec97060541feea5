"""A Milvus collection of the `encode corpus` shards (the `[milvus]` extra: pymilvus, milvus-lite):
the distributed engine for the same integer impacts Lucene indexes, and optionally a dense store's
vectors in a second field of the same entities.

    load_collection(VECTORS_DIR, uri, name, dense_store=None)     # resumable, keyed by docid
    MilvusCollection(uri, name).search([(qid, {term: impact})], k)  # {qid: [(docid, score)]}

`uri` is a milvus-lite database on this machine (a path, e.g. `indexes/scifact.milvus.db`) or a
Milvus server or cluster (`http://host:19530`, with `token` when it is secured); both are spoken to
through `pymilvus.MilvusClient`.

A collection holds one entity per document: `docid` (the primary key), `sparse` (the document's
impacts, term -> id by the collection's vocabulary) and, with a dense store, `dense`. What it was
built from is kept in the collection's own properties, so a cluster carries it too: `lsr.manifest`
(format, the input's encoder and quantisation, each shard's SHA-256, the dense store's identity,
counts), the vocabulary in `lsr.vocabulary.N` chunks (terms in first-seen order with their document
frequencies: term i is sparse id i), and `lsr.loaded` (documents loaded so far) until the load is
`complete`. A load first reads the whole input (checks, vocabulary), then upserts batches keyed by
docid, flushing each before recording its progress: an interrupted load resumes at the recorded
document, and a batch written twice is written over, so there are neither duplicates nor gaps. A
second load of other input into the same collection is refused; --overwrite replaces it.

Exact search: metric IP over the raw impacts (no `drop_ratio_search`) gives Lucene's impact scores
(integers, exact in float32 below 2^24); query terms are kept as Pyserini's LuceneImpactSearcher
keeps them (in the collection, idf = log(N / df) above `min_idf`), and ties are ordered by docid,
as Pyserini orders them, widening the search at the k-th position until every tied document is seen.
"""
from __future__ import annotations

import json
import logging
import re
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from ...core.errors import InputError
from ...core.hits import Ranking, top_k_with_ties
from ...core.indexes import is_remote
from ...core.presets import file_sha256
from ...stores.vectors import read_vectors, vector_bytes, vector_files

INSTALL = "pip install 'lsr-pyserini[milvus]'"
FORMAT = "lsr-pyserini-milvus-1"
DOCID, SPARSE, DENSE = "docid", "sparse", "dense"
MAX_DOCID_CHARS = 1024  # the primary key's VARCHAR length
MAX_SPARSE_ID = 2**32 - 2  # Milvus takes sparse ids in [0, 2^32 - 1)
EMPTY_ID = MAX_SPARSE_ID  # the one id of a document without impacts that has a dense vector: no query has it
MAX_TOP_K = 16384  # Milvus's largest limit
SPARSE_SEARCH = {"metric_type": "IP", "params": {}}  # exact; drop_ratio_search is applied to the query itself
ALGORITHMS = ("DAAT_MAXSCORE", "DAAT_WAND", "TAAT_NAIVE")  # the sparse inverted index's (Milvus 2.5+)
PROPERTY_CHARS = 60_000  # one property value of the vocabulary
BATCH_DOCUMENTS = 2000
COLLECTION_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,254}")
MANIFEST_KEY, LOADED_KEY, VOCABULARY_KEY = "lsr.manifest", "lsr.loaded", "lsr.vocabulary."
# what must be equal for a load to go on into an existing collection (counts follow from these)
IDENTITY = ("format", "encoder", "preset", "impact_scale", "shards", "dense_store")

log = logging.getLogger(__name__)


def require_milvus():
    """The `pymilvus` module (milvus-lite serves local files), or one line naming the extra."""
    try:
        import pymilvus
    except ImportError:
        raise InputError(f"the Milvus engine needs pymilvus and milvus-lite: {INSTALL}") from None
    logging.getLogger("pymilvus").setLevel(logging.CRITICAL)  # its RPC errors come back as one-line InputErrors
    # milvus-lite's embedded gRPC server logs a traceback for each call it does not implement
    # (pymilvus 3 asks it for AllocTimestamp, then does without): not the user's concern
    logging.getLogger("grpc._server").setLevel(logging.CRITICAL)
    return pymilvus


def is_milvus_database(path) -> bool:
    """Whether `path` is a milvus-lite database folder (told from its files; nothing imported)."""
    folder = Path(str(path))
    return (folder / "LOCK").is_file() and (folder / "collections").is_dir() and (folder / "databases").is_dir()


_lite_clients: dict[str, int] = {}  # milvus-lite database -> clients of this process using it


def connect(uri: str, token: str | None = None, timeout: float = 10.0):
    """A `MilvusClient` for `uri`; one line when it cannot be reached. A milvus-lite database is
    served from one process at a time (milvus-lite locks it): another process's is refused here."""
    pymilvus = require_milvus()
    uri = str(uri)
    local = None if is_remote(uri) else str(Path(uri).resolve())
    if local is not None:
        folder = Path(local).parent
        if not folder.is_dir():
            raise InputError(f"{uri}: no folder {folder} for the milvus-lite database")
        if not _has_lite():
            raise InputError(f"{uri}: a local Milvus database needs milvus-lite: {INSTALL}")
        if not _lite_clients.get(local) and _locked_elsewhere(Path(local)):
            raise InputError(f"{uri}: the milvus-lite database is open in another process (milvus-lite serves a "
                             f"database from one process at a time; a server serves many)")
    try:
        client = pymilvus.MilvusClient(uri=uri, token=token or "", timeout=timeout)
    except Exception as err:  # pymilvus raises MilvusException, grpc errors or OSError by transport
        raise InputError(f"{uri}: cannot reach Milvus ({_message(err)})") from None
    if local is not None:
        _lite_clients[local] = _lite_clients.get(local, 0) + 1
    return client


def disconnect(client, uri: str) -> None:
    """Close `client`; the last client of a milvus-lite database in this process also stops its
    embedded server, which frees the database for other processes."""
    client.close()
    if is_remote(uri):
        return
    local = str(Path(uri).resolve())
    _lite_clients[local] = _lite_clients.get(local, 1) - 1
    if _lite_clients[local] <= 0:
        _lite_clients.pop(local, None)
        from milvus_lite.server_manager import server_manager_instance

        server_manager_instance.release_server(local)


def _locked_elsewhere(database: Path) -> bool:
    lock = database / "LOCK"
    if not lock.is_file():
        return False
    import fcntl

    with open(lock, "rb") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
    return False


def _has_lite() -> bool:
    try:
        import milvus_lite  # noqa: F401
    except ImportError:
        return False
    return True


def _message(err: Exception) -> str:
    text = getattr(err, "message", None) or str(err) or type(err).__name__
    return " ".join(str(text).split())[:300]


def valid_collection_name(name: str) -> str:
    if not COLLECTION_NAME.fullmatch(str(name)):
        raise InputError(f"collection {name!r}: a letter or '_' first, then letters, digits and '_' (at most 255)")
    return str(name)


# -- what a collection is built from -------------------------------------------------------------

def input_identity(folder: Path, dense_store: str | None) -> dict:
    """The input's identity: encoder and quantisation (from the shards' manifest, when `encode
    corpus` wrote them), each shard file's SHA-256, and the dense store's."""
    from ...core.writer import manifest_path

    settings = {}
    shards_manifest = manifest_path(folder)
    if shards_manifest.is_file():
        try:
            settings = json.loads(shards_manifest.read_text(encoding="utf-8")).get("settings", {})
        except ValueError:
            raise InputError(f"{shards_manifest}: malformed JSON") from None
    encoder = {key: value for key, value in (settings.get("encoder") or {}).items() if key != "model_path"}
    identity = {
        "format": FORMAT, "encoder": encoder or None, "preset": settings.get("preset"),
        "impact_scale": settings.get("impact_scale"),
        "shards": {str(path.relative_to(folder)): file_sha256(path) for path in vector_files(folder)},
        "dense_store": None,
    }
    if dense_store is not None:
        from ...stores.dense import MANIFEST_FILE

        store = Path(dense_store)
        identity["dense_store"] = {"manifest_sha256": file_sha256(store / MANIFEST_FILE),
                                   "docids_sha256": file_sha256(store / "docids.txt")}
    return identity


class Vocabulary:
    """Terms numbered in first-seen order, with their document frequencies (postings > 0)."""

    def __init__(self, terms: list[str] | None = None, dfs: list[int] | None = None):
        self.terms = list(terms or [])
        self.dfs = list(dfs or [])
        self.ids = {term: i for i, term in enumerate(self.terms)}

    def add_document(self, vector: dict) -> None:
        ids = self.ids
        for term, impact in vector.items():
            if impact > 0:
                number = ids.get(term)
                if number is None:
                    if len(self.terms) > MAX_SPARSE_ID - 1:
                        raise InputError(f"term {term!r}: the vocabulary passes {MAX_SPARSE_ID:,} terms, the most "
                                         f"sparse ids a Milvus field takes")
                    number = ids[term] = len(self.terms)
                    self.terms.append(term)
                    self.dfs.append(0)
                self.dfs[number] += 1

    def to_properties(self) -> dict[str, str]:
        text = json.dumps([self.terms, self.dfs], ensure_ascii=False, separators=(",", ":"))
        chunks = [text[i:i + PROPERTY_CHARS] for i in range(0, len(text), PROPERTY_CHARS)] or [""]
        return {f"{VOCABULARY_KEY}{i}": chunk for i, chunk in enumerate(chunks)}

    @classmethod
    def from_properties(cls, properties: dict, where: str) -> "Vocabulary":
        keys = sorted((key for key in properties if key.startswith(VOCABULARY_KEY)),
                      key=lambda key: int(key[len(VOCABULARY_KEY):]))
        try:
            terms, dfs = json.loads("".join(properties[key] for key in keys))
        except (ValueError, TypeError):
            raise InputError(f"{where}: its vocabulary is damaged (load the collection again with --overwrite)") \
                from None
        return cls(terms, dfs)


# -- loading -------------------------------------------------------------------------------------

def _schema(client, pymilvus, dense_dim: int | None, algorithm: str | None = None):
    DataType = pymilvus.DataType
    schema = client.create_schema(auto_id=False, enable_dynamic_field=False)
    schema.add_field(DOCID, DataType.VARCHAR, is_primary=True, max_length=MAX_DOCID_CHARS)
    schema.add_field(SPARSE, DataType.SPARSE_FLOAT_VECTOR)
    if dense_dim:
        schema.add_field(DENSE, DataType.FLOAT_VECTOR, dim=dense_dim)
    indexes = client.prepare_index_params()
    indexes.add_index(SPARSE, index_type="SPARSE_INVERTED_INDEX", metric_type="IP",
                      params={"inverted_index_algo": algorithm} if algorithm else {})
    if dense_dim:
        indexes.add_index(DENSE, index_type="FLAT", metric_type="IP")
    return schema, indexes


def _properties(client, name: str) -> dict:
    return dict(client.describe_collection(name).get("properties") or {})


def differences(recorded: dict, identity: dict) -> list[str]:
    """The parts of the input identity in which a recorded collection differs."""
    return [key for key in IDENTITY if recorded.get(key) != identity.get(key)]


def load_collection(vectors: str, uri: str, name: str, dense_store: str | None = None, overwrite: bool = False,
                    token: str | None = None, batch_documents: int = BATCH_DOCUMENTS, progress=None,
                    algorithm: str | None = None, shards: int | None = None) -> dict:
    """Load the shards of `vectors` (and `dense_store`'s vectors) into collection `name` at `uri`;
    returns its manifest. Resumes an interrupted load of the same input; refuses other input unless
    `overwrite`. `progress`: a tqdm-like bar; its total is set to the documents once they are read.
    `algorithm`: the sparse index's `inverted_index_algo` (default: the server's; milvus-lite has
    only TAAT_NAIVE). `shards`: the collection's shards on a cluster (`num_shards`, default the
    server's; milvus-lite keeps one)."""
    name = valid_collection_name(name)
    folder = Path(vectors)
    vector_files(folder)
    if is_remote(uri):  # an unreachable server is told before the input is read (a local database is
        disconnect(connect(uri, token), uri)  # created only once the input has passed every check)
    started = time.perf_counter()
    store = _open_dense_store(dense_store)
    identity = input_identity(folder, dense_store)
    vocabulary, docids, empty = _read_input(folder, progress)
    if store is not None:
        _check_dense_docids(store, docids + empty, dense_store, vectors)
    manifest = {**identity, "input": str(folder.resolve()), "documents": len(docids) + len(empty),
                "entities": len(docids) + (len(empty) if store is not None else 0), "empty_documents": len(empty),
                "terms": len(vocabulary.terms),
                "dense_dim": store.index.d if store is not None else None,
                "dense_store_path": str(Path(dense_store).resolve()) if dense_store else None, "status": "loading"}
    client = connect(uri, token)
    try:
        loaded, recorded = _prepare_collection(client, uri, name, manifest, vocabulary, overwrite, algorithm, shards)
        if recorded.get("status") == "complete":
            return recorded
        if progress is not None:
            progress.reset(total=manifest["entities"])
            progress.unit, progress.unit_scale = "doc", False
            progress.set_description("loading into Milvus")
            progress.update(loaded)
        rows = _entities(folder, vocabulary, store, skip=loaded)
        while True:
            batch = [row for _, row in zip(range(batch_documents), rows)]
            if not batch:
                break
            _refused(uri, name, loaded, client.upsert, name, batch)
            _refused(uri, name, loaded, client.flush, name)  # durable before the progress says so
            loaded += len(batch)
            _refused(uri, name, loaded, client.alter_collection_properties, name, properties={LOADED_KEY: str(loaded)})
            if progress is not None:
                progress.update(len(batch))
        manifest["status"] = "complete"
        manifest["load_seconds"] = round(time.perf_counter() - started, 2)
        _refused(uri, name, loaded, client.alter_collection_properties, name,
                 properties={MANIFEST_KEY: json.dumps(manifest)})
    finally:
        disconnect(client, uri)
    return manifest


def _refused(uri: str, name: str, loaded: int, call, *args, **kwargs):
    """`call(*args, **kwargs)`; a refusal by Milvus as one line saying how much is loaded."""
    try:
        return call(*args, **kwargs)
    except Exception as err:
        raise InputError(f"{uri}: collection {name!r}: Milvus refused the load ({_message(err)}); {loaded:,} "
                         f"documents are loaded, run again to resume") from None


def _prepare_collection(client, uri: str, name: str, manifest: dict, vocabulary: Vocabulary,
                        overwrite: bool, algorithm: str | None, shards: int | None) -> tuple[int, dict]:
    """(documents already loaded, the collection's manifest): 0 and `manifest` for a new collection,
    created here; a manifest whose status is complete when the collection holds this input whole.
    Refuses a collection of other input unless `overwrite`."""
    if client.has_collection(name):
        properties = _properties(client, name)
        recorded = json.loads(properties.get(MANIFEST_KEY, "{}"))
        differing = differences(recorded, manifest)
        if overwrite:
            client.drop_collection(name)
        elif recorded.get("format") != FORMAT:
            raise InputError(f"{uri}: collection {name!r} was not loaded by this toolkit (--overwrite replaces it)")
        elif differing:
            raise InputError(f"{uri}: collection {name!r} holds other input (its {', '.join(differing)} differ); "
                             f"load it into another collection, or --overwrite to replace it")
        else:
            if recorded.get("status") == "complete":
                log.warning(f"{uri}: collection {name!r} already holds this input; nothing to load")
            return int(properties.get(LOADED_KEY, 0)), recorded
    schema, indexes = _schema(client, require_milvus(), manifest["dense_dim"], algorithm)
    _refused(uri, name, 0, client.create_collection, name, schema=schema, index_params=indexes,
             properties={MANIFEST_KEY: json.dumps(manifest), LOADED_KEY: "0", **vocabulary.to_properties()},
             **({"num_shards": shards} if shards else {}))
    return 0, manifest


def _open_dense_store(dense_store: str | None):
    if dense_store is None:
        return None
    from ...stores.dense import DenseStore

    return DenseStore(dense_store)


def _read_input(folder: Path, progress) -> tuple[Vocabulary, list[str], list[str]]:
    """Every document read and checked before anything is written: the vocabulary, the docids of
    the documents with an impact > 0, and of those without one."""
    vocabulary, docids, empty = Vocabulary(), [], []
    if progress is not None:
        progress.reset(total=vector_bytes(folder))
        progress.set_description("reading shards")
    for docid, vector in read_vectors(folder, progress):
        if len(docid) > MAX_DOCID_CHARS:
            raise InputError(f"{folder}: document id {docid[:40]!r}... is longer than {MAX_DOCID_CHARS} characters")
        vocabulary.add_document(vector)
        (docids if any(impact > 0 for impact in vector.values()) else empty).append(docid)
    if not docids:
        raise InputError(f"{folder}: no document has a non-zero impact")
    return vocabulary, docids, empty


def _check_dense_docids(store, docids: list[str], dense_store: str, vectors: str) -> None:
    stored, shards = set(store.docids), set(docids)
    if stored != shards:
        only_shards, only_store = sorted(shards - stored), sorted(stored - shards)
        example = (f"{only_shards[0]!r} is in the shards only" if only_shards else
                   f"{only_store[0]!r} is in the store only")
        raise InputError(f"{dense_store}: its documents are not those of {vectors} ({len(only_shards):,} in the "
                         f"shards only, {len(only_store):,} in the store only; {example})")


def _entities(folder: Path, vocabulary: Vocabulary, store, skip: int) -> Iterator[dict]:
    """The entities in load order, the first `skip` left out: the documents with an impact > 0,
    and with a dense store the others too (their sparse field holds EMPTY_ID, which no query has:
    Milvus takes no empty sparse vector, and their dense vectors are searched)."""
    ids = vocabulary.ids
    position = 0
    for docid, vector in read_vectors(folder):
        sparse = {ids[term]: float(impact) for term, impact in vector.items() if impact > 0}
        if not sparse:
            if store is None:
                continue
            sparse = {EMPTY_ID: 1.0}
        position += 1
        if position <= skip:
            continue
        row = {DOCID: docid, SPARSE: sparse}
        if store is not None:
            row[DENSE] = store.index.reconstruct(store.row[docid]).tolist()
        yield row


# -- searching -----------------------------------------------------------------------------------

class MilvusCollection:
    """A loaded collection opened for search: sparse impact queries, dense vectors, or both fused
    (`hybrid`). `drop_ratio_search` 0 (the default) is exact."""

    def __init__(self, uri: str, name: str, token: str | None = None, min_idf: float = 0,
                 drop_ratio_search: float = 0.0, replicas: int | None = None):
        self.uri, self.name = str(uri), valid_collection_name(name)
        self.min_idf, self.drop_ratio_search, self.replicas = min_idf, drop_ratio_search, replicas
        self.client = connect(uri, token)
        try:
            self._open()
        except BaseException:
            self.close()
            raise

    def _open(self) -> None:
        uri, name = self.uri, self.name
        if not self.client.has_collection(self.name):
            raise InputError(f"{uri}: no collection {name!r} (load one with `python -m lsr_pyserini.milvus index`)")
        properties = _properties(self.client, self.name)
        where = f"{uri}: collection {name!r}"
        try:
            self.manifest = json.loads(properties[MANIFEST_KEY])
        except (KeyError, ValueError):
            raise InputError(f"{where} was not loaded by this toolkit (no {MANIFEST_KEY})") from None
        if self.manifest.get("format") != FORMAT:
            raise InputError(f"{where}: not a collection this version reads ({self.manifest.get('format')!r})")
        if self.manifest.get("status") != "complete":
            raise InputError(f"{where}: its load was interrupted after {int(properties.get(LOADED_KEY, 0)):,} of "
                             f"{self.manifest.get('entities', 0):,} documents (run `milvus index` again to finish)")
        self.vocabulary = Vocabulary.from_properties(properties, where)
        if len(self.vocabulary.terms) != self.manifest.get("terms"):
            raise InputError(f"{where}: its vocabulary does not match its manifest (load it again with --overwrite)")
        self.documents = int(self.manifest["documents"])
        self.entities = int(self.manifest["entities"])
        dfs = np.asarray(self.vocabulary.dfs, dtype=np.float64)
        with np.errstate(divide="ignore"):
            idf = np.log(self.documents / dfs) if len(dfs) else dfs  # as Pyserini's LuceneImpactSearcher
        self.searchable = idf > self.min_idf
        self._call("loading the collection", self.client.load_collection, self.name,
                   **({"replica_number": self.replicas} if self.replicas else {}))

    @property
    def has_dense(self) -> bool:
        return bool(self.manifest.get("dense_dim"))

    def sparse_query(self, impacts: dict) -> dict[int, float]:
        """A query's terms as the collection's sparse ids (terms Lucene would drop left out), less
        the smallest `drop_ratio_search` of its weights, as Milvus defines that knob (Knowhere keeps
        the weights >= the one at position int(ratio x n) in ascending order). It is applied here,
        before the query is sent, so that milvus-lite (which takes only 0) and a cluster search alike."""
        ids, searchable = self.vocabulary.ids, self.searchable
        query = {}
        for term, value in impacts.items():
            number = ids.get(term)
            if number is not None and value > 0 and searchable[number]:
                query[number] = float(value)
        if self.drop_ratio_search and query:
            threshold = sorted(query.values())[int(self.drop_ratio_search * len(query))]
            query = {number: value for number, value in query.items() if value >= threshold}
        return query

    @staticmethod
    def _rankings(results) -> list[Ranking]:
        """(docid, score) lists of pymilvus's hits (the primary key under its field's name, or "id")."""
        return [[(str(hit[DOCID] if DOCID in hit else hit["id"]), float(hit["distance"])) for hit in hits]
                for hits in results]

    def _call(self, what: str, function, *args, **kwargs):
        try:
            return function(*args, **kwargs)
        except InputError:
            raise
        except Exception as err:
            raise InputError(f"{self.uri}: collection {self.name!r}: {what} failed ({_message(err)})") from None

    def search(self, queries: list[tuple[str, dict]], k: int, batch: int = 64) -> dict[str, Ranking]:
        """{qid: top k (docid, score)} of impact queries, score descending, ties by docid."""
        prepared = [(qid, self.sparse_query(impacts)) for qid, impacts in queries]
        run: dict[str, Ranking] = {qid: [] for qid, _ in prepared}
        live = [(qid, query) for qid, query in prepared if query]
        for start in range(0, len(live), batch):
            part = live[start:start + batch]

            def fetch(depth, vectors=[query for _, query in part]):
                return self._rankings(self._call("search", self.client.search, self.name, data=vectors,
                                                 anns_field=SPARSE, limit=depth, output_fields=[DOCID],
                                                 search_params=SPARSE_SEARCH))

            most = min(self.entities, MAX_TOP_K)
            for (qid, query), first in zip(part, fetch(min(k + 1, most))):
                run[qid] = top_k_with_ties(lambda depth, query=query: fetch(depth, [query])[0], k, most, first)
        return run

    def search_dense(self, queries: list[tuple[str, np.ndarray]], k: int) -> dict[str, Ranking]:
        """{qid: top k (docid, inner product)} of dense query vectors (the `dense` field)."""
        self._need_dense()
        run = {}
        for qid, vector in queries:
            results = self._call("dense search", self.client.search, self.name, data=[np.asarray(vector).tolist()],
                                 anns_field=DENSE, limit=min(k, self.entities, MAX_TOP_K), output_fields=[DOCID],
                                 search_params={"metric_type": "IP"})
            run[qid] = self._rankings(results)[0]
        return run

    def hybrid(self, queries: list[tuple[str, dict, np.ndarray]], k: int, depth: int, rrf_k: float = 60) -> \
            dict[str, Ranking]:
        """{qid: top k} of Milvus's `hybrid_search`: the sparse and the dense field's top `depth`,
        fused by reciprocal rank fusion (RRFRanker(rrf_k): sum of 1 / (rrf_k + rank), rank from 1)."""
        self._need_dense()
        pymilvus = require_milvus()
        run = {}
        depth = min(depth, self.entities, MAX_TOP_K)
        for qid, impacts, vector in queries:
            sparse = self.sparse_query(impacts)
            requests = [pymilvus.AnnSearchRequest([np.asarray(vector).tolist()], DENSE, {"metric_type": "IP"},
                                                  limit=depth)]
            if sparse:
                requests.insert(0, pymilvus.AnnSearchRequest([sparse], SPARSE, SPARSE_SEARCH, limit=depth))
            results = self._call("hybrid search", self.client.hybrid_search, self.name, requests,
                                 pymilvus.RRFRanker(rrf_k), limit=min(k, MAX_TOP_K), output_fields=[DOCID])
            run[qid] = self._rankings(results)[0]
        return run

    def _need_dense(self) -> None:
        if not self.has_dense:
            raise InputError(f"{self.uri}: collection {self.name!r} has no dense field (load it with --dense-store)")

    def size_bytes(self) -> int | None:
        """Bytes on disk of a milvus-lite database (None for a server: its storage is the cluster's)."""
        if is_remote(self.uri):
            return None
        from ...core.outputs import folder_bytes

        path = Path(self.uri)
        return folder_bytes(path) if path.is_dir() else path.stat().st_size

    def close(self) -> None:
        if self.client is not None:
            disconnect(self.client, self.uri)
            self.client = None
