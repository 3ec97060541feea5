"""Which parameters does no test vary? `python tests/audit_defaults.py` lists them.

A test that holds a parameter at its default cannot see that parameter ignored (DESIGN.md, Habits).
This script lists every parameter a user sets and that no test gives a non-default value, and exits 1
when one of them is not a named, justified exception (EXCEPTIONS), or an exception is no longer
needed. tests/test_audit.py runs it, so the README's test command
(which CI runs) runs it.

What it audits (built at run time: the commands' parsers are built, nothing is encoded or loaded):
- every command flag: for each door `python -m lsr_pyserini.C` (lsr_pyserini/__main__.py's list), its
  room's `build_parser()` (sub-commands included), or the parser its `main` builds (caught at
  `parse_args`), plus any module-level `*_parser()` of the room (lucene's merge-runs) and the lucene
  wrapper's own flags (the rest of `lucene`'s flags are Pyserini's, not this toolkit's). Flags whose
  help is `argparse.SUPPRESS` (old spellings kept as aliases) and -h/--help are left out;
- every keyword parameter with a default of the public API: `lsr_pyserini.__all__` (functions, and
  classes' `__init__` and public methods; dataclass records Hit and TermMatch and the exception are
  results, not parameters), the PyTerrier face's `__all__` the same way, and core/fusion.py's public
  functions (the fusion options);
- every engine option (the keyword arguments of each registered engine builder, with its default);
- every re-ranker option (the re-ranker registry's `Option`s, per re-ranker; their default is "not
  given": the family's own value).

How a test "varies" a parameter (a static scan of tests/**/*.py; precision over cleverness):
- tokens: in every call, list and tuple of a test file, its elements in order; a string constant that
  holds "--" and a space is split like a shell line (so "search --hits 5" is three tokens); any other
  expression (a name, an f-string's field) is an unknown value;
- a flag of command C is varied when a file that names C (the string "C" as a literal, the module
  `lsr_pyserini.C`, or its room's module path) has the token `--flag` followed by a value that differs
  from the default (after the flag's own type is applied to the literal), or `--flag=VALUE`. An
  unknown value counts only where the default is None or the flag is required (any value differs
  from "not given"). A switch (store_true/false/const, BooleanOptionalAction) is varied by its
  presence (`--flag`, or `--no-flag` for a default of True);
- an API parameter is varied when a call whose callee's last name is the function's, class's or
  method's name passes it (keyword `name=VALUE`, or positionally) a literal other than the default,
  or an unknown value where the default is None/False;
- an engine option `name` of engine E is varied, in a file that names E, by an `name=VALUE` piece of
  a string (`--engine-option k1=0.5`, `"k1=0.5,b=0.3"`), a dict entry `"name": VALUE`, or a keyword
  `name=VALUE`, VALUE differing from the builder's default (unknown values as above);
- a re-ranker option of re-ranker R is varied, in a file that names R, by its flag with any value,
  a dict entry `"dest": VALUE` or a keyword `dest=VALUE` (their default is "not given").
Flags are matched call by call: a call of `main` (or `M.main`) imported in the same function or
file from C's room or door is C's; another call or list is the command it names (`lsr_pyserini.C`,
or C as its first string; in a bare list only where C is no command's sub-command too); what names
no command (a list of arguments built apart) counts for every command its file names.
What it cannot see: sub-commands share their command's matches (`train splade --warmup-ratio`
counts for `train tilde --warmup-ratio`: one loop reads both); a valid value given in a test that
expects a refusal (another family's flag) counts as varied; values computed at run time count only
against a default of None. It never reports a parameter that a test varies, so what it prints is
real; what it passes is likely, not certain.
"""
from __future__ import annotations

import argparse
import ast
import contextlib
import io
import importlib
import inspect
import os
import re
import shlex
import sys
from dataclasses import dataclass, is_dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
UNKNOWN = object()  # a value the scan cannot read (a variable, an f-string field)
NOT_GIVEN = object()  # a default of "not given" (re-ranker options)

