"""Where the families make themselves known: one schema, and the encoder, dense side, re-rankers and
trainer each family offers, under its name.

A family is a package of `lsr_pyserini/models/`, or a package of its own named in the environment
variable `LSR_PYSERINI_FAMILIES` (comma-separated module names; every command and the API then
know it) or registered with `add_family_package`, whose modules register what it offers with the
decorators below when imported; `load_families()` imports every such package once. Nothing here imports a family by name, so the
adapters (encoders/, rerankers/, train/) reach every family through these tables alone.
"""
from __future__ import annotations

import importlib
import os
import pkgutil
from pathlib import Path
from typing import Callable

from ..core.declarations import Schema
from ..core.errors import InputError
from ..core.records import current_family

SCHEMAS: dict[str, Schema] = {}        # family -> the settings its encoder reads (models/<family>/config.py)
ENCODERS: dict[str, Callable] = {}     # family -> builder(**settings) -> SparseEncoder
DENSE_SIDES: dict[str, Callable] = {}  # family -> builder(settings of a dense store's manifest) -> dense side
RERANKERS: dict[str, Callable] = {}    # re-ranker name -> builder(store, options) -> Reranker
RERANKER_OPTIONS: dict[str, list] = {}  # re-ranker name -> its own options (models.base.Option)
TRAINERS: dict[str, Callable] = {}     # family -> builder(base, args) -> a module with loss(batch, step), save(folder)
OLD_SETTINGS: dict[str, Callable] = {}  # family -> reader(folder) -> declared settings a folder of before kept elsewhere
_EXTRA_PACKAGES: list[str] = []
FAMILIES_VARIABLE = "LSR_PYSERINI_FAMILIES"
_loaded = False


def family(schema: Schema) -> Schema:
    """Register a family's settings (its config.py calls this)."""
    SCHEMAS[schema.family] = schema
    return schema


def encoder(name: str):
    def decorator(builder):
        ENCODERS[name] = builder
        return builder

    return decorator


def dense_side(name: str):
    def decorator(builder):
        DENSE_SIDES[name] = builder
        return builder

    return decorator


def reranker(name: str, options: tuple = ()):
    def decorator(builder):
        RERANKERS[name] = builder
        RERANKER_OPTIONS[name] = list(options)
        return builder

    return decorator


def trainer(name: str, schema: Schema, default_base: str = "splade-tiny", reads_teacher: bool = False,
            model_settings: tuple[str, ...] = ()):
    """Register a training family: `schema` declares its training options (flags are generated from
    it), `model_settings` the model settings it takes from the command line too (recorded in the
    checkpoint's config), `default_base` the checkpoint it starts from, `reads_teacher` whether
    its loss reads `--teacher` scores."""
    def decorator(builder):
        builder.schema = schema
        builder.default_base = default_base
        builder.reads_teacher = reads_teacher
        builder.model_settings = model_settings
        TRAINERS[name] = builder
        return builder

    return decorator


def old_settings(name: str):
    """Register where a family's checkpoints of before kept settings outside `lsr_family.json` (SSR's
    ssr_config.json): reader(folder) -> {setting: value}; the marker's own values win."""
    def decorator(reader):
        OLD_SETTINGS[name] = reader
        return reader

    return decorator


def add_family_package(module: str) -> None:
    """Register a family that lives outside this package (its package registers itself on import)."""
    if module not in _EXTRA_PACKAGES:
        _EXTRA_PACKAGES.append(module)
    importlib.import_module(module)


def load_families() -> None:
    """Import every family package (each registers itself), once."""
    global _loaded
    if not _loaded:
        folder = Path(__file__).parent
        for info in sorted(pkgutil.iter_modules([str(folder)]), key=lambda info: info.name):
            if info.ispkg:
                importlib.import_module(f"{__package__}.{info.name}")
        _loaded = True
    for module in _EXTRA_PACKAGES + [m.strip() for m in os.environ.get(FAMILIES_VARIABLE, "").split(",") if m.strip()]:
        try:
            importlib.import_module(module)
        except ImportError as err:
            raise InputError(f"{FAMILIES_VARIABLE}: cannot import the family package {module!r} ({err})") from None


def schema_of(name: str) -> Schema:
    """The settings of family `name`; InputError naming the known families otherwise."""
    load_families()
    name = current_family(name)  # a checkpoint or preset of before ("transformer": the dense family)
    if name not in SCHEMAS:
        raise InputError(f"unknown encoder family {name!r} (known: {', '.join(sorted(SCHEMAS))})")
    return SCHEMAS[name]


def declared(name: str):
    """The declaration of setting `name` in the first encoder family that reads it (families that
    share a setting share its declaration: models/shared_settings.py)."""
    load_families()
    for family, schema in sorted(SCHEMAS.items()):
        if family in ENCODERS and name in schema:
            return schema[name]
    raise KeyError(name)
