"""Run Pyserini's Lucene tools with a correctly started Java 21+ JVM.

    python -m lsr_pyserini.lucene index  ARGS...   ->  python -m pyserini.index.lucene ARGS...
    python -m lsr_pyserini.lucene search ARGS...   ->  python -m pyserini.search.lucene ARGS...
    python -m lsr_pyserini.lucene eval   ARGS...   ->  python -m pyserini.eval.trec_eval ARGS...

ARGS pass through unchanged but for three adjustments. Pyserini parses any topics path containing
`cacm` or `beir` with a special reader whatever its format, so a TSV topics file whose path
contains those words is handed over through a temporary link with a neutral name. Its TSV
reader refuses a query without text (an encoded query none of whose weights survived
quantisation), so such queries are left out of a temporary copy, with a warning: they retrieve
nothing, as `encode queries` announces. The index
(`index --index DIR`) is built in DIR.building and renamed to DIR when complete, and the run
(`search --output FILE`) written to a temporary file renamed when complete, so neither is ever
half-written; both are locked while written. An existing index or run is replaced only with the
wrapper's own flag `--overwrite` (taken out of ARGS), and anything else at that path never is.
An index holds lsr_index.json, its kind, and when built from `encode corpus` shards also their
encoder, manifest and quantisation (`"quantize": "int8"` or `"none"`, docs/quantization.md).

Before Pyserini searches, what it would get wrong without saying so stops in one line: an index
recorded or examined as an impact index (lsr_index.json, `bm25aug index --scoring bow`, its norms) searched
without `--impact`, a `bm25aug` BM25 index searched with it, and a TSV topics line that is not
`qid<TAB>text` (Pyserini would leave that query out of the run). An unrecorded index whose kind
its norms do not tell but whose term frequencies look like impacts, searched without `--impact`,
gets a warning. Pyserini's own
`saving to RUN` line names the paths given, not the temporary ones. The topics file is checked against
the index (core/topics.py: `encode queries`' record beside it; `--unrecorded-topics`, the wrapper's
own flag, searches an unrecorded file that reads as text). What Pyserini reports by printing and
exiting 0, or by a traceback (an unknown index name, a missing topics, qrels, run or input folder, a
folder that is not an index) stops in one line before anything is written, and a run of Pyserini's
that writes nothing or raises is a failure in one line, its scratch output removed.

Sharded impact indexes (docs/scaling.md): `search --index A,B,C --impact --topics ENCODED.tsv ...`
goes through the sharded engine (engines/sharded/engine.py), not Pyserini's command: each shard index is
searched for the top --hits and merged into exactly the run one index over all the documents
writes (same docids, scores, ranks, tie order and query order); of Pyserini's flags it takes
--hits, --threads, --batch-size, --min-idf and --output-format trec, and refuses others; `merge-runs --runs R1,R2,... --output R --hits K`
merges per-shard impact runs made elsewhere. BM25 is refused there: its statistics differ per shard.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ...core.cli import fail, run_main, warn
from ...core.errors import InputError
from ...core.indexes import BM25, IMPACT, encoding_record_path, legacy_record_path
from ...core.jvm import JavaNotFound, start_jvm
from ...core.options import positive_int
from ...core.outputs import JSON_LINES, LUCENE_INDEX, TREC_RUN, Claim, atomic_write, claim_output

TOOLS = {
    "index": "pyserini.index.lucene",
    "search": "pyserini.search.lucene",
    "eval": "pyserini.eval.trec_eval",
}
TOPIC_PATH_TRAPS = ("cacm", "beir")
TSV_SUFFIXES = (".tsv", ".tsv.gz", ".txt", ".txt.gz")


def refuse_untabbed_topic(path: str, lines: list[str]) -> None:
    """A TSV topics line that is not `qid<TAB>text` (a blank line aside) stops the search in one line
    naming it: Pyserini would drop that query from the run without saying so."""
    for line_no, line in enumerate(lines, start=1):
        qid, tab, _ = line.partition("\t")
        if line.strip() and not (tab and qid.strip()):
            raise InputError(f"{path}:{line_no}: expected 'qid<TAB>query text'")


def neutral_topics_path(path: str, scratch: Path) -> str:
    """A link to a TSV topics file under a name Pyserini reads as plain TSV (a copy without the
    queries that have no text, when it has some)."""
    if os.path.isfile(path) and path.endswith(".tsv"):
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
        refuse_untabbed_topic(path, lines)
        from ...core.topics import header_warning, is_header

        first = next((line_no for line_no, line in enumerate(lines) if line.strip()), None)
        header = first is not None and is_header(lines[first].partition("\t")[0], True)
        if header:
            warn(header_warning(path, first + 1, lines[first].partition("\t")[0]))
            lines = lines[:first] + lines[first + 1:]
        if not any(line.strip() for line in lines):
            raise InputError(f"{path}: no queries in it (only a header line)")
        kept = [line for line in lines if line.partition("\t")[2].strip()]
        if len(kept) < len(lines):
            warn(f"{path}: {len(lines) - len(kept)} queries have no text (no term); they retrieve nothing")
        if header or len(kept) < len(lines):
            copy = scratch / "topics.tsv"
            copy.write_text("".join(kept), encoding="utf-8")
            return str(copy)
    if not (os.path.isfile(path) and path.endswith(TSV_SUFFIXES) and any(t in path for t in TOPIC_PATH_TRAPS)):
        return path
    suffix = next(s for s in TSV_SUFFIXES if path.endswith(s))
    link = scratch / f"topics{suffix}"
    link.symlink_to(os.path.abspath(path))
    return str(link)


def rewrite_topics(args: list[str], scratch: Path) -> list[str]:
    args = list(args)
    for i, arg in enumerate(args):
        if arg == "--topics" and i + 1 < len(args):
            args[i + 1] = neutral_topics_path(args[i + 1], scratch)
        elif arg.startswith("--topics="):
            args[i] = "--topics=" + neutral_topics_path(arg.split("=", 1)[1], scratch)
    return args


def option_position(args: list[str], names: tuple[str, ...]) -> int | None:
    """Index in `args` of the value of the first option named in `names` (`--x V` or `-x V`)."""
    for i, arg in enumerate(args[:-1]):
        if arg in names:
            return i + 1
    return None


def claim_tool_output(tool: str, args: list[str], overwrite: bool) -> tuple[list[str], Claim | None, Path | None]:
    """Claim the index (index) or the run (search) and point the tool at a temporary path instead;
    (arguments, claim, temporary path), or no claim when the tool writes nothing we know of."""
    names, kind = {"index": (("--index", "-index"), LUCENE_INDEX),
                   "search": (("--output",), JSON_LINES if "kilt" in args else TREC_RUN)}.get(tool, ((), None))
    position = option_position(args, names)
    if position is None:
        return args, None, None
    claim = claim_output(args[position], kind, overwrite)
    if tool == "index":
        claim.drop_scratch(".building")
        temporary = claim.scratch(".building")
    else:
        temporary = claim.path.with_name(f".{claim.path.name}.tmp")
        temporary.unlink(missing_ok=True)
    return args[:position] + [str(temporary)] + args[position + 1:], claim, temporary


def record_encoding(args: list[str], building: Path, index: Path) -> None:
    """Inside every index it builds (`building`, renamed to `index` next), lsr_index.json
    (core/indexes.py): its kind (`impact` when built with --impact, else `bm25`), so that searchers
    can refuse a query of the wrong kind, wherever the folder is copied or moved; for an index of
    `encode corpus` shards also their encoder and quantisation (`"quantize": "int8"` for int8
    encodings, `"none"` for float32) and their manifest, relative to `index` and absolute. A stale
    record of an earlier index at that path (beside it, as indexes built before kept it) is removed."""
    import json

    stale = legacy_record_path(index)
    stale.unlink(missing_ok=True)
    fields = {"kind": IMPACT if "--impact" in args or "-impact" in args else BM25}
    position = option_position(args, ("--input", "-input"))
    manifest = Path(args[position]).resolve() if position is not None else None
    manifest = manifest.with_name(manifest.name + ".manifest.json") if manifest else None
    from ..base import manifest_encoder

    encoder = manifest_encoder(manifest) if manifest is not None else None  # None: not shards of ours
    if encoder is not None:
        fields.update({"shards_manifest": str(manifest),
                       "shards_manifest_relative": os.path.relpath(manifest, index.resolve()),
                       "encoder": encoder, "quantize": encoder.get("quantize", "none"),
                       **{k: v for k, v in encoder.items() if k.startswith("quantize_")}})
    atomic_write(encoding_record_path(building), [json.dumps(fields, indent=2) + "\n"])


IMPACT_LIKE_FREQUENCY = 10  # mean term frequency per posting: SciFact's BM25 index 1.6, its SPLADE-tiny index 70.7


def recorded_scoring(index: Path) -> tuple[str, str] | None:
    """("impact" or "bm25", what says so) for an index whose kind can be told (core/indexes.py):
    lsr_index.json in it (every index `lucene index` builds; INDEX.lsr.json beside it for indexes
    built before), `bm25aug index`'s INDEX/lsr_tokenizer.json (`--scoring bow`: impacts of 1;
    `bm25`: text), or else what its norms and term frequencies show; else None."""
    from ...core.indexes import TOKENIZER_RECORD, UNKNOWN, encoding_record, lucene_index_kind, record_description

    try:
        kind = lucene_index_kind(index)
    except InputError:
        return None  # not a Lucene index: Pyserini says so
    if kind == UNKNOWN:
        return None
    record = encoding_record(index)
    if record is not None:
        built = "built from `encode corpus` shards" if record.get("shards_manifest") else \
            f"built {'with' if kind == IMPACT else 'without'} --impact"
        return kind, f"{record_description(index)}: {built}"
    if (index / TOKENIZER_RECORD).is_file():
        return kind, f"{TOKENIZER_RECORD}: built by `bm25aug index --scoring {'bow' if kind == IMPACT else 'bm25'}`"
    shown = "every document's norm is 1 and term frequencies are impacts" if kind == IMPACT else \
        "its norms are document lengths"
    return kind, f"no record in it; examined: {shown}"


def mean_term_frequency(index: Path) -> float | None:
    """Mean frequency of a term in a document of the `contents` field (None: not readable as a
    Lucene index with that field). The JVM must be running."""
    from jnius import JavaException, autoclass

    try:
        reader = autoclass("org.apache.lucene.index.DirectoryReader").open(
            autoclass("org.apache.lucene.store.FSDirectory").open(autoclass("java.nio.file.Paths").get(str(index))))
    except JavaException:
        return None
    try:
        postings = reader.getSumDocFreq("contents")
        return reader.getSumTotalTermFreq("contents") / postings if postings > 0 else None
    finally:
        reader.close()


def check_index_scoring(args: list[str]) -> None:
    """Before Pyserini searches one index folder: an impact index searched without --impact (BM25
    over impacts: a wrong run) or a BM25 index searched with it stops in one line when the toolkit
    recorded the index's kind; an unrecorded index whose term frequencies look like impacts gets a
    warning. Several shard indexes (`--index A,B`: `sharded_index`) and dense searches are left alone."""
    position = option_position(args, ("--index", "-index"))
    if position is None or "--dense" in args or not os.path.isdir(args[position]):
        return  # a prebuilt index name, a missing folder (Pyserini says so) or A,B shard indexes
    index, impact = Path(args[position]), "--impact" in args
    kind = recorded_scoring(index)
    if kind is not None:
        if kind[0] == "impact" and not impact:
            raise InputError(f"{index} is an impact index ({kind[1]}): add --impact "
                             f"(without it Lucene scores the impacts as BM25 term counts)")
        if kind[0] == "bm25" and impact:
            raise InputError(f"{index} is a BM25 index ({kind[1]}): leave out --impact")
        return
    frequency = None if impact else mean_term_frequency(index)
    if frequency is not None and frequency >= IMPACT_LIKE_FREQUENCY:
        warn(f"{index}: a term occurs {frequency:.1f} times per document on average, as in an impact index "
             f"(text gives 1 to 3): if it is one, search it with --impact")


def sharded_index(args: list[str]) -> str | None:
    """The `--index` value of a search over several shard indexes (`A,B,C`), else None; refuses
    what does not merge exactly (BM25, SLIM's encoded corpus) with one line."""
    position = option_position(args, ("--index", "-index"))
    if position is None or "," not in args[position] or os.path.exists(args[position]):
        return None
    from ..sharded.engine import BM25_REFUSAL, split_indexes

    if "--impact" not in args:
        raise InputError(BM25_REFUSAL)
    if "--encoded-corpus" in args or any(arg.startswith("--encoded-corpus=") for arg in args):
        raise InputError("--encoded-corpus (SLIM) is not available with several shard indexes")
    split_indexes(args[position])
    return args[position]


SHARDED_FLAGS = {"--index": True, "--topics": True, "--output": True, "--hits": True, "--threads": True,
                 "--batch-size": True, "--min-idf": True, "--output-format": True, "--impact": False}


def sharded_search_args(args: list[str]) -> dict[str, str]:
    """Pyserini's flags that a search over several shard indexes takes ({flag: value}); any other
    flag refused in one line (only plain impact search of pre-encoded queries merges exactly)."""
    given, i = {}, 0
    while i < len(args):
        flag, value = args[i], None
        if flag.startswith("--") and "=" in flag:
            flag, value = flag.split("=", 1)
        if flag not in SHARDED_FLAGS:
            if flag == "--encoder":
                raise InputError("--encoder is not available with several shard indexes: encode the queries with "
                                 "`encode queries`, or search with `python -m lsr_pyserini.search --engine sharded "
                                 "--encoder NAME`")
            raise InputError(f"{flag} is not available when searching several shard indexes together "
                             f"(only plain impact search merges exactly)")
        if SHARDED_FLAGS[flag] and value is None:
            if i + 1 >= len(args):
                raise InputError(f"{flag}: expected a value")
            value, i = args[i + 1], i + 1
        given[flag] = value
        i += 1
    for required in ("--topics", "--output"):
        if required not in given:
            raise InputError(f"{required} is required")
    if given.get("--output-format", "trec") != "trec":
        raise InputError("--output-format: only trec is available with several shard indexes")
    return given


def pyserini_topic_order(qids: list[str]) -> list[tuple[str, str]]:
    """(qid, qid as Pyserini's command writes it) in the order it searches TSV topics: ids of digits
    become integers (so `007` is written `7`), then sorted (by their text when ints and strings mix)."""
    keys = {qid: int(qid) if qid.isdigit() else qid for qid in qids}
    try:
        order = sorted(keys, key=keys.__getitem__)
    except TypeError:
        order = sorted(keys, key=lambda qid: str(keys[qid]))
    return [(qid, str(keys[qid])) for qid in order]


def search_shards(args: list[str], overwrite: bool) -> int:
    """`lucene search --index A,B,C --impact ...` through the sharded engine: the run one index over
    all the shards' documents writes (same docids, scores, ranks, tie order and query order)."""
    from ...core.writer import run_lines
    from .. import build_engine
    from ...stores.vectors import read_impact_queries

    given = sharded_search_args(args)
    hits = positive_int(given.get("--hits", "1000"))
    threads = positive_int(given.get("--threads", "1"))
    min_idf = int(given.get("--min-idf", "0"))
    claim = claim_output(given["--output"], TREC_RUN, overwrite)
    queries = dict(read_impact_queries(given["--topics"]))
    engine = build_engine("sharded", given["--index"], {"min_idf": min_idf})
    order = pyserini_topic_order(list(queries))
    run = engine.search([qid for qid, _ in order], [queries[qid] for qid, _ in order], hits, threads)
    claim.write_lines(run_lines({written: run[qid] for qid, written in order}, "Anserini"))
    return 0


class _GivenPaths:
    """sys.stdout for Pyserini's tool: its own lines (`Running T topics, saving to R...`) name the
    paths the user gave, not the temporary run and topics link the wrapper handed it."""

    def __init__(self, stream, renames: dict[str, str]):
        self.stream, self.renames = stream, renames

    def write(self, text: str) -> int:
        for temporary, given in self.renames.items():
            text = text.replace(temporary, given)
        return self.stream.write(text)

    def __getattr__(self, name: str):
        return getattr(self.stream, name)


@contextmanager
def given_paths_shown(original: list[str], handed: list[str]):
    """While Pyserini runs, its stdout names each argument as the user gave it (`original`), not as
    it was handed over (`handed`, the same options with temporary paths)."""
    renames = {}
    for given, temporary in zip(original, handed):
        if given != temporary:
            if given.startswith("--") and "=" in given:  # --topics=FILE
                given, temporary = given.split("=", 1)[1], temporary.split("=", 1)[1]
            renames[temporary] = given
    stdout = sys.stdout
    sys.stdout = _GivenPaths(stdout, renames) if renames else stdout
    try:
        yield
    finally:
        sys.stdout = stdout


def pyserini_names(kind: str) -> set[str]:
    """The names Pyserini resolves itself where a path is expected: its prebuilt indexes ("index"),
    topics ("topics") or qrels ("qrels"). The JVM must be running (Pyserini's search module starts it)."""
    if kind == "index":
        from pyserini import prebuilt_index_info as info

        return {name for table in (info.TF_INDEX_INFO, info.IMPACT_INDEX_INFO, info.LUCENE_HNSW_INDEX_INFO,
                                   info.LUCENE_FLAT_INDEX_INFO, info.FAISS_INDEX_INFO) for name in table}
    from pyserini.search import _base

    return set(_base.topics_mapping if kind == "topics" else _base.qrels_mapping)


def has_text(path: str) -> bool:
    """Whether a file holds anything but blank lines (read until the first that is not)."""
    with open(path, "rb") as handle:
        return any(line.strip() for line in handle)


def check_tool_inputs(tool: str, args: list[str]) -> None:
    """What Pyserini would report by printing (and exit 0, or end in a traceback) stops in one line
    before anything is written: an index, topics or qrels path that does not exist and is not one of
    Pyserini's names, a folder that is not a Lucene index, an input of `index` that is not a folder,
    a run to evaluate that does not exist."""
    if tool == "search":
        position = option_position(args, ("--index", "-index"))
        if position is not None:
            index = args[position]
            if not os.path.exists(index):
                if index not in pyserini_names("index"):
                    raise InputError(f"{index}: no such index folder (nor the name of a Pyserini prebuilt index)")
            else:
                from ...core.indexes import lucene_index_kind

                lucene_index_kind(index)  # one line for a folder that is not a Lucene index
        position = option_position(args, ("--topics", "-topics"))
        if position is not None and not os.path.exists(args[position]) and \
                args[position] not in pyserini_names("topics"):
            raise InputError(f"{args[position]}: no such topics file (nor the name of Pyserini topics)"
                             + ("" if os.path.isabs(args[position]) else f"; relative to {os.getcwd()}"))
        if position is not None and os.path.isfile(args[position]) and not has_text(args[position]):
            raise InputError(f"{args[position]}: no queries in it")  # Pyserini: "Topic ... Not Found"
    elif tool == "index":
        position = option_position(args, ("--input", "-input"))
        if position is not None:
            given = args[position]
            if not os.path.exists(given):
                raise InputError(f"{given}: no such folder of documents")
            if not os.path.isdir(given):
                raise InputError(f"{given}: not a folder (Pyserini's indexer reads the folder of documents or "
                                 f"shards, e.g. `encode corpus --output` or `prepare corpus --output`)")
    elif tool == "eval":
        positional = [arg for arg in args if not arg.startswith("-")]
        if len(args) >= 2 and len(positional) >= 2:
            qrels, run = args[-2], args[-1]
            if not os.path.exists(qrels) and qrels not in pyserini_names("qrels"):
                raise InputError(f"{qrels}: no such qrels file (nor the name of Pyserini qrels)")
            if not os.path.isfile(run):
                raise InputError(f"{run}: no such run file")


def check_search_topics(args: list[str], allow_unrecorded: bool) -> None:
    """The topics file against the index (core/topics.py): encoded queries of the index's own encoder
    for an impact search without --encoder, query text otherwise. Dense searches and pretokenized
    BM25 (`bm25aug queries`' files) are left alone."""
    from ...core.topics import IMPACTS, TEXT, check_topics

    topics = option_position(args, ("--topics", "-topics"))
    index = option_position(args, ("--index", "-index"))
    impact = "--impact" in args or "-impact" in args
    if topics is None or "--dense" in args or ("--pretokenized" in args and not impact):
        return
    encoder = any(arg.split("=", 1)[0] in ("--encoder", "--onnx-encoder") for arg in args)
    kind = IMPACTS if impact and not encoder else TEXT
    name = args[index] if index is not None else "the index"
    document_side = None
    if kind == IMPACTS and index is not None:
        from .engine import recorded_encoder

        first = name.split(",")[0] if not os.path.exists(name) else name
        document_side = recorded_encoder(first) if os.path.isdir(first) else None
    check_topics(args[topics], document_side, kind, allow_unrecorded, index=name)


def run_tool(tool: str, args: list[str], overwrite: bool = False, unrecorded_topics: bool = False) -> int:
    """Run one of Pyserini's Lucene command-line tools in this process; its exit status. Bad input is
    refused in one line before anything is written; a run of Pyserini's that wrote no output, or that
    ended in an exception, is a failure in one line, with nothing left behind."""
    original = list(args)
    if tool == "search" and sharded_index(args):
        check_search_topics(args, unrecorded_topics)
        return search_shards(args, overwrite)
    args, claim, temporary = claim_tool_output(tool, args, overwrite)  # a foreign output: refused first
    try:
        try:
            start_jvm()
        except JavaNotFound as err:
            fail(str(err))
        check_tool_inputs(tool, original)
        if tool == "search":
            check_index_scoring(original)
            check_search_topics(original, unrecorded_topics)
    except BaseException:  # the scratch index goes; the folders the claim created go at exit (core/outputs.py)
        drop_tool_output(tool, claim, temporary)
        raise
    module = TOOLS[tool]
    code, failure = 0, None
    with tempfile.TemporaryDirectory(prefix="lsr-topics-") as scratch:
        if tool == "search":
            args = rewrite_topics(args, Path(scratch))
        sys.argv = [module] + args
        try:
            with given_paths_shown(original, args):
                runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
        except Exception as err:  # noqa: BLE001  (Pyserini's own errors: one line, not its traceback)
            failure = f"{module}: {str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}"
        except BaseException:
            drop_tool_output(tool, claim, temporary)
            raise
    written = temporary is not None and (LUCENE_INDEX.recognise(temporary) if tool == "index" else temporary.exists())
    if claim is not None and code == 0 and failure is None and not written:
        failure = f"{module} wrote no {'index' if tool == 'index' else 'run'} (its messages above say why)"
    if claim is not None:
        if code == 0 and failure is None:
            if tool == "index":
                record_encoding(original, temporary, claim.path)
            claim.replace_with(temporary)
        else:
            drop_tool_output(tool, claim, temporary)
    if failure is not None:
        raise InputError(failure)
    return code


def drop_tool_output(tool: str, claim: Claim | None, temporary: Path | None) -> None:
    if claim is None:
        return
    if tool == "index":
        claim.drop_scratch(".building")
    else:
        temporary.unlink(missing_ok=True)


def merge_runs_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lsr_pyserini.lucene merge-runs",
        description="Merge per-shard impact runs (`lucene search --impact` on each shard index, with the "
                    "same topics and --hits) into the run one index over all the documents gives: top "
                    "--hits per query by score, ties by docid, Anserini's tie-adjusted scores. See "
                    "docs/scaling.md.")
    parser.add_argument("--runs", required=True, help="comma-separated per-shard TREC runs (two or more)")
    parser.add_argument("--output", required=True, help="the merged TREC run")
    parser.add_argument("--hits", type=positive_int, default=1000,
                        help="hits kept per query; each shard run needs at least as many (default: 1000)")
    parser.add_argument("--topics", default=None,
                        help="topics file (qid<TAB>text) whose order the merged run follows (default: the "
                             "runs' own order, which is the topics' order wherever a query has hits)")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing run (default: refuse)")
    return parser


