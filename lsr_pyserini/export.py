"""Save a model in the sentence-transformers layout, which `SparseEncoder(DIR)` or `SentenceTransformer(DIR)` opens.

`python -m lsr_pyserini.export` (--help for its flags); the command is lsr_pyserini/commands/export.py.
"""
from .commands.export import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.export")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
