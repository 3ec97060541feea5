"""What the service serves and its bounds: one `IndexSpec` per served index (the keys of
`Searcher`) and one `ServiceConfig` (bind, keys, micro-batching and request limits), from flags or
from a YAML file:

    indexes:
      scifact:                       # the name clients use: /v1/indexes/scifact/search
        index: indexes/scifact-splade-tiny
        encoder: splade-tiny
        engine: lucene               # optional: chosen from the index as Searcher does
        qrels: qrels/scifact-test.txt  # optional: the MCP tools get_qrels and eval_hits read it
      scifact-bm25:
        index: indexes/scifact-bm25
    service:                         # optional; every key has a default (SERVICE_DEFAULTS)
      port: 8000
      max_batch: 32

Only configured indexes are served: no request can name a filesystem path.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ..core.errors import InputError
from ..core.indexes import is_remote
from ..core.options import checked, int_in, non_negative_float, positive_int
from .schemas import INDEX_NAME_CHARS

INDEX_KEYS = ("index", "encoder", "engine", "engine_options", "reranker", "store", "interpolate", "fusion",
              "candidates", "reranker_options", "encoder_options", "device", "dtype")
SERVICE_ONLY_KEYS = ("qrels",)  # an index entry's keys that are the service's, not Searcher's
NAME = re.compile(rf"[A-Za-z0-9][A-Za-z0-9._-]{{0,{INDEX_NAME_CHARS - 1}}}")
# /v1/indexes/... are the Pyserini 1.6 routes: an index of this name would be their twin under /v1/{index}/...
RESERVED_NAMES = ("indexes",)
LOOPBACK = ("127.0.0.1", "localhost", "::1")


@dataclass(frozen=True)
class IndexSpec:
    """One served index: its name, the `Searcher` keyword arguments that open it and the TREC
    qrels file that judges its queries (None: none configured)."""

    name: str
    searcher: dict
    qrels: str | None = None

    @property
    def path(self) -> str:
        return str(self.searcher["index"])


@dataclass(frozen=True)
class ServiceConfig:
    indexes: tuple[IndexSpec, ...]
    host: str = "127.0.0.1"
    port: int = 8000
    api_key_file: str | None = None
    insecure_no_auth: bool = False
    cors_origins: tuple[str, ...] = ()
    threads: int = 2  # the engine's threads for one micro-batch
    encoder_threads: int = 1  # torch's threads: one query per forward pass runs best alone beside the engine
    max_batch: int = 32  # queries searched together
    max_wait_ms: float = 0.0  # how long a batch waits for more queries once one arrived (0: takes what is queued)
    queue_size: int = 256  # queries waiting per index; beyond it 503 with Retry-After
    max_hits: int = 1000
    max_query_chars: int = 4096
    max_batch_queries: int = 64  # queries in one /batch request
    max_body_bytes: int = 1 << 20
    mcp: bool = True  # MCP tools at /mcp
    api_key: str | None = field(default=None, repr=False)

    def index(self, name: str) -> IndexSpec:
        for spec in self.indexes:
            if spec.name == name:
                return spec
        raise KeyError(name)


NUMBERS = {"port": int_in(0, 65535), "threads": positive_int, "encoder_threads": positive_int, "max_batch": positive_int,
           "max_wait_ms": non_negative_float, "queue_size": positive_int, "max_hits": positive_int,
           "max_query_chars": positive_int, "max_batch_queries": positive_int, "max_body_bytes": int_in(64)}
SERVICE_KEYS = tuple(f.name for f in fields(ServiceConfig) if f.name not in ("indexes", "api_key"))


def index_spec(name: str, settings: dict, where: str) -> IndexSpec:
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise InputError(f"{where}: index name {name!r}: letters, digits, '.', '_' and '-' only (at most {INDEX_NAME_CHARS})")
    if name in RESERVED_NAMES:
        raise InputError(f"{where}: index name {name!r} is taken by the routes /v1/{name}/...: choose another name")
    known = INDEX_KEYS + SERVICE_ONLY_KEYS
    if not isinstance(settings, dict):
        raise InputError(f"{where}: index {name!r}: expected a mapping of {', '.join(known)}")
    unknown = sorted(set(settings) - set(known))
    if unknown:
        raise InputError(f"{where}: index {name!r}: unknown key {unknown[0]!r} (known: {', '.join(known)})")
    if not settings.get("index"):
        raise InputError(f"{where}: index {name!r}: 'index' (the index folder) is required")
    qrels = settings.get("qrels")
    if qrels is not None and (not isinstance(qrels, str) or not qrels):
        raise InputError(f"{where}: index {name!r}: 'qrels' must be the path of a TREC qrels file")
    return IndexSpec(name, {key: value for key, value in settings.items()
                            if value is not None and key not in SERVICE_ONLY_KEYS}, qrels)


def read_config(path: str) -> tuple[list[IndexSpec], dict]:
    """(index specs, service settings) of a YAML config; paths relative to the file's folder."""
    import yaml

    file = Path(path)
    try:
        loaded = yaml.safe_load(file.read_text())
    except FileNotFoundError:
        raise InputError(f"{path}: no such config file") from None
    except yaml.YAMLError as err:
        raise InputError(f"{path}: not YAML ({str(err).splitlines()[0]})") from None
    if not isinstance(loaded, dict) or not isinstance(loaded.get("indexes"), dict) or not loaded["indexes"]:
        raise InputError(f"{path}: expected 'indexes:' mapping names to index settings")
    unknown = sorted(set(loaded) - {"indexes", "service"})
    if unknown:
        raise InputError(f"{path}: unknown top-level key {unknown[0]!r} (known: indexes, service)")
    specs = []
    for name, settings in loaded["indexes"].items():
        spec = index_spec(str(name), settings, path)
        spec.searcher["index"] = ",".join(part if is_remote(part) else str(file.parent / part)
                                          for part in str(spec.searcher["index"]).split(","))
        if spec.searcher.get("store"):
            spec.searcher["store"] = str(file.parent / spec.searcher["store"])
        if spec.qrels:
            spec = replace(spec, qrels=str(file.parent / spec.qrels))
        specs.append(spec)
    service = loaded.get("service") or {}
    if not isinstance(service, dict):
        raise InputError(f"{path}: 'service' must be a mapping")
    return specs, service


