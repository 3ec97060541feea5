"""The Python API's arguments, checked at its entry points as the commands check their flags: a
wrong type or value is one `InputError` line naming the argument ("k: expected an integer >= 1,
got '10'"), never a TypeError, ValueError or KeyError from deep inside.

Numbers go through the commands' own argparse types (core/options.py, via `checked`); the rest
are the few shapes the API takes: a path, a name among choices, a mapping of options, a list of
texts or query ids. Each returns the value in the form the code below it expects (a path as str,
query ids as str), so an entry point calls these once and passes the result on.
"""
from __future__ import annotations

import os
from collections.abc import Collection, Mapping

from .errors import InputError
from .options import checked

__all__ = [
    "checked",
    "choice_arg",
    "flag_arg",
    "index_arg",
    "name_arg",
    "number_arg",
    "options_arg",
    "path_arg",
    "qids_arg",
    "sequence_of_numbers",
    "texts_arg",
]


def _shown(value) -> str:
    return f"{type(value).__name__} {value!r}" if not isinstance(value, str) else repr(value)


def path_arg(name: str, value, optional: bool = False) -> str | None:
    """A path (str or os.PathLike) as str; None only where `optional`."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name}: expected a path{' or None' if optional else ''}, got {_shown(value)}")
    return value


def name_arg(name: str, value, optional: bool = False) -> str | None:
    """A preset name or a checkpoint path (str or os.PathLike) as str; None only where `optional`."""
    if value is None and optional:
        return None
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str) or not value.strip():
        raise InputError(f"{name}: expected a name or a path{' or None' if optional else ''}, got {_shown(value)}")
    return value


def choice_arg(name: str, value, choices: Collection[str], optional: bool = False) -> str | None:
    """One of `choices` (as argparse's `choices=`: "invalid choice ... (choose from ...)")."""
    if value is None and optional:
        return None
    if not isinstance(value, str) or value not in choices:
        raise InputError(f"{name}: invalid choice: {value!r} (choose from {', '.join(map(repr, choices))})")
    return value


def flag_arg(name: str, value) -> bool:
    """True or False (not 0, 1 or "false", which would read as the opposite of what was meant)."""
    if not isinstance(value, bool):
        raise InputError(f"{name}: expected True or False, got {_shown(value)}")
    return value


def options_arg(name: str, value) -> dict:
    """A mapping of option names (str) to values, or None for none, as a new dict."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise InputError(f"{name}: expected a dict of options (name: value), got {_shown(value)}")
    bad = [key for key in value if not isinstance(key, str)]
    if bad:
        raise InputError(f"{name}: option names are strings, got {_shown(bad[0])}")
    return dict(value)


def texts_arg(name: str, value) -> list[str]:
    """A list (or tuple) of strings; one string alone is refused (it would be searched letter by letter)."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InputError(f"{name}: expected a list of strings, got {_shown(value)}")
    bad = [item for item in value if not isinstance(item, str)]
    if bad:
        raise InputError(f"{name}: expected a list of strings, got an item {_shown(bad[0])}")
    return list(value)


def qids_arg(name: str, value) -> list[str]:
    """Query ids: a list (or tuple) of strings or integers (PyTerrier's and pandas' ids), as str."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise InputError(f"{name}: expected a list of query ids (strings or integers), got {_shown(value)}")
    import numbers

    bad = [item for item in value if isinstance(item, bool) or not isinstance(item, (str, numbers.Integral))]
    if bad:
        raise InputError(f"{name}: query ids are strings or integers, got {_shown(bad[0])}")
    return [str(item) for item in value]


def index_arg(value):
    """An index: a path, an address, "A,B,C", or a list of paths (sharded); paths as str."""
    if isinstance(value, (list, tuple)):
        if not value:
            raise InputError("index: expected a path or a list of paths, got an empty list")
        return [path_arg("index", item) for item in value]
    return path_arg("index", value)


def number_arg(name: str, value, kind, optional: bool = False):
    """`value` through the commands' argparse number type `kind` (core/options.py), given as a
    number: the text "10" that a flag reads is a wrong type here (it would compare as text)."""
    if value is None and optional:
        return None
    if isinstance(value, (str, bytes)):
        raise InputError(f"{name}: expected {kind.description}, got {value!r} (a string, not a number)")
    return checked(name, value, kind)


def sequence_of_numbers(name: str, value, kind, length: int | None = None, what: str = "") -> list:
    """A list of numbers of type `kind`, of `length` items where given."""
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        try:
            import numpy

            if isinstance(value, numpy.ndarray):
                value = value.tolist()
        except ImportError:  # pragma: no cover
            pass
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, (list, tuple)):
        raise InputError(f"{name}: expected a list of numbers, got {_shown(value)}")
    if length is not None and len(value) != length:
        raise InputError(f"{name}: {len(value)} given for {length} {what}: give one per {what.rstrip('s') or 'item'}")
    return [number_arg(name, item, kind) for item in value]

