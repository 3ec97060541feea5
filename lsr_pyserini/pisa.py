"""PISA (the `[pisa]` extra): an exact engine with dynamic pruning for the shards Lucene indexes.

`python -m lsr_pyserini.pisa` (--help for its flags); the command is lsr_pyserini/engines/pisa/command.py.
"""
from .engines.pisa.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.pisa.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
