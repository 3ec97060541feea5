"""The engine interface and its registry.

An engine answers encoded queries with a `Run` (core/hits.py): `search(qids, queries, k, threads)`.
What a query is depends on the engine (`query_kind`):

- `IMPACTS`: `{term: int}`, the integer impacts `encode queries` writes (Lucene impact, sharded,
  Seismic);
- `TEXT`: a query string analysed by the index's analyzer, or with `pretokenized` a `{term: int}`
  bag of boosts (augmented BM25 queries) searched with whitespace analysis (Lucene BM25);
- `VECTOR`: a float32 query vector (dense).

An engine also gives a document's text where its index or its source keeps it (`doc`), and the
terms that made a document match (`explain`). Engines do no query encoding: the query side
(`encoders/query.py`) and the API put the two together.

Each engine says what it takes on its class, and nothing else keeps tables keyed by engine name:
`query_kind`, `several_indexes` (a list of indexes: sharded), `run_tag` (what `search` writes as a
run's tag), `scores` (what a score is, as the service reports it: impact, tf or dense);
`check_query_side` refuses an encoder whose queries it cannot take (before any model loads), and
`check_encoder` a query encoder other than the one its documents were encoded with, where the index
records it (`document_side`).

What `search`, `Searcher`, `serve`, `bench` and the engine chooser need to know of an engine is
declared on its class too, never kept in a table by name elsewhere:
- `recognises(index, family)`: whether a folder (or address) is this engine's index, asked in
  `recognition_order` when no engine is named; `index_description` names it in the refusal of a
  folder no engine recognises;
- `is_exact(options)`: whether, with these options (search and build), it returns the exact top k
  of the scores it computes; `scores` says which scores those are (bench measures the recall of the
  approximate engines against an exact one of the same scores);
- `index_command(input, index, options)`: the command that builds its index from `encode corpus`
  shards (or, with `builds_from_text`, from the documents' text), as bench runs and times it; its
  `build_options` are the options of that build, each with its flag; `build_resumes` says whether a
  build interrupted there goes on; `index_suffix` the index path's suffix (a file index);
  `bench_options` the search options bench gives when a spec names none; `index_of` another
  engine whose index it searches (Pyserini's impact searcher searches `lucene`'s), built once.

A new engine is one folder (or a package of your own named in `LSR_PYSERINI_ENGINES`) whose
`__init__.py` registers a builder under its name with its class, `@register(NAME, EngineClass)`;
the builder's keyword arguments are the `engine_options` (and `--engine-option` keys) it reads.
docs/architecture.md ("Add an engine") shows a whole one.
"""
from __future__ import annotations

import json
import sys
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Callable

import numpy as np

from ..core.errors import InputError
from ..core.indexes import is_remote, recorded_input  # noqa: F401  (recorded_input: the engines')
from ..core.topics import IMPACTS, SAME_ENCODER, TEXT, VECTOR, encoder_argument, other_encoder_key, shown_setting  # noqa: F401
from ..core.writer import manifest_path
from ..core.hits import Run, TermMatch

ENGINES: dict[str, Callable[..., "Engine"]] = {}
ENGINE_CLASSES: dict[str, type["Engine"]] = {}
# what a query encoder and an index's documents must share for the query's terms to mean what the
# documents' do (the settings of the document side alone, lengths and cuts, may differ): the topics
# check's, one comparison for both
QUERY_SIDE = SAME_ENCODER


def register(name: str, kind: type["Engine"]):
    """Register an engine builder `(index, **options) -> Engine` under `name`, with its class (what
    the engine takes is declared there)."""
    def decorator(builder):
        ENGINES[name] = builder
        ENGINE_CLASSES[name] = kind
        return builder

    return decorator


