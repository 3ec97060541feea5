"""The layers of docs/architecture.md: every import, at module level or inside a function, runs
downward or within its layer; no module imports a command; no import circle, between files or
between folders."""
from __future__ import annotations

import ast
from pathlib import Path

from conftest import REPO

PACKAGE = REPO / "lsr_pyserini"
# rank of each layer; a module may import only modules of its own rank or lower
CORE, KERNELS, STORES, MODELS, USES_MODELS, ENGINES, API, SERVICE, COMMANDS = range(9)
# the doors (`python -m lsr_pyserini.X`: a few lines each at the top of the package) and the rooms that
# hold the commands (commands/, an engine folder's command.py, a package's __main__.py)
DOORS = {"encode", "export", "prepare", "expand", "rerank", "fuse", "search_dense", "bm25aug", "evaluate", "regress",
         "demo", "lucene", "seismic", "milvus", "pisa", "bmp", "search", "jvm", "ssr", "bench", "adapt",
         "__main__"}  # __main__: `python -m lsr_pyserini` lists the commands


def is_command(module: str) -> bool:
    parts = module.split(".")
    return (module in DOORS or parts[0] == "commands" or parts[-1] == "__main__"
            or (parts[0] == "engines" and parts[-1] == "command"))


def layer(module: str) -> int:
    """module: dotted name below lsr_pyserini ('' for the package itself)."""
    if is_command(module):
        return COMMANDS
    top = module.split(".")[0]
    return {"core": CORE, "kernels": KERNELS, "stores": STORES, "models": MODELS, "encoders": USES_MODELS,
            "rerankers": USES_MODELS, "train": USES_MODELS, "engines": ENGINES, "api": API, "": API, "moved": CORE,
            "pyterrier": API, "integrations": API, "sample": CORE, "serve": SERVICE}[top]


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
            if is_command(target) and not is_command(source):
                violations.append(f"{path.relative_to(REPO)}:{line} imports the command {target}")
            elif layer(target) > layer(source):
                violations.append(f"{path.relative_to(REPO)}:{line} ({source or 'lsr_pyserini'}) imports "
                                  f"{target or 'lsr_pyserini'} from a higher layer")
    assert not violations, "\n".join(violations)


def test_library_code_never_exits():
    exits = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = module_name(path)
        if is_command(name) or name == "core.cli":
            continue
        text = path.read_text()
        for needle in ("sys.exit(", "fail(", "SystemExit"):
            if needle in text:
                exits.append(f"{path.relative_to(REPO)}: {needle}")
    assert not exits, "\n".join(exits)


def import_graph() -> dict[str, set[str]]:
    """module -> the package's modules it imports (at module level or inside functions)."""
    graph: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        source = module_name(path)
        graph.setdefault(source, set())
        for _, target in imported_modules(path):
            target = resolves_to_module(target)
            if target != source:
                graph[source].add(target)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected group of more than one node (Tarjan), each as a sorted list."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(node):
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                group.append(member)
                if member == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def folder_of(module: str) -> str:
    """A module's folder below the package ('' for the top level: the API), the commands being a
    layer of their own wherever their file lies (`train/__main__.py` imports train's families)."""
    if is_command(module):
        return "<commands>"
    path = PACKAGE.joinpath(*module.split(".")) if module else PACKAGE
    if (path / "__init__.py").is_file():
        return module
    return ".".join(module.split(".")[:-1])


def test_no_import_circle_between_files():
    found = circles(import_graph())
    assert not found, "import circles: " + "; ".join(" <-> ".join(group or ["lsr_pyserini"]) for group in found)


def test_no_import_circle_between_folders():
    folders: dict[str, set[str]] = {}
    for source, targets in import_graph().items():
        folder = folder_of(source)
        folders.setdefault(folder, set()).update(folder_of(target) for target in targets if folder_of(target) != folder)
    found = circles(folders)
    assert not found, "folder circles: " + "; ".join(" <-> ".join(g or "lsr_pyserini" for g in group) for group in found)


def test_the_circle_check_finds_a_circle():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


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
        if is_command(name) or name == "core.cli":
            continue
        tree = ast.parse(path.read_text())
        found += [f"{path.relative_to(REPO)}:{line} calls print(" for line in calls(tree, "print")]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and any(alias.name == "warn" for alias in node.names):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} imports warn from {node.module}")
    assert not found, "\n".join(found)


def test_every_folder_of_modules_is_a_package_the_wheel_ships():
    """setup.cfg's `packages = find:` ships only folders with an __init__.py: a folder of modules
    without one works from the checkout (editable install) and is missing from the wheel."""
    missing = sorted(str(folder.relative_to(REPO)) for folder in PACKAGE.rglob("*")
                     if folder.is_dir() and folder.name != "__pycache__" and any(folder.glob("*.py"))
                     and not (folder / "__init__.py").is_file())
    assert not missing, f"folders of modules without __init__.py (left out of the wheel): {missing}"
