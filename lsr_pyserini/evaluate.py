"""Effectiveness of TREC runs (through trec_eval) and efficiency of impact indexes.

`python -m lsr_pyserini.evaluate` (--help for its flags); the command is lsr_pyserini/commands/evaluate.py.
"""
from .commands.evaluate import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.evaluate")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
