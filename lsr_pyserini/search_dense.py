"""Full dense retrieval: exact inner-product search of every document in a dense store (faiss).

`python -m lsr_pyserini.search_dense` (--help for its flags); the command is lsr_pyserini/engines/dense/command.py.
"""
from .engines.dense.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.dense.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
