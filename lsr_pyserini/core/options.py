"""Validation of every numeric setting, in one place: the argparse types of the commands' options
(`type=positive_int`, ...) and `checked`, which applies the same types to the Python API's keyword
arguments; plus `refuse_foreign`, the one refusal of an option that belongs to another re-ranker,
encoder or training family.

A type refuses a bad value with `argparse.ArgumentTypeError` (argparse then prints one
`error: argument --x: expected ..., got '...'` line and exits 2); `checked` turns that into an
`InputError` naming the keyword. Integers must be written as integers; reals must be finite (no nan
or inf). Numbers already parsed pass through unchanged, so applying a type twice is harmless.
"""
from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass
from typing import Callable, Collection, Iterable, Mapping

from .errors import InputError


@dataclass(frozen=True)
class Number:
    """An integer or a finite real within optional bounds (`low_open`: low itself excluded)."""

    integer: bool
    low: float | None = None
    high: float | None = None
    low_open: bool = False

    @property
    def description(self) -> str:
        kind = "an integer" if self.integer else "a number" if self.high is not None else "a finite number"
        if self.low is not None and self.high is not None:
            return f"{kind} in [{_shown(self.low)}, {_shown(self.high)}]"
        if self.low is not None:
            return f"{kind} {'>' if self.low_open else '>='} {_shown(self.low)}"
        return kind

    def __call__(self, value):
        number = self._parse(value)
        if number is None or (not self.integer and not math.isfinite(number)) \
                or (self.low is not None and (number <= self.low if self.low_open else number < self.low)) \
                or (self.high is not None and number > self.high):
            raise argparse.ArgumentTypeError(f"expected {self.description}, got {value!r}")
        return number

    def _parse(self, value):
        """The number `value` holds (a command-line string or a number), or None."""
        if isinstance(value, bool):
            return None
        if isinstance(value, str):
            try:
                return int(value) if self.integer else float(value)
            except ValueError:
                return None
        if isinstance(value, numbers.Integral) or (not self.integer and isinstance(value, numbers.Real)):
            return value
        return None


def _shown(bound: float) -> str:
    return str(bound) if isinstance(bound, int) else f"{bound:g}"


positive_int = Number(integer=True, low=1)
non_negative_int = Number(integer=True, low=0)
finite_float = Number(integer=False)
positive_float = Number(integer=False, low=0, low_open=True)
non_negative_float = Number(integer=False, low=0)
probability = Number(integer=False, low=0, high=1)
random_seed = Number(integer=True, low=0, high=2**32 - 1)  # what numpy's generators accept


def int_in(low: int, high: int | None = None) -> Number:
    """Integers in [low, high] (no upper bound when `high` is None)."""
    return Number(integer=True, low=low, high=high)


def float_in(low: float, high: float) -> Number:
    """Reals in [low, high]."""
    return Number(integer=False, low=low, high=high)


@dataclass(frozen=True)
class NamedNumbers:
    """`NAME=NUMBER,NAME=NUMBER` (or a mapping) with names from `names` and values of type `value`,
    as {name: number}; `what` names a name in messages (e.g. 'head')."""

    names: tuple[str, ...]
    value: Number
    what: str = "name"

    def __call__(self, text) -> dict:
        if isinstance(text, Mapping):
            items = list(text.items())
        else:
            items = [item.split("=", 1) for item in str(text).split(",")]
            malformed = next((item for item in items if len(item) != 2), None)
            if malformed:
                raise argparse.ArgumentTypeError(f"{malformed[0]!r} is not {self.what.upper()}=NUMBER")
        result = {}
        for name, number in items:
            name = str(name).strip()
            if name not in self.names:
                raise argparse.ArgumentTypeError(f"unknown {self.what} {name!r} (known: {', '.join(self.names)})")
            if name in result:
                raise argparse.ArgumentTypeError(f"{self.what} {name!r} given twice")
            try:
                result[name] = self.value(number.strip() if isinstance(number, str) else number)
            except argparse.ArgumentTypeError as err:
                raise argparse.ArgumentTypeError(f"{name}: {err}") from None
        return result


def checked(name: str, value, kind: Callable):
    """`value` through the argparse type `kind`, for settings given through the Python API:
    InputError naming `name` when `kind` refuses it."""
    try:
        return kind(value)
    except argparse.ArgumentTypeError as err:
        raise InputError(f"{name}: {err}") from None


def refuse_foreign(given: Iterable[str], owners: Mapping[str, Collection[str]], chosen: str,
                   kind: tuple[str, str]) -> None:
    """InputError for the first option in `given` that `chosen` does not read: `owners` maps each
    option to the names that read it; `kind` is the (singular, plural) noun of those names, e.g.
    ('re-ranker', 're-rankers')."""
    for option in given:
        names = [repr(name) for name in sorted(owners.get(option, ()))]
        if not names:
            raise InputError(f"{option} is not an option of {chosen!r}")
        if repr(chosen) not in names:
            listed = " and ".join([", ".join(names[:-1]), names[-1]] if len(names) > 1 else names)
            raise InputError(f"{option} is an option of the {listed} {kind[len(names) != 1]}, not of {chosen!r}")


def engine_option(text: str) -> tuple[str, object]:
    """KEY=VALUE, the value read as a number or true/false where it is one."""
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"{text!r}: expected KEY=VALUE")
    for kind in (int, float):
        try:
            return key, kind(value)
        except ValueError:
            pass
    return key, {"true": True, "false": False}.get(value.lower(), value)
