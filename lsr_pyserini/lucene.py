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
An index built from `encode corpus` shards gets INDEX.lsr.json beside it, naming the shards'
manifest and their quantisation (`"quantize": "int8"` or `"none"`, docs/quantization.md).
"""
from __future__ import annotations

import os
import runpy
import sys
import tempfile
from pathlib import Path

from .core.cli import fail, run_main, warn
from .core.java import JavaNotFound, start_jvm
from .core.outputs import JSON_LINES, LUCENE_INDEX, TREC_RUN, Claim, atomic_write, claim_output

TOOLS = {
    "index": "pyserini.index.lucene",
    "search": "pyserini.search.lucene",
    "eval": "pyserini.eval.trec_eval",
}
TOPIC_PATH_TRAPS = ("cacm", "beir")
TSV_SUFFIXES = (".tsv", ".tsv.gz", ".txt", ".txt.gz")


def neutral_topics_path(path: str, scratch: Path) -> str:
    """A link to a TSV topics file under a name Pyserini reads as plain TSV (a copy without the
    queries that have no text, when it has some)."""
    if os.path.isfile(path) and path.endswith(".tsv"):
        with open(path, encoding="utf-8") as handle:
            lines = handle.readlines()
        kept = [line for line in lines if line.partition("\t")[2].strip()]
        if len(kept) < len(lines):
            warn(f"{path}: {len(lines) - len(kept)} queries have no text (no term); they retrieve nothing")
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


ENCODING_RECORD = ".lsr.json"  # INDEX.lsr.json, beside the index: Lucene's folder holds Lucene's files only


def record_encoding(args: list[str], index: Path) -> None:
    """Beside an index built from `encode corpus` shards, INDEX.lsr.json: the shards' manifest and its
    quantisation (`"quantize": "int8"` for int8 encodings; absent for float32), so an index says how
    its impacts were computed. A stale record of an earlier index at that path is removed."""
    import json

    record = index.with_name(index.name + ENCODING_RECORD)
    record.unlink(missing_ok=True)
    position = option_position(args, ("--input", "-input"))
    manifest = Path(args[position]).resolve() if position is not None else None
    manifest = manifest.with_name(manifest.name + ".manifest.json") if manifest else None
    try:
        encoder = json.loads(manifest.read_text())["settings"]["encoder"]
    except (AttributeError, OSError, ValueError, KeyError, TypeError):
        return  # not shards of ours (e.g. `prepare corpus` documents): nothing to record
    atomic_write(record, [json.dumps({"shards_manifest": str(manifest), "quantize": encoder.get("quantize", "none"),
                                      **{k: v for k, v in encoder.items() if k.startswith("quantize_")}},
                                     indent=2) + "\n"])


def run_tool(tool: str, args: list[str], overwrite: bool = False) -> int:
    """Run one of Pyserini's Lucene command-line tools in this process; its exit status."""
    original = list(args)
    args, claim, temporary = claim_tool_output(tool, args, overwrite)
    try:
        start_jvm()
    except JavaNotFound as err:
        fail(str(err))
    module = TOOLS[tool]
    code = 0
    with tempfile.TemporaryDirectory(prefix="lsr-topics-") as scratch:
        if tool == "search":
            args = rewrite_topics(args, Path(scratch))
        sys.argv = [module] + args
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    if claim is not None:
        if code == 0 and temporary.exists():
            claim.replace_with(temporary)
            if tool == "index":
                record_encoding(original, claim.path)
        elif tool == "index":
            claim.drop_scratch(".building")
        else:
            temporary.unlink(missing_ok=True)
    return code


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print(f"\nTools: {', '.join(TOOLS)}. `python -m lsr_pyserini.lucene TOOL --help` shows that tool's flags.\n"
              f"--overwrite (the wrapper's own flag): replace an existing index (index) or run (search) "
              f"(default: refuse)")
        return 0 if argv else 2
    tool, rest = argv[0], argv[1:]
    if tool not in TOOLS:
        fail(f"unknown tool {tool!r}: expected one of {', '.join(TOOLS)}")
    overwrite = "--overwrite" in rest
    return run_tool(tool, [arg for arg in rest if arg != "--overwrite"], overwrite)


if __name__ == "__main__":
    run_main(lambda: sys.exit(main()))
