"""Expand a corpus with TILDE: append each passage's most likely missing terms.

`python -m lsr_pyserini.expand` (--help for its flags); the command is lsr_pyserini/commands/expand.py.
"""
from .commands.expand import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.expand")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