def merge_runs_main(argv: list[str]) -> int:
    from ..sharded.engine import merge_runs

    args = merge_runs_parser().parse_args(argv)
    paths = [path for path in args.runs.split(",") if path]
    if len(paths) < 2:
        raise InputError(f"--runs {args.runs!r}: name two or more shard runs, separated by commas")
    topics = None
    if args.topics is not None:
        from ...core.readers import read_queries

        topics = [query.qid for query in read_queries(args.topics)]
    claim = claim_output(args.output, TREC_RUN, args.overwrite)
    lines, warnings = merge_runs(paths, args.hits, topics)
    for message in warnings:
        warn(message)
    atomic_write(claim.path, lines)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print(f"\nTools: {', '.join(TOOLS)}, merge-runs. `python -m lsr_pyserini.lucene TOOL --help` shows "
              f"that tool's flags.\n"
              f"--overwrite (the wrapper's own flag): replace an existing index (index) or run (search) "
              f"(default: refuse)\n"
              f"--unrecorded-topics (the wrapper's own flag): search an impact index with a topics file that "
              f"`encode queries` did not record and that reads as text (default: refuse, docs/encoding.md)")
        return 0 if argv else 2
    tool, rest = argv[0], argv[1:]
    if tool == "merge-runs":
        return merge_runs_main(rest)
    if tool not in TOOLS:
        fail(f"unknown tool {tool!r}: expected one of {', '.join(TOOLS)}, merge-runs")
    from ...core.topics import UNRECORDED_FLAG

    overwrite, unrecorded = "--overwrite" in rest, UNRECORDED_FLAG in rest
    return run_tool(tool, [arg for arg in rest if arg not in ("--overwrite", UNRECORDED_FLAG)], overwrite, unrecorded)


if __name__ == "__main__":
    run_main(lambda: sys.exit(main()))
