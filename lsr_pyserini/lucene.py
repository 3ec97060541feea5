"""Run Pyserini's Lucene tools with a correctly started Java 21+ JVM.

    python -m lsr_pyserini.lucene index  ARGS...   ->  python -m pyserini.index.lucene ARGS...
    python -m lsr_pyserini.lucene search ARGS...   ->  python -m pyserini.search.lucene ARGS...
    python -m lsr_pyserini.lucene eval   ARGS...   ->  python -m pyserini.eval.trec_eval ARGS...

ARGS pass through unchanged. The one adjustment: Pyserini parses any topics path containing
`cacm` or `beir` with a special reader whatever its format, so a TSV topics file whose path
contains those words is handed over through a temporary link with a neutral name; and its TSV
reader refuses a query without text (an encoded query none of whose weights survived
quantisation), so such queries are left out of a temporary copy, with a warning: they retrieve
nothing, as `encode queries` announces.
"""
from __future__ import annotations

import os
import runpy
import sys
import tempfile
from pathlib import Path

from .core.cli import fail, warn
from .core.java import JavaNotFound, start_jvm

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


def run_tool(tool: str, args: list[str]) -> int:
    """Run one of Pyserini's Lucene command-line tools in this process; its exit status."""
    try:
        start_jvm()
    except JavaNotFound as err:
        fail(str(err))
    module = TOOLS[tool]
    with tempfile.TemporaryDirectory(prefix="lsr-topics-") as scratch:
        if tool == "search":
            args = rewrite_topics(args, Path(scratch))
        sys.argv = [module] + args
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as exit_:
            code = exit_.code
            return code if isinstance(code, int) else (0 if code is None else 1)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        print(f"\nTools: {', '.join(TOOLS)}. `python -m lsr_pyserini.lucene TOOL --help` shows that tool's flags.")
        return 0 if argv else 2
    tool, rest = argv[0], argv[1:]
    if tool not in TOOLS:
        fail(f"unknown tool {tool!r}: expected one of {', '.join(TOOLS)}")
    return run_tool(tool, rest)


if __name__ == "__main__":
    sys.exit(main())
