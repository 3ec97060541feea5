"""Adapt a learned sparse model to a corpus from its text alone (no queries, no judgements).

`python -m lsr_pyserini.adapt` (--help for its flags); the command is lsr_pyserini/commands/adapt.py.
"""
from .commands.adapt import main  # noqa: F401

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
