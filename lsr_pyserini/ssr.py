"""SSR (single-stage sparse retrieval with sparse-autoencoder neurons as pseudo-terms) on Lucene.

`python -m lsr_pyserini.ssr` (--help for its flags); the command is lsr_pyserini/commands/ssr.py.
"""
from .commands.ssr import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.ssr")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
