"""WordPiece BM25 indexes and learned augmented BM25 queries (arXiv 2305.14087).

`python -m lsr_pyserini.bm25aug` (--help for its flags); the command is lsr_pyserini/commands/bm25aug.py.
"""
from .commands.bm25aug import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.bm25aug")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
