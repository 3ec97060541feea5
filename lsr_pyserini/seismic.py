"""Seismic (pyseismic-lsr, the `[seismic]` extra): a second serving engine for the shards Lucene indexes.

`python -m lsr_pyserini.seismic` (--help for its flags); the command is lsr_pyserini/engines/seismic/command.py.
"""
from .engines.seismic.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.seismic.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
