"""Re-rank the candidates of a first-stage TREC run with scores from a store built at encoding time.

`python -m lsr_pyserini.rerank` (--help for its flags); the command is lsr_pyserini/commands/rerank.py.
"""
from .commands.rerank import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.rerank")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