# The parameters no test varies, each with why none needs to. Keys are the lines the script prints.
EXCEPTIONS: dict[str, str] = {
    "api start_jvm heap": "varied by tests/core/test_java.py::test_start_jvm_heap_is_the_jvms_maximum_heap in the "
                          "script of a process of its own (a JVM starts once per process), which this scan does not "
                          "read",
    "flag encode corpus --ray-address": "connects to a Ray cluster already running at that address; the tests have "
                                        "none outside their process (tests/core/test_parallel.py runs the cluster "
                                        "`--ray` starts, the default)",
    "flag encode dense --ray-address": "connects to a Ray cluster already running at that address; the tests have "
                                       "none outside their process (tests/core/test_parallel.py runs the cluster "
                                       "`--ray` starts, the default)",
    "flag encode corpus --ray-gpus-per-actor": "GPUs each Ray actor reserves: on the CI's machines, which have no GPU, "
                                               "an actor that asks for one is never scheduled",
    "flag encode dense --ray-gpus-per-actor": "GPUs each Ray actor reserves: on the CI's machines, which have no GPU, "
                                              "an actor that asks for one is never scheduled",
}


@dataclass(frozen=True)
class Parameter:
    kind: str          # flag, api, engine, reranker
    owner: str         # command (sub-command), function, engine or re-ranker
    name: str          # --flag, keyword, option
    default: object
    mentions: tuple    # regexes: a test file must match one for a token in it to count
    switch: str = ""   # a switch's flag that differs from its default (flags only)
    kind_of: object = None  # the flag's argparse type (applied to a literal before comparing)

    @property
    def line(self) -> str:
        return f"{self.kind} {self.owner} {self.name}"


# ---- what is audited ---------------------------------------------------------------------------

class _Caught(Exception):
    def __init__(self, parser):
        self.parser = parser


def _parser_of_main(module) -> argparse.ArgumentParser | None:
    """The parser `module.main` builds, caught where it parses (nothing after that runs)."""
    original = argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args

    def catch(self, *args, **kwargs):
        raise _Caught(self)

    argparse.ArgumentParser.parse_args = argparse.ArgumentParser.parse_known_args = catch
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            module.main(["--audit-defaults"])
    except _Caught as caught:
        return caught.parser
    except BaseException:  # noqa: BLE001 (a main that does not use argparse: nothing to catch)
        return None
    finally:
        argparse.ArgumentParser.parse_args, argparse.ArgumentParser.parse_known_args = original
    return None


def command_rooms() -> dict[str, str]:
    """{command: the module that holds its parser}, from the doors' `forward_to(__name__, "ROOM")`."""
    sys.path.insert(0, str(ROOT))
    from lsr_pyserini.__main__ import command_files

    rooms = {}
    for name, path in command_files().items():
        if path.name == "__main__.py":
            rooms[name] = f"lsr_pyserini.{name}.__main__"
            continue
        forwarded = re.search(r'forward_to\(__name__, "([\w.]+)"\)', path.read_text(encoding="utf-8"))
        rooms[name] = f"lsr_pyserini.{forwarded.group(1)}" if forwarded else f"lsr_pyserini.{name}"
    return rooms


# the lucene wrapper's own flags (taken out of the arguments before Pyserini's tools parse the rest)
WRAPPER_FLAGS = {"lucene": ("--overwrite", "--unrecorded-topics")}


