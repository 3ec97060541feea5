"""Run Pyserini's Lucene tools with a correctly started Java 21+ JVM.

`python -m lsr_pyserini.lucene` (--help for its flags); the command is lsr_pyserini/engines/lucene/command.py.
"""
from .engines.lucene.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.lucene.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    import sys

    from .core.cli import run_main

    run_main(lambda: sys.exit(main()))
