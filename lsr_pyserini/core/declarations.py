"""Declared settings: each setting of a model family said once (name, type, default, allowed values,
help), and everything that reads or writes one goes through that declaration: presets, checkpoint
configs, keyword arguments of the Python API and the flags of the commands.

A `Setting` is one declaration; a `Schema` is the set of settings one family (or one training
family) reads. `Schema.checked` refuses an unknown key, a value of the wrong type or one outside the
allowed set in one line naming the key, where the value came from (`source`: a preset, a
checkpoint, a flag) and what is allowed; `Schema.complete` adds the defaults. `Setting.add_to`
puts the setting on an argparse parser as a flag whose type, choices, default and help are the
declaration's.
"""
from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

from .errors import InputError

UNSET = object()  # a flag not given on the command line (its default is the schema's, applied later)


@dataclass(frozen=True)
class Setting:
    """One setting: `type` is an argparse type (numbers: one of `core.options`) or None for text;
    a boolean default makes a yes/no setting; `choices` the allowed values; `nullable`: None is
    allowed (meaning stated in the help, e.g. 'none = keep all')."""

    name: str
    default: Any
    help: str
    type: Callable | None = None
    choices: tuple | None = None
    nullable: bool = False
    flag_name: str | None = None  # the command-line flag, where it is not --the-name (e.g. --augmentation)

    def but(self, **changes) -> "Setting":
        """The same setting with another default (or help) for one family."""
        return dataclasses.replace(self, **changes)

    @property
    def flag(self) -> str:
        return self.flag_name or "--" + self.name.replace("_", "-")

    @property
    def is_bool(self) -> bool:
        return isinstance(self.default, bool) or self.choices == (True, False)

    def allowed(self) -> str:
        if self.choices:
            return "one of " + ", ".join(map(str, self.choices)) + (" or null" if self.nullable else "")
        if self.is_bool:
            return "true or false"
        if self.type is not None:
            description = getattr(self.type, "description", getattr(self.type, "__name__", "a value"))
            return description + (" or null" if self.nullable else "")
        return "a string" + (" or null" if self.nullable else "")

    def check(self, value, source: str):
        """The value as the setting takes it; InputError in one line otherwise."""
        if value is None and (self.nullable or self.default is None):
            return None
        problem = None
        if self.is_bool:
            if not isinstance(value, bool):  # (a nullable one's None was taken above)
                problem = f"expected true or false, got {value!r}"
        elif self.type is not None:
            try:
                value = self.type(value)
            except (argparse.ArgumentTypeError, TypeError, ValueError) as err:
                problem = str(err)
        elif self.choices is None and not isinstance(value, str):
            problem = f"expected a string, got {value!r}"
        if problem is None and self.choices is not None and value not in self.choices:
            problem = f"{value!r} is not {self.allowed()}"
        if problem:
            raise InputError(f"{self.name}: {problem} ({source})")
        return value

    def add_to(self, parser, flag: str | None = None, help: str | None = None, default=UNSET,
               default_text: str | None = None, **extra) -> None:
        """This setting as a command-line flag. `default=UNSET` leaves the value unset when the flag is
        not given (the schema's default, or a preset's or checkpoint's value, applies later);
        `default_text` says in the help where the default then comes from."""
        text = help or self.help
        if flag is None or flag == self.flag:
            extra.setdefault("dest", self.name)  # --augmentation sets `augment`
        shown = self.default if default is UNSET else default
        if default_text is not None:
            shown = default_text
        if self.is_bool and self.default is False:  # an off switch turned on: a plain flag (--no-in-batch, --balanced)
            parser.add_argument(flag or self.flag, action="store_true", default=None if default is UNSET else default,
                                help=f"{text} (default: {default_text or 'off'})", **extra)
            return
        if self.is_bool:
            parser.add_argument(flag or self.flag, action=argparse.BooleanOptionalAction,
                                default=None if default is UNSET else default,
                                help=f"{text} (default: {shown if default_text else 'yes' if shown else 'no'})",
                                **extra)
            return
        kind = self.type if self.type is not None else str
        parser.add_argument(flag or self.flag, type=kind, choices=self.choices,
                            default=None if default is UNSET else default,
                            help=f"{text} (default: {'none' if shown is None else shown})", **extra)


@dataclass(frozen=True)
class Schema:
    """The settings one family reads."""

    family: str
    settings: tuple[Setting, ...]

    def __post_init__(self):
        names = [s.name for s in self.settings]
        if len(set(names)) != len(names):
            raise ValueError(f"schema {self.family!r} declares a setting twice")

    def __contains__(self, name: str) -> bool:
        return any(s.name == name for s in self.settings)

    def __getitem__(self, name: str) -> Setting:
        for setting in self.settings:
            if setting.name == name:
                return setting
        raise KeyError(name)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.settings]

    def defaults(self) -> dict:
        return {s.name: s.default for s in self.settings}

    def checked(self, values: Mapping, source: str, ignore: Iterable[str] = ()) -> dict:
        """The given values checked (no defaults added); `ignore`: keys read elsewhere (a preset's
        name or checksum)."""
        ignore = set(ignore)
        checked = {}
        for key, value in values.items():
            if key in ignore:
                continue
            if key not in self:
                raise InputError(f"setting {key!r} is not read by the {self.family} family ({source}; it reads: "
                                 f"{', '.join(sorted(self.names))})")
            setting = self[key]
            if value is None and not setting.nullable and setting.default is not None:
                continue  # not given: the default (or an earlier source's value) stands
            checked[key] = setting.check(value, source)
        return checked

    def complete(self, values: Mapping, source: str) -> dict:
        """Defaults, then the given values (checked)."""
        return {**self.defaults(), **self.checked(values, source)}

    def extended(self, family: str, *settings: Setting, replace: Iterable[Setting] = ()) -> "Schema":
        """Another schema with these settings added and `replace`'s defaults or help changed."""
        changed = {s.name: s for s in replace}
        return Schema(family, tuple(changed.get(s.name, s) for s in self.settings) + tuple(settings))