def _walk(parser: argparse.ArgumentParser, owner: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            SUB_COMMANDS.update(action.choices)
            for sub, subparser in action.choices.items():
                yield from _walk(subparser, f"{owner} {sub}")
        elif action.option_strings and action.help != argparse.SUPPRESS \
                and not isinstance(action, argparse._HelpAction):
            yield owner, action


def _switch(action) -> str:
    if isinstance(action, argparse.BooleanOptionalAction):  # "A|B": either differs from a default of None
        positive = [flag for flag in action.option_strings if not flag.startswith("--no-")][-1]
        negative = f"--no-{positive[2:]}"
        return negative if action.default is True else positive if action.default is False \
            else f"{positive}|{negative}"
    if isinstance(action, (argparse._StoreTrueAction, argparse._StoreFalseAction, argparse._StoreConstAction,
                           argparse._CountAction, argparse._AppendConstAction)):
        return [flag for flag in action.option_strings if flag.startswith("--")][-1]
    return ""


def flag_parameters() -> list[Parameter]:
    found = []
    for command, room in command_rooms().items():
        module = importlib.import_module(room)
        parsers = []
        builder = getattr(module, "build_parser", None)
        parsers.append(builder() if builder else _parser_of_main(module))
        parsers += [value() for key, value in vars(module).items()
                    if key.endswith("_parser") and key != "build_parser" and inspect.isfunction(value)
                    and value.__module__ == module.__name__]
        mentions = (rf"""["']{re.escape(command)}["']""", rf"lsr_pyserini\.{command}\b", re.escape(room))
        owner_of = {}
        for parser in filter(None, parsers):
            sub = "" if parser is parsers[0] else " " + parser.prog.split()[-1]
            for owner, action in _walk(parser, command + sub):
                flag = max(action.option_strings, key=len)
                required = action.required or action.default is None
                found.append(Parameter("flag", owner, flag, None if required else action.default, mentions,
                                       _switch(action), action.type))
                owner_of[flag] = owner
        for flag in WRAPPER_FLAGS.get(command, ()):
            found.append(Parameter("flag", command, flag, False, mentions, flag))
    return sorted({parameter.line: parameter for parameter in found}.values(), key=lambda p: p.line)


def _signature_parameters(owner: str, function, names: tuple) -> list[Parameter]:
    mentions = tuple(rf"\b{re.escape(name)}\b" for name in names)
    found = []
    for parameter in inspect.signature(function).parameters.values():
        if parameter.name in ("self", "cls") or parameter.default is inspect.Parameter.empty \
                or parameter.kind in (parameter.VAR_KEYWORD, parameter.VAR_POSITIONAL):
            continue
        found.append(Parameter("api", owner, parameter.name, parameter.default, mentions))
    return found


def api_parameters() -> list[Parameter]:
    import lsr_pyserini
    import lsr_pyserini.core.fusion as fusion
    import lsr_pyserini.pyterrier as pyterrier

    faces = [(lsr_pyserini, lsr_pyserini.__all__, ""),
             (pyterrier, pyterrier.__all__, "pyterrier."),
             (fusion, [name for name, value in vars(fusion).items() if inspect.isfunction(value)
                       and not name.startswith("_") and value.__module__ == fusion.__name__], "fusion.")]
    found = []
    for module, names, prefix in faces:
        for name in names:
            value = getattr(module, name)
            if inspect.isclass(value):
                if is_dataclass(value) or issubclass(value, BaseException):
                    continue  # a result record or the error: no parameter a user sets
                found += _signature_parameters(prefix + name, value.__init__, (name,))
                for method_name, method in vars(value).items():
                    if inspect.isfunction(method) and not method_name.startswith("_"):
                        found += _signature_parameters(f"{prefix}{name}.{method_name}", method, (method_name,))
            elif callable(value):
                found += _signature_parameters(prefix + name, value, (name,))
    return found


def engine_parameters() -> list[Parameter]:
    from lsr_pyserini.engines import ENGINES, available_engines

    found = []
    for engine in available_engines():
        parameters = list(inspect.signature(ENGINES[engine]).parameters.values())[1:]  # after the index
        for parameter in parameters:
            if parameter.kind in (parameter.KEYWORD_ONLY, parameter.POSITIONAL_OR_KEYWORD):
                default = None if parameter.default is inspect.Parameter.empty else parameter.default
                found.append(Parameter("engine", engine, parameter.name, default,
                                       (rf"""["']{re.escape(engine)}["']""", rf"engine {re.escape(engine)}\b")))
    return found


def reranker_parameters() -> list[Parameter]:
    from lsr_pyserini.models.registry import RERANKER_OPTIONS
    from lsr_pyserini.rerankers import available_rerankers

    found = []
    for reranker in available_rerankers():
        for option in RERANKER_OPTIONS.get(reranker, []):
            found.append(Parameter("reranker", reranker, option.flag, NOT_GIVEN,
                                   (rf"""["']{re.escape(reranker)}["']""", rf"--reranker {re.escape(reranker)}\b")))
    return found


def audited() -> list[Parameter]:
    return flag_parameters() + api_parameters() + engine_parameters() + reranker_parameters()


# ---- what the tests give -----------------------------------------------------------------------

def _value(node):
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return -node.operand.value
    if isinstance(node, (ast.Tuple, ast.List)):
        values = tuple(_value(element) for element in node.elts)
        return UNKNOWN if any(value is UNKNOWN for value in values) else values
    return UNKNOWN


def _tokens(node) -> list:
    """A string that reads as a command line split into its words; another constant as itself."""
    value = _value(node)
    if isinstance(value, str) and "--" in value and " " in value.strip():
        try:
            return shlex.split(value)
        except ValueError:
            return value.split()
    if isinstance(node, ast.JoinedStr):  # f"--hits {n} --output {path}": the constant words, fields unknown
        words = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                words += part.value.split()
            else:
                words.append(UNKNOWN)
        return words
    return [value]


@dataclass
class TestFile:
    path: Path
    text: str
    sequences: list   # (command or None, tokens): calls' arguments, lists, tuples, command-line strings
    keywords: list    # (callee's last name, keyword, value)
    positionals: list  # (callee's last name, index, value)
    pairs: list       # (dict key, value) with a string key
    strings: list     # every string constant


def _callee(node: ast.Call) -> str:
    func = node.func
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _elements(node, consumed: set | None = None, nested: bool = True) -> list:
    """The tokens of a call's arguments or a list's elements, with lists given inline (a call's
    `main([...])`, `*[...]` anywhere) flattened, their nodes added to `consumed` (read once, as part
    of this sequence). `nested` False: a list's own list or tuple elements (steps of a pipeline, each
    its own command) stay sequences of their own."""
    tokens = []
    for element in node:
        starred = isinstance(element, ast.Starred)
        inner = element.value if starred else element
        if isinstance(inner, (ast.List, ast.Tuple)) and (nested or starred):
            if consumed is not None:
                consumed.add(id(inner))
            tokens += _elements(inner.elts, consumed, nested=False)
        else:
            if consumed is not None and isinstance(inner, ast.Constant):
                consumed.add(id(inner))
            tokens += _tokens(inner)
    return tokens


def _command_of(tokens: list, commands: dict[str, str], call: bool = True) -> str | None:
    """The command a token sequence runs: `lsr_pyserini.C` anywhere in it, or C as its first string
    (in a list rather than a call's arguments, only where C is no command's sub-command as well:
    `["search", "--index", ...]` may be the arguments of `pisa`'s main)."""
    strings = [token for token in tokens if isinstance(token, str)]
    for token in strings:
        if token.startswith("lsr_pyserini.") and token[len("lsr_pyserini."):] in commands:
            return token[len("lsr_pyserini."):]
    if strings and strings[0] in commands and (call or strings[0] not in SUB_COMMANDS):
        return strings[0]
    return None


SUB_COMMANDS: set[str] = set()  # the sub-commands' names (filled with the flags)


def _imported_mains(scope, modules: dict[str, str]) -> dict[str, str]:
    """{local name: command} of the names `scope` imports from a command's room or door."""
    names = {}
    for node in ast.walk(scope):
        if isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:  # `from ROOM import main`, or `from lsr_pyserini import evaluate`
                module = modules.get(node.module) or modules.get(f"{node.module}.{alias.name}")
                if module is not None:
                    names[alias.asname or alias.name] = module
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in modules and alias.asname:
                    names[alias.asname] = modules[alias.name]
    return names


def scan(path: Path, commands: dict[str, str]) -> TestFile:
    """`commands`: {command: its room module}. A call of a name imported (in the same function, or
    at the top of the file) from a command's room or door is that command's; another sequence is
    the command it names (`_command_of`), or None (counted for every command the file names)."""
    text = path.read_text(encoding="utf-8")
    found = TestFile(path, text, [], [], [], [], [])
    modules = {room: command for command, room in commands.items()}
    modules.update({f"lsr_pyserini.{command}": command for command in commands})
    tree = ast.parse(text)
    top = _imported_mains(ast.Module(body=[n for n in tree.body if isinstance(n, ast.ImportFrom)], type_ignores=[]),
                          modules)
    scopes = [node for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))]
    rest = ast.Module(body=[node for node in tree.body if node not in scopes], type_ignores=[])
    consumed: set[int] = set()  # lists and strings already read as part of an enclosing sequence
    for scope in [rest, *scopes]:
        mains = {**top, **_imported_mains(scope, modules)}
        for node in ast.walk(scope):  # breadth first: a call or a list before the lists inside it
            if id(node) in consumed and isinstance(node, (ast.List, ast.Tuple)):
                continue
            if isinstance(node, ast.Call):
                tokens = _elements(node.args, consumed)
                callee = _callee(node)
                func = node.func  # main(...) imported from a room, or evaluate.main(...) of a module imported
                owner = mains.get(func.id) if isinstance(func, ast.Name) else \
                    mains.get(func.value.id) if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                    else None
                found.sequences.append((owner or _command_of(tokens, commands), tokens))
                for keyword in node.keywords:
                    if keyword.arg:
                        found.keywords.append((callee, keyword.arg, _value(keyword.value)))
                for index, arg in enumerate(node.args):
                    found.positionals.append((callee, index, _value(arg)))
            elif isinstance(node, (ast.List, ast.Tuple)):
                tokens = _elements(node.elts, consumed, nested=False)
                found.sequences.append((_command_of(tokens, commands, call=False), tokens))
            elif isinstance(node, ast.Dict):
                for key, value in zip(node.keys, node.values):
                    if isinstance(key, ast.Constant) and isinstance(key.value, str):
                        found.pairs.append((key.value, _value(value)))
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.strings.append(node.value)
                if "--" in node.value and " " in node.value.strip() and id(node) not in consumed:  # a command line
                    tokens = _tokens(node)
                    found.sequences.append((_command_of(tokens, commands), tokens))
    return found


