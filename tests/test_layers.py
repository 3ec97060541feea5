"""The layers of docs/architecture.md: every import, at module level or inside a function, runs
downward or within its layer; no module imports a command."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "lsr_pyserini"
# rank of each layer; a module may import only modules of its own rank or lower
CORE, STORES, MODELS, USES_MODELS, API, COMMANDS = range(6)
COMMAND_MODULES = {"encode", "prepare", "expand", "rerank", "fuse", "search_dense", "bm25aug", "evaluate",
                   "regress", "demo", "lucene", "seismic", "jvm", "train.__main__", "ssr.__main__"}


def layer(module: str) -> int:
    """module: dotted name below lsr_pyserini ('' for the package itself)."""
    if module in COMMAND_MODULES:
        return COMMANDS
    top = module.split(".")[0]
    return {"core": CORE, "stores": STORES, "encoders": MODELS, "ssr": MODELS, "rerankers": USES_MODELS,
            "train": USES_MODELS, "api": API, "first_stage": API, "": API, "sample": CORE}[top]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """(line, dotted name below lsr_pyserini) of every import of the package's own modules."""
    name = module_name(path)
    package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and node.module.split(".")[0] == "lsr_pyserini":
                target = node.module[len("lsr_pyserini."):] if "." in node.module else ""
            else:
                continue
            if node.module is None:  # from . import x, y: each name is a module
                found += [(node.lineno, ".".join(filter(None, [target, alias.name]))) for alias in node.names]
            else:
                found.append((node.lineno, target))
        elif isinstance(node, ast.Import):
            found += [(node.lineno, alias.name[len("lsr_pyserini."):]) for alias in node.names
                      if alias.name.startswith("lsr_pyserini.")]
    return found


def resolves_to_module(target: str) -> str:
    """The module a dotted target names (an attribute import resolves to its module)."""
    parts = target.split(".") if target else []
    while parts:
        path = PACKAGE.joinpath(*parts)
        if path.with_suffix(".py").is_file() or (path / "__init__.py").is_file():
            return ".".join(parts)
        parts = parts[:-1]
    return ""


def test_no_import_runs_upward_and_nothing_imports_a_command():
    violations = []
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        for line, target in imported_modules(path):
            target = resolves_to_module(target)
            if target in COMMAND_MODULES:
                violations.append(f"{path.relative_to(REPO)}:{line} imports the command {target}")
            elif layer(target) > layer(source):
                violations.append(f"{path.relative_to(REPO)}:{line} ({source or 'lsr_pyserini'}) imports "
                                  f"{target or 'lsr_pyserini'} from a higher layer")
    assert not violations, "\n".join(violations)


def test_library_code_never_exits():
    exits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name in COMMAND_MODULES or name == "core.cli":
            continue
        text = path.read_text()
        for needle in ("sys.exit(", "fail(", "SystemExit"):
            if needle in text:
                exits.append(f"{path.relative_to(REPO)}: {needle}")
    assert not exits, "\n".join(exits)


def calls(tree: ast.AST, name: str) -> list[int]:
    """Lines where `name(...)` is called (a plain name, not an attribute)."""
    return [node.lineno for node in ast.walk(tree)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name]


def test_library_code_logs_and_never_prints():
    """Library modules log (`logging.getLogger(__name__)`) and leave stderr to the commands: no
    `print(` and no command helper `warn` outside the commands and core/cli.py, which shows the
    records as `warning:` lines."""
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if name in COMMAND_MODULES or name == "core.cli":
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(REPO)}:{line} calls print(" for line in calls(tree, "print")]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(alias.name == "warn" for alias in node.names):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} imports warn from {node.module}")
    assert not found, "\n".join(found)
