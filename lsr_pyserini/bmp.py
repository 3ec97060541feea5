"""BMP (the `[bmp]` extra): Block-Max Pruning over the shards Lucene indexes, an approximate engine.

`python -m lsr_pyserini.bmp` (--help for its flags); the command is lsr_pyserini/engines/bmp/command.py.
"""
from .engines.bmp.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.bmp.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
