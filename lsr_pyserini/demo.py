"""Offline demo: encode, index, search and evaluate the sample passages shipped with the package.

`python -m lsr_pyserini.demo` (--help for its flags); the command is lsr_pyserini/commands/demo.py.
"""
from .commands.demo import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.demo")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