def _differs(value, default, kind_of=None) -> bool:
    """Whether a value a test gives differs from the default (unknown: only from "not given")."""
    if value is UNKNOWN:
        return default is None or default is False or default is NOT_GIVEN
    if default is NOT_GIVEN:
        return True
    if kind_of is not None and isinstance(value, str) and callable(kind_of):
        try:
            value = kind_of(value)
        except Exception:  # noqa: BLE001 (a value its type refuses: a refusal test, not a variation)
            return False
    for candidate in (value, str(value)):
        if candidate == default or (isinstance(default, (int, float)) and not isinstance(default, bool)
                                    and _number(candidate) == default):
            return False
    if isinstance(default, (list, tuple)) and isinstance(value, str) and value == ",".join(map(str, default)):
        return False
    return True


def _number(value):
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _flag_values(test: TestFile, flag: str, command: str | None = None, named: bool = True):
    """The values `flag` is given in `test`'s sequences of `command` (and, where the file names the
    command, in those of no command); every sequence's when `command` is None."""
    for owner, sequence in test.sequences:
        if command is not None and owner != command and not (owner is None and named):
            continue
        for index, token in enumerate(sequence):
            if token == flag:
                yield sequence[index + 1] if index + 1 < len(sequence) else UNKNOWN
            elif isinstance(token, str) and token.startswith(flag + "="):
                yield token.split("=", 1)[1]


