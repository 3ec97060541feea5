"""Convert a corpus or queries to what Pyserini's BM25 tools read, with no model involved.

`python -m lsr_pyserini.prepare` (--help for its flags); the command is lsr_pyserini/commands/prepare.py.
"""
from .commands.prepare import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.prepare")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