def refuse_other_encoder(recorded: dict | None, settings: dict, where: str, keys: tuple[str, ...] = QUERY_SIDE) -> None:
    """One line when the query encoder's `settings` differ from the documents' `recorded` encoder in a
    setting of `keys` (nothing to check where an index records no encoder, or for queries given
    already encoded)."""
    if not recorded or settings.get("family") == ENCODED:
        return
    key = other_encoder_key(recorded, settings, keys)
    if key is not None:
        raise InputError(f"{where}: its documents were encoded with {shown_setting(recorded, key)}, not "
                         f"{shown_setting(settings, key)}: search it with the encoder of its documents"
                         f" (--encoder {encoder_argument(recorded)})")


def recognised_folder(index, kind) -> bool:
    """Whether `index` is one existing folder of output kind `kind` (an engine's `recognises`)."""
    if isinstance(index, (list, tuple)) or is_remote(index):
        return False
    return Path(index).is_dir() and kind.recognise(Path(index))


def index_command(command: str, input: Path, index: Path, options: dict, flags: dict[str, str]) -> list[str]:
    """`python -m lsr_pyserini.COMMAND index --input INPUT --index INDEX` with each build option's flag."""
    given = [str(part) for key, value in sorted(options.items()) if key in flags for part in (flags[key], value)]
    return [sys.executable, "-m", f"lsr_pyserini.{command}", "index", "--input", str(input), "--index", str(index),
            *given, "--quiet"]


ENCODED = "encoded"  # the family of queries given already encoded (`search --encoded`): nothing to check


