"""Measure engines on your own collection's prefixes: build, bytes, memory, latency, recall, nDCG.

`python -m lsr_pyserini.bench` (--help for its flags); the command is lsr_pyserini/commands/bench/command.py.
"""
from .commands.bench.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.bench.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
