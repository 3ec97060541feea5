"""PyTerrier transformers over this toolkit (the `[pyterrier]` extra): its encoders, engines,
re-rankers and fusion as steps of PyTerrier pipelines, compared with `pt.Experiment`.

    import pyterrier as pt
    from lsr_pyserini import pyterrier as lsr

    bm25 = lsr.Retriever("indexes/scifact-bm25")
    splade = lsr.Retriever("indexes/scifact-splade-tiny", encoder="splade-tiny")
    dense = lsr.Reranker("dense", store="stores/scifact-minilm", interpolate=0.5)
    pt.Experiment([bm25, splade, splade >> dense], topics, qrels, eval_metrics=["nDCG@10", "R@100"])

    lsr.doc_encoder("splade-tiny") >> pyterrier_pisa.PisaIndex(path, stemmer="none").toks_indexer(scale=1)
    lsr.query_encoder("splade-tiny") >> pyterrier_pisa.PisaIndex(path).quantized(toks_scale=1)

- `doc_encoder(encoder)` adds `toks` ({term: integer impact}, what `encode corpus` writes) to a
  frame of documents (`docno` and `text`, or the `text_field` given); `query_encoder(encoder)` adds
  `query_toks` ({term: integer impact}, what `encode queries` writes) to a frame of queries: the
  column names pyterrier-splade uses, so pyterrier-pisa's and Terrier's pretokenised indexers and
  retrievers take them as they are (their scale: 1, the impacts being integers already).
- `Indexer(index, encoder="splade-tiny", engine="lucene", **build_options).index(documents)`: a
  frame of documents (`docno`, `text`) to an index of any engine with an index command, encoded
  as `encode corpus` encodes and built by the engine's own declared `index_command`.
- `Retriever(index, encoder=None, engine=None, k=1000, **searcher_options)`: any engine of
  `lsr_pyserini.Searcher` (the same arguments); topics (`qid`, `query`) in, `qid, query, docno,
  score, rank` out, the frame's queries searched in one `batch_search`. A frame with `query_toks`
  (from `query_encoder`) is searched with those impacts as they are.
- `Reranker(name, store, interpolate=None, fusion="minmax", **options)`: a ranking (`qid`, `query`,
  `docno`, `score`) re-scored by a registered re-ranker from its store, fused with the ranking's
  own scores when `interpolate` is a weight.
- `Fusion(a, b, weights=None, method="rrf")`: two pipelines' rankings of the same topics fused
  (`rrf`, `minmax` or `zscore`, as `python -m lsr_pyserini.fuse`).

Every transformer refuses a wrong argument in one line naming it (core/arguments.py, as the
commands refuse a flag), a frame that lacks a column it reads in one line naming the column and
itself, and returns an empty frame with its output columns for an empty frame.
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from ..core.arguments import choice_arg, name_arg, number_arg, path_arg, sequence_of_numbers
from ..core.errors import InputError
from ..core.options import finite_float, positive_int, probability

INSTALL = "pip install 'lsr-pyserini[pyterrier]'"

try:
    import pandas as pd
    import pyterrier as pt
except ImportError:  # pragma: no cover - the extra is pinned in the tested set
    raise ImportError(f"lsr_pyserini.pyterrier needs PyTerrier: {INSTALL}") from None

RESULT_COLUMNS = ["qid", "query", "docno", "score", "rank"]


def _require(frame: pd.DataFrame, columns: Sequence[str], who: str) -> None:
    missing = [column for column in columns if column not in frame.columns]
    if missing:
        raise InputError(f"{who}: the frame has no column {missing[0]!r} (its columns: "
                         f"{', '.join(map(str, frame.columns)) or 'none'})")


def _ranking_frame(run: dict, queries: pd.DataFrame) -> pd.DataFrame:
    """A PyTerrier result frame of `run` ({qid: [(docid, score)]}, in rank order), with each query's
    other columns (`query`, ...) repeated on its rows."""
    rows = [(qid, docid, float(score), rank) for qid, ranking in run.items()
            for rank, (docid, score) in enumerate(ranking)]
    result = pd.DataFrame(rows, columns=["qid", "docno", "score", "rank"])
    carried = queries.drop(columns=[c for c in ("docno", "score", "rank", "docid") if c in queries.columns])
    carried = carried.drop_duplicates("qid")
    return result.merge(carried, on="qid", how="left")[[*RESULT_COLUMNS, *[c for c in carried.columns
                                                                             if c not in RESULT_COLUMNS]]]


class DocEncoder(pt.Transformer):
    """Documents (`docno`, `text`) -> the same plus `toks`: {term: integer impact} as `encode corpus` writes."""

    def __init__(self, encoder: str, text_field: str | Sequence[str] = "text", **settings):
        from ..encoders.query import encoder_settings
        from ..encoders.recipes import CorpusShards

        self.encoder = encoder = name_arg("encoder", encoder)
        self.text_fields = _text_fields(text_field)
        self.recipe = CorpusShards(encoder_settings(encoder, **settings))

    def transform(self, documents: pd.DataFrame) -> pd.DataFrame:
        _require(documents, ["docno", *self.text_fields], "DocEncoder")
        result = documents.copy()
        if not len(documents):
            result["toks"] = pd.Series(dtype=object)
            return result
        texts = [" ".join(str(row[field]) for field in self.text_fields if isinstance(row[field], str)).strip()
                 for _, row in documents.iterrows()]
        result["toks"] = self.recipe.encode(texts)
        return result

    def __repr__(self) -> str:
        return f"DocEncoder({self.encoder!r})"


class QueryEncoder(pt.Transformer):
    """Queries (`qid`, `query`) -> the same plus `query_toks`: {term: integer impact} as `encode queries` writes."""

    def __init__(self, encoder: str, **settings):
        from ..encoders.query import QueryEncoder as Impacts

        self.encoder = encoder = name_arg("encoder", encoder)
        self.impacts = Impacts(encoder, **settings)

    def transform(self, queries: pd.DataFrame) -> pd.DataFrame:
        _require(queries, ["qid", "query"], "QueryEncoder")
        result = queries.copy()
        result["query_toks"] = self.impacts.batch_encode(list(queries["query"])) if len(queries) else \
            pd.Series(dtype=object)
        return result

    def __repr__(self) -> str:
        return f"QueryEncoder({self.encoder!r})"


def _text_fields(text_field) -> list[str]:
    fields = [text_field] if isinstance(text_field, str) else text_field
    if not isinstance(fields, (list, tuple)) or not fields or not all(isinstance(f, str) and f for f in fields):
        raise InputError(f"text_field: expected a column name or a list of column names, got {text_field!r}")
    return list(fields)


def doc_encoder(encoder: str = "splade-tiny", text_field: str | Sequence[str] = "text", **settings) -> DocEncoder:
    return DocEncoder(encoder, text_field, **settings)


def query_encoder(encoder: str = "splade-tiny", **settings) -> QueryEncoder:
    return QueryEncoder(encoder, **settings)


class Indexer(pt.Indexer):
    """Documents (`docno`, `text`, a DataFrame or dicts) -> an index of engine `engine` at `index`,
    built as the commands build it: the texts encoded with `encoder` into `encode corpus` shards
    (in this process, the same records and manifest), then the engine's own declared index command
    (`lucene index --impact`, `pisa index`, `seismic index`, `bmp index`, ...; for `bm25`, `lucene
    index` of the texts). The documents and shards stay beside it in INDEX.input (Searcher.doc reads
    texts from them). `build_options`: the engine's build options (its `build_options`, e.g. pisa's
    `block_size`); `overwrite`: replace an index already at `index`. `index()` returns its path,
    for `Retriever(path, encoder=...)`."""

    def __init__(self, index, encoder: str | None = "splade-tiny", engine: str = "lucene",
                 text_field: str | Sequence[str] = "text", overwrite: bool = False, **build_options):
        from ..core.arguments import flag_arg, options_arg
        from ..engines import available_engines, engine_class

        self.path = path_arg("index", index)
        engine = choice_arg("engine", engine, available_engines())
        buildable = [name for name in available_engines()
                     if engine_class(name).index_command(Path("in"), Path("out"), {}) is not None]
        if engine not in buildable:
            raise InputError(f"Indexer: engine {engine!r} has no index command to build with (these do: "
                             f"{', '.join(buildable)})")
        self.engine, self.cls = engine, engine_class(engine)
        self.text_fields, self.overwrite = _text_fields(text_field), flag_arg("overwrite", overwrite)
        self.build_options = options_arg("build_options", build_options)
        unknown = sorted(set(self.build_options) - set(self.cls.build_options))
        if unknown:
            raise InputError(f"Indexer: {unknown[0]!r} is not a build option of engine {engine!r} "
                             f"(its options: {', '.join(self.cls.build_options) or 'none'})")
        if self.cls.builds_from_text:
            if encoder is not None:
                raise InputError(f"Indexer: engine {engine!r} indexes the texts themselves; give encoder=None")
            self.encoder, self.settings = None, None
        else:
            from ..encoders.query import encoder_settings

            self.encoder = name_arg("encoder", encoder)
            self.settings = encoder_settings(self.encoder)  # refused here, before any model loads

    def index(self, documents) -> str:
        import json
        import shutil
        import subprocess

        frame = documents if isinstance(documents, pd.DataFrame) else pd.DataFrame(list(documents))
        _require(frame, ["docno", *self.text_fields], "Indexer")
        if not len(frame):
            raise InputError("Indexer: no documents to index")
        target, work = Path(self.path), Path(self.path + ".input")
        if (target.exists() or work.exists()) and not self.overwrite:
            raise InputError(f"{target}: already exists (give overwrite=True to replace it)")
        self._check_replaceable(target, work)
        for old in (target, work, work.with_name(work.name + ".manifest.json")):
            if old.is_dir():
                shutil.rmtree(old)
            elif old.exists():
                old.unlink()
        (work / "text").mkdir(parents=True)
        texts = (" ".join(str(row[f]) for f in self.text_fields if isinstance(row[f], str)).strip()
                 for _, row in frame.iterrows())
        with open(work / "text" / "docs.jsonl", "w", encoding="utf-8") as out:
            for docno, text in zip(frame["docno"], texts):
                out.write(json.dumps({"id": str(docno), "contents": text}, ensure_ascii=False) + "\n")
        source = work / "text" if self.cls.builds_from_text else self._encode(work / "text" / "docs.jsonl",
                                                                              work / "shards")
        command = self.cls.index_command(source, target, self.build_options)
        done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        if done.returncode != 0:
            last = [line for line in done.stdout.splitlines() if line.strip()][-1:] or ["no output"]
            raise InputError(f"Indexer: building the {self.engine} index {target} failed: {last[0][:300]}")
        return str(target)

    def _check_replaceable(self, target: Path, work: Path) -> None:
        """overwrite=True replaces only what an Indexer wrote: an index some engine recognises (or an
        empty folder) at `target`, and its own documents and shards in INDEX.input."""
        from ..engines import recognising_engine

        family = None if self.settings is None else self.settings.get("family")
        if target.exists() and not (target.is_dir() and not any(target.iterdir())):
            try:
                recognised = recognising_engine(str(target), family) is not None
            except InputError:
                recognised = False
            if not recognised:
                raise InputError(f"{target}: exists and is no index: refusing to replace it even with "
                                 f"overwrite=True; choose another path")
        ours = {"text", "shards", "shards.manifest.json"}
        if work.exists() and not (work.is_dir() and {p.name for p in work.iterdir()} <= ours):
            raise InputError(f"{work}: exists and was not written by an Indexer: refusing to replace it; move it away")

    def _encode(self, corpus: Path, shards: Path) -> Path:
        """`encode corpus --input CORPUS --output SHARDS --encoder ENCODER`, in this process."""
        from .. import __version__
        from ..core.cli import progress_bar
        from ..core.devices import current
        from ..core.readers import checked_corpus, input_identity, read_corpus
        from ..core.writer import DEFAULT_SHARD_SIZE, ShardWriter, write_corpus_shards
        from ..encoders.recipes import CorpusShards

        recipe = CorpusShards(self.settings)
        check = checked_corpus(str(corpus))
        writer = ShardWriter(str(shards), {"preset": self.settings.get("name"), "encoder": recipe.load().describe(),
                                           "impact_scale": self.settings["impact_scale"],
                                           "shard_size": DEFAULT_SHARD_SIZE, "documents": check.count,
                                           **input_identity(str(corpus))})
        progress = progress_bar(check.count, True, "doc")
        write_corpus_shards(read_corpus(str(corpus)), writer, DEFAULT_SHARD_SIZE,
                            lambda shard: recipe.records(shard, recipe.encode([d.text for d in shard], progress)),
                            progress, check.count, str(shards))
        documents, nonzeros = writer.totals()
        writer.finish({"toolkit_version": __version__, "compute": current().describe(),
                       "documents_written": documents, "empty_documents": check.empty,
                       "avg_nonzeros_per_document": round(nonzeros / max(documents, 1), 3),
                       "shard_count": len(writer.shards)})
        return shards

    def __repr__(self) -> str:
        return f"Indexer({self.path!r}, engine={self.engine!r})"


class Retriever(pt.Transformer):
    """Topics (`qid`, `query`) -> a ranking (`qid`, `query`, `docno`, `score`, `rank`) from any engine
    of `lsr_pyserini.Searcher`, which takes the same arguments."""

    def __init__(self, index, encoder: str | None = None, engine: str | None = None, k: int = 1000,
                 threads: int = 1, **searcher_options):
        from ..api import Searcher

        k, threads = number_arg("k", k, positive_int), number_arg("threads", threads, positive_int)
        self.index, self.k, self.threads = index, k, threads
        self.searcher = Searcher(index, encoder=encoder, engine=engine, **searcher_options)
        self._encoded = None  # a Searcher for `query_toks` given as impacts (built on first use)
        self._options = (engine, searcher_options)

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        _require(topics, ["qid"], "Retriever")
        if "query" not in topics.columns and "query_toks" not in topics.columns:
            _require(topics, ["query"], "Retriever")
        queries = topics.drop_duplicates("qid")
        if not len(queries):
            return pd.DataFrame(columns=[*RESULT_COLUMNS, *[c for c in topics.columns if c not in RESULT_COLUMNS]])
        qids = [str(qid) for qid in queries["qid"]]
        texts = [str(text) for text in queries["query"]] if "query" in queries.columns else [""] * len(qids)
        if "query_toks" in queries.columns:
            hits = self.searcher.search_encoded(texts, qids, [dict(toks) for toks in queries["query_toks"]], self.k,
                                                self.threads)
        else:
            hits = self.searcher.batch_search(texts, qids, k=self.k, threads=self.threads)
        run = {qid: [(hit.docid, hit.score) for hit in hits[qid]] for qid in qids}
        return _ranking_frame(run, queries.assign(qid=qids))

    def __repr__(self) -> str:
        return f"Retriever({self.index!r}, engine={self.searcher.engine.name!r}, k={self.k})"


class Reranker(pt.Transformer):
    """A ranking (`qid`, `query`, `docno`, `score`) re-scored by re-ranker `name` from its `store`;
    fused with the ranking's scores when `interpolate` is a weight in [0, 1] (`fusion` minmax,
    zscore or rrf), as `python -m lsr_pyserini.rerank` does."""

    def __init__(self, name: str, store: str, interpolate: float | None = None, fusion: str = "minmax",
                 **options):
        from ..api import Searcher

        from ..core.fusion import METHODS

        name, store = name_arg("name", name), path_arg("store", store)
        interpolate = number_arg("interpolate", interpolate, probability, optional=True)
        fusion = choice_arg("fusion", fusion, METHODS)
        self.name, self.store, self.interpolate, self.fusion = name, store, interpolate, fusion
        self.reranker = Searcher._reranker(name, store, options)

    def transform(self, ranking: pd.DataFrame) -> pd.DataFrame:
        from ..rerankers import check_candidates, rerank

        _require(ranking, ["qid", "query", "docno", "score"], "Reranker")
        if not len(ranking):
            return pd.DataFrame(columns=[*RESULT_COLUMNS, *[c for c in ranking.columns if c not in RESULT_COLUMNS]])
        ranking = ranking.assign(qid=ranking["qid"].astype(str), docno=ranking["docno"].astype(str))
        ordered = ranking.sort_values(["qid", "score"], ascending=[True, False], kind="stable")
        first_stage: dict[str, list[tuple[str, float]]] = {}
        for qid, docno, score in zip(ordered["qid"], ordered["docno"], ordered["score"]):
            first_stage.setdefault(qid, []).append((docno, float(score)))
        texts = dict(zip(ranking["qid"], ranking["query"].astype(str)))
        check_candidates(self.reranker, first_stage, max(map(len, first_stage.values())), "Reranker's ranking",
                         self.store)
        run = rerank(self.reranker, first_stage, texts, self.interpolate, self.fusion)
        return _ranking_frame(run, ranking.drop_duplicates("qid"))

    def __repr__(self) -> str:
        return f"Reranker({self.name!r}, store={self.store!r})"


class Fusion(pt.Transformer):
    """Two (or more) pipelines' rankings of the same topics, fused per query: `rrf` (k=60),
    `minmax` or `zscore` interpolation with `weights` (equal by default), to `depth` documents."""

    def __init__(self, *pipelines: pt.Transformer, weights: Sequence[float] | None = None, method: str = "rrf",
                 depth: int = 1000):
        from ..core.fusion import METHODS

        if len(pipelines) < 2:
            raise InputError("Fusion: give at least two pipelines to fuse")
        bad = next((p for p in pipelines if not isinstance(p, pt.Transformer)), None)
        if bad is not None:
            raise InputError(f"Fusion: expected PyTerrier transformers to fuse, got {type(bad).__name__} {bad!r}")
        if method not in METHODS:
            raise InputError(f"Fusion: unknown method {method!r} (known: {', '.join(METHODS)})")
        if weights is not None:
            weights = sequence_of_numbers("weights", weights, finite_float, len(pipelines), "pipelines")
        depth = number_arg("depth", depth, positive_int)
        self.pipelines, self.weights, self.method, self.depth = list(pipelines), weights, method, depth

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        from ..core.fusion import fuse

        _require(topics, ["qid"], "Fusion")
        if not len(topics):
            return pd.DataFrame(columns=[*RESULT_COLUMNS, *[c for c in topics.columns if c not in RESULT_COLUMNS]])
        runs = []
        for pipeline in self.pipelines:
            frame = pipeline.transform(topics)
            _require(frame, ["qid", "docno", "score"], f"Fusion's input {pipeline!r}")
            run: dict[str, list[tuple[str, float]]] = {}
            for qid, docno, score in zip(frame["qid"].astype(str), frame["docno"].astype(str), frame["score"]):
                run.setdefault(qid, []).append((docno, float(score)))
            runs.append(run)
        fused = fuse(runs, self.weights, self.method, depth=self.depth, names=[repr(p) for p in self.pipelines])
        return _ranking_frame(fused, topics.assign(qid=topics["qid"].astype(str)).drop_duplicates("qid"))

    def __repr__(self) -> str:
        return f"Fusion({', '.join(map(repr, self.pipelines))}, method={self.method!r})"


__all__ = ["DocEncoder", "QueryEncoder", "Indexer", "Retriever", "Reranker", "Fusion", "doc_encoder", "query_encoder"]