class Engine(ABC):
    name: str = ""
    query_kind: str = IMPACTS   # impacts {term: int}, text (or a {term: boost} bag) or a vector
    several_indexes = False     # searches a list of indexes (sharded)
    run_tag = "Anserini"        # `search`'s default run tag (Pyserini's)
    scores = "impact"           # what a score is, as the service says: impact, tf (BM25) or dense
    # what the engine chooser and bench read (see the module's docstring)
    recognition_order = 50      # lower: asked first whether an index is this engine's
    index_description = ""      # "a PISA index (pisa.json)": named when no engine recognises a folder
    build_options: dict[str, str] = {}  # an option of the index build -> its flag in `index_command`
    build_resumes = False       # an interrupted build goes on when run again (else bench starts it afresh)
    builds_from_text = False    # the index is built from the documents' text (BM25), not the impact shards
    index_suffix = ""           # the index path's suffix (".db": a milvus-lite database file)
    bench_options: dict = {}    # search options bench gives when its spec names none
    index_of: str | None = None  # the engine whose index it searches (bench builds that one for both)

    @classmethod
    def recognises(cls, index, family: str | None) -> bool:
        """Whether `index` (a path, a list of paths or an address) is this engine's to search, for
        queries of an encoder of `family` (None: no encoder)."""
        return False

    @classmethod
    def is_exact(cls, options: dict) -> bool:
        """Whether the engine, with these search and build `options`, returns the exact top k of its scores."""
        return True

    @classmethod
    def index_command(cls, input: Path, index: Path, options: dict) -> list[str] | None:
        """argv of the command that builds the index at `index` from `input` with the build `options`
        (None: bench cannot build one)."""
        return None

    @classmethod
    def check_query_side(cls, index, settings: dict | None, encoder: str | None) -> None:
        """One line for an encoder (its resolved `settings`, None for none) whose queries this engine
        cannot take, checked before anything is loaded."""
        if isinstance(index, list) and not cls.several_indexes:
            raise InputError(f"engine {cls.name!r} searches one index; several shard indexes: engine 'sharded'")
        family = None if settings is None else settings.get("family")
        if cls.query_kind == IMPACTS:
            if settings is None:
                raise InputError(f"{index} is searched by engine {cls.name!r}: give the encoder of its documents' "
                                 f"impacts (--encoder, or encoder= in Python; e.g. splade-tiny)")
            if family == "bm25aug":
                raise InputError(f"encoder {encoder!r} is a bm25aug model: it searches a WordPiece BM25 index "
                                 f"(engine 'bm25'), not engine {cls.name!r}")
        elif cls.query_kind == VECTOR and settings is not None:
            raise InputError(f"engine {cls.name!r} encodes queries as its store's manifest says: give no encoder "
                             f"(encoder_options may set the query side's model, batch_size)")

    @abstractmethod
    def search(self, qids: list[str], queries: list, k: int, threads: int = 1) -> Run:
        """Each query's top k (docid, score), scores at a TREC run's precision; every qid is a key."""

    def explain(self, query, docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        """The matching terms of each document for one query, largest contribution first."""
        raise InputError(f"engine {self.name!r} has no term explanations")

    def doc(self, docid: str) -> str | None:
        """The document's text; None when the collection has no such document."""
        raise InputError(f"engine {self.name!r} keeps no document text")

    def docs(self, docids: list[str]) -> list[str | None]:
        """Several documents' texts at once (an engine may fetch them in one step)."""
        return [self.doc(docid) for docid in docids]

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        """Several documents' `{"contents"[, "title"]}`: their texts, and their titles alone where the
        stored records keep them (`title` absent otherwise); None for an id the collection lacks."""
        return [None if text is None else {"contents": text} for text in self.docs(docids)]

    def describe(self) -> dict:
        return {"engine": self.name}

    def document_side(self) -> dict | None:
        """The encoder the index's documents were encoded with, where the index records it."""
        return None

    def check_encoder(self, settings: dict) -> None:
        """InputError when the query encoder's `settings` cannot be the documents' encoder."""
        refuse_other_encoder(self.document_side(), settings, getattr(self, "path", self.name))

    def close(self) -> None:
        pass


def sorted_matches(matches) -> tuple[TermMatch, ...]:
    """Largest contribution first, ties by term, so that explanations are deterministic."""
    return tuple(sorted(matches, key=lambda match: (-match.contribution, match.term)))


class FromInputShards:
    """Texts and explanations from the `encode corpus` shards an engine's index was built from (its
    manifest's `input`), whose impacts are the ones it scores: Seismic, Milvus."""

    path: str
    _shards = None

    def input_folder(self) -> Path:
        raise NotImplementedError

    def document_side(self) -> dict | None:
        return shards_encoder(self.input_folder())

    @property
    def shards(self):
        if self._shards is None:
            folder = self.input_folder()
            if not folder.is_dir():
                raise InputError(f"{self.path}: the shards it was built from ({folder}) are not on this machine; "
                                 f"they hold its documents' text and impacts")
            from ..stores.documents import ShardDocuments

            self._shards = ShardDocuments(folder)
        return self._shards

    def explain_terms(self, terms: dict[str, float], docids: list[str]) -> dict[str, tuple[TermMatch, ...]]:
        """Each document's matches with the query `terms` that were searched: query weight x impact."""
        explained = {}
        for docid in docids:
            vector = self.shards.vector(docid)
            if vector is None:
                raise InputError(f"{self.path}: no document {docid!r}")
            explained[docid] = sorted_matches(
                TermMatch(term, float(weight), float(vector[term]), float(np.float32(weight) * np.float32(vector[term])))
                for term, weight in terms.items() if vector.get(term, 0) > 0)
        return explained

    def doc(self, docid: str) -> str | None:
        return self.shards.text(docid)

    def doc_fields(self, docids: list[str]) -> list[dict | None]:
        return [self.shards.document(docid) for docid in docids]


def shards_encoder(folder: Path | str | None) -> dict | None:
    """The encoder `encode corpus` recorded in the manifest of the shards in `folder` (None when there
    is no readable manifest)."""
    if not folder:
        return None
    return manifest_encoder(manifest_path(Path(str(folder))))


def manifest_encoder(manifest: Path | str) -> dict | None:
    """The encoder a shards' manifest file records (None when unreadable)."""
    try:
        settings = json.loads(Path(manifest).read_text())["settings"]
        encoder = settings["encoder"]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if not isinstance(encoder, dict):
        return None
    return {**encoder, "preset": settings["preset"]} if settings.get("preset") and "preset" not in encoder else encoder
