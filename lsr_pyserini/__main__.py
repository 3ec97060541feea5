"""The toolkit's commands, one line each: `python -m lsr_pyserini`.

Each is `python -m lsr_pyserini.COMMAND --help` for its flags. The list is read from the commands'
own first docstring lines (parsed, not imported: no model, JVM or torch is loaded to print it), so
a new command is listed once it has a `__main__` guard (or is a package with `__main__.py`).
"""
from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent
GUARD = 'if __name__ == "__main__":'


def command_files() -> dict[str, Path]:
    """{command: the file whose docstring describes it}: top-level modules that run as a command and
    packages with a __main__.py."""
    found = {path.stem: path for path in PACKAGE.glob("*.py")
             if path.stem not in ("__init__", "__main__") and GUARD in path.read_text(encoding="utf-8")}
    found.update({path.parent.name: path for path in PACKAGE.glob("*/__main__.py")})
    return dict(sorted(found.items()))


def summary(path: Path) -> str:
    """The first line of a file's docstring, without its final full stop."""
    docstring = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return docstring.strip().splitlines()[0].rstrip(".") if docstring.strip() else ""


def main() -> int:
    commands = command_files()
    width = max(map(len, commands))
    print("lsr-pyserini commands (python -m lsr_pyserini.COMMAND --help for each one's flags):\n")
    for name, path in commands.items():
        print(f"  {name:<{width}}  {summary(path)}")
    print("\nThe pipeline on SciFact, one command a step: README.md; every page: docs/README.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
