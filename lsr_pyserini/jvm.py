"""The Java runtime for Pyserini's own commands and classes, as shell lines.

`python -m lsr_pyserini.jvm` (--help for its flags); the command is lsr_pyserini/commands/jvm.py.
"""
from .commands.jvm import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.jvm")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