def build_config(specs: list[IndexSpec], settings: dict) -> ServiceConfig:
    """The checked config: numbers in range, names unique, folders present, the bind rule applied
    (any address but loopback needs an API key file, or insecure_no_auth said explicitly)."""
    unknown = sorted(set(settings) - set(SERVICE_KEYS))
    if unknown:
        raise InputError(f"service: unknown key {unknown[0]!r} (known: {', '.join(SERVICE_KEYS)})")
    names = [spec.name for spec in specs]
    if len(set(names)) < len(names):
        raise InputError(f"index name {next(n for n in names if names.count(n) > 1)!r} given twice")
    values = {key: checked(key, value, NUMBERS[key]) if key in NUMBERS else value for key, value in settings.items()}
    if "cors_origins" in values:
        origins = values["cors_origins"]
        values["cors_origins"] = tuple([origins] if isinstance(origins, str) else origins or ())
    for spec in specs:
        for path in spec.path.split(","):
            if not Path(path).exists() and not is_remote(path):  # a Milvus server's address is checked on loading
                raise InputError(f"index {spec.name!r}: {path}: no such index folder")
        if spec.qrels is not None and not Path(spec.qrels).is_file():
            raise InputError(f"index {spec.name!r}: qrels {spec.qrels}: no such file")
    config = ServiceConfig(indexes=tuple(specs), **values)
    if config.api_key_file:
        try:
            key = Path(config.api_key_file).read_text().strip()
        except OSError as err:
            raise InputError(f"--api-key-file {config.api_key_file}: {err.strerror}") from None
        if len(key) < 16:
            raise InputError(f"--api-key-file {config.api_key_file}: the key must be at least 16 characters")
        config = replace(config, api_key=key)
    if config.host not in LOOPBACK and config.api_key is None and not config.insecure_no_auth:
        raise InputError(f"--host {config.host}: binding beyond loopback needs --api-key-file F "
                         f"(or --insecure-no-auth to serve without keys)")
    return config
