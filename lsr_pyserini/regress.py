"""Two-click reproductions: run a pipeline described in YAML and check its metrics.

`python -m lsr_pyserini.regress` (--help for its flags); the command is lsr_pyserini/commands/regress/command.py.
"""
from .commands.regress.command import main  # noqa: F401
from .core.forwarding import forward_to

__getattr__ = forward_to(__name__, "commands.regress.command")  # the names scripts imported from here before the move

if __name__ == "__main__":
    from .core.cli import run_main

    run_main(main)
