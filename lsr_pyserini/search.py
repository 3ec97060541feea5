"""Search any engine with a topics file and write a TREC run: one command over the engines layer.

`python -m lsr_pyserini.search` (--help for its flags); the command is lsr_pyserini/commands/search.py.
"""
from .commands.search import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.search")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
