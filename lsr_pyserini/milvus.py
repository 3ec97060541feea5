"""Milvus (pymilvus + milvus-lite, the `[milvus]` extra): the distributed engine for the shards Lucene indexes.

`python -m lsr_pyserini.milvus` (--help for its flags); the command is lsr_pyserini/engines/milvus/command.py.
"""
from .engines.milvus.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "engines.milvus.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
