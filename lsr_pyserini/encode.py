"""Encode a corpus or queries with a sparse encoder preset into files Lucene reads.

`python -m lsr_pyserini.encode` (--help for its flags); the command is lsr_pyserini/commands/encode.py.
"""
from .commands.encode import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.encode")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
