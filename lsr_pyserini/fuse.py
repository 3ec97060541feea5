"""Fuse any number of TREC runs into one: min-max or z-score interpolation, or reciprocal rank fusion.

`python -m lsr_pyserini.fuse` (--help for its flags); the command is lsr_pyserini/commands/fuse.py.
"""
from .commands.fuse import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.fuse")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