def _present(test: TestFile, switch: str, command: str, named: bool) -> bool:
    return any(flag in sequence for owner, sequence in test.sequences
               if owner == command or (owner is None and named) for flag in switch.split("|"))


def _option_strings(test: TestFile, name: str):
    pattern = re.compile(rf"(?:^|[\s,]){re.escape(name)}=([^\s,]*)")
    for string in test.strings:
        for match in pattern.finditer(string):
            yield match.group(1)


def varied(parameter: Parameter, tests: list[TestFile]) -> Path | None:
    """The first test file that varies `parameter`, or None."""
    mentions = [re.compile(pattern) for pattern in parameter.mentions]
    for test in tests:
        named = any(pattern.search(test.text) for pattern in mentions)
        if parameter.kind == "flag":
            command = parameter.owner.split()[0]
            if command in SUB_COMMANDS:  # "bm25aug" names `train bm25aug` as often: only its module names it
                named = any(pattern.search(test.text) for pattern in mentions[1:])
            if parameter.switch:
                if _present(test, parameter.switch, command, named):
                    return test.path
            elif any(_differs(value, parameter.default, parameter.kind_of)
                     for value in _flag_values(test, parameter.name, command, named)):
                return test.path
            continue
        if not named:
            continue
        if parameter.kind == "api":
            function = parameter.owner.split(".")[-1]
            if any(callee == function and keyword == parameter.name and _differs(value, parameter.default)
                   for callee, keyword, value in test.keywords):
                return test.path
            if any(callee == function and _differs(value, parameter.default)
                   for callee, index, value in test.positionals if index == _position(parameter)):
                return test.path
        else:
            name = parameter.name.lstrip("-").replace("-", "_")
            if parameter.kind == "reranker" and any(True for _ in _flag_values(test, parameter.name)):
                return test.path
            if any(_differs(value, parameter.default) for value in _option_strings(test, name)) \
                    or any(key == name and _differs(value, parameter.default) for key, value in test.pairs) \
                    or any(keyword == name and _differs(value, parameter.default)
                           for _, keyword, value in test.keywords):
                return test.path
    return None


_POSITIONS: dict[str, int] = {}


def _position(parameter: Parameter) -> int:
    """The parameter's index among a call's positional arguments (-1: keyword-only)."""
    return _POSITIONS.get(parameter.line, -1)


def _record_positions() -> None:
    import lsr_pyserini
    import lsr_pyserini.core.fusion as fusion
    import lsr_pyserini.pyterrier as pyterrier

    for module, prefix in ((lsr_pyserini, ""), (pyterrier, "pyterrier."), (fusion, "fusion.")):
        for name in getattr(module, "__all__", None) or [n for n in vars(module) if not n.startswith("_")]:
            value = getattr(module, name, None)
            functions = []
            if inspect.isclass(value):
                functions.append((prefix + name, value.__init__))
                functions += [(f"{prefix}{name}.{key}", method) for key, method in vars(value).items()
                              if inspect.isfunction(method)]
            elif inspect.isfunction(value):
                functions.append((prefix + name, value))
            for owner, function in functions:
                try:
                    parameters = list(inspect.signature(function).parameters.values())
                except (TypeError, ValueError):
                    continue
                positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
                              and p.name not in ("self", "cls")]
                for index, p in enumerate(positional):
                    _POSITIONS[f"api {owner} {p.name}"] = index


def test_files() -> list[TestFile]:
    commands = command_rooms()
    return [scan(path, commands) for path in sorted(TESTS.rglob("*.py"))
            if path.name not in ("audit_defaults.py", "mutants.py")]


def unvaried() -> list[str]:
    """The lines of the parameters no test varies."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    parameters = audited()
    _record_positions()
    tests = test_files()
    return sorted({parameter.line for parameter in parameters if not varied(parameter, tests)})


def main(argv: list[str] | None = None) -> int:
    argv = argv or []
    if argv[:1] == ["--why"]:  # --why "flag fuse --rrf-k": the test file that varies it
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        parameters = [parameter for parameter in audited() if parameter.line == " ".join(argv[1:])]
        _record_positions()
        tests = test_files()
        for parameter in parameters:
            print(parameter.line, "->", varied(parameter, tests) or "varied by no test")
        return 0 if parameters else 1
    lines = unvaried()
    unexplained = [line for line in lines if line not in EXCEPTIONS]
    for line in lines:
        print(f"{line}\t{EXCEPTIONS.get(line) or 'NOT VARIED BY ANY TEST'}")
    stale = sorted(set(EXCEPTIONS) - set(lines))
    for line in stale:
        print(f"{line}\tSTALE: varied now or gone; take it out of EXCEPTIONS")
    print(f"{len(lines)} not varied: {len(lines) - len(unexplained)} justified, {len(unexplained)} unexplained",
          file=sys.stderr)
    failing = unexplained + stale
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
