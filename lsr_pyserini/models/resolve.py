"""What an encoder name means, as one checked config: a preset (a name or a .yaml file: a partial
override of its family's settings) or a checkpoint folder trained here (its `lsr_family.json`
records the family and every setting it was trained with), plus the caller's overrides.

The result is the family's complete config (every setting of its schema, `models/<family>/config.py`)
with `family` and `name` added. A checkpoint written before checkpoints carried their settings (a
family marker only), or a folder with no marker (taken as SPLADE), still loads, with one warning
naming the defaults assumed.
"""
from __future__ import annotations

import logging
from pathlib import Path

from ..core.errors import InputError
from ..core.hf import FAMILY_FILE, read_family
from ..core.presets import CHECKSUM_KEY, checked_preset, load_preset
from ..core.records import current_family
from .registry import OLD_SETTINGS, schema_of

log = logging.getLogger(__name__)
DEFAULT_FAMILY = "splade"  # a checkpoint folder without a family marker


def checkpoint_settings(folder: Path) -> tuple[str, dict]:
    """(family, the settings the checkpoint records) of a folder; a warning for one without them."""
    marker = read_family(folder)
    family = marker.get("family", DEFAULT_FAMILY)
    schema = schema_of(family)
    # settings a family wrote beside its config before they were declared (bm25aug's scoring, k1, b;
    # SparseEmbed's dim; BGE-M3's body) or instead of one (pooling, augment): read as declared settings
    recorded = {k: v for k, v in marker.items() if k in schema and k not in ("model", "family", "config")}
    if family in OLD_SETTINGS:  # a file of the family's own (SSR's ssr_config.json), where a folder has one
        recorded = {**{k: v for k, v in OLD_SETTINGS[family](folder).items() if k in schema and k != "model"},
                    **recorded}
    if isinstance(marker.get("config"), dict):
        return family, schema.checked({**recorded, **marker["config"]}, f"checkpoint {folder}")
    assumed = {k: v for k, v in schema.defaults().items() if k != "model" and k not in recorded}
    what = f"{FAMILY_FILE} names only its family" if marker else f"no {FAMILY_FILE}: taken as a {family} checkpoint"
    log.warning(f"{folder}: a checkpoint without its settings ({what}); assuming the {family} defaults "
                + ", ".join(f"{k}={v}" for k, v in assumed.items()))
    return family, schema.checked(recorded, f"checkpoint {folder}")


def preset_settings(preset: dict) -> dict:
    """A checked preset's settings of its family (without its name, family and pinned digests)."""
    return {k: v for k, v in preset.items() if k not in ("family", "name", CHECKSUM_KEY)}


def family_of(name_or_path: str) -> str:
    """The family a preset or checkpoint folder belongs to (nothing else read or checked)."""
    folder = Path(name_or_path)
    if folder.is_dir():
        return read_family(folder).get("family", DEFAULT_FAMILY)
    return current_family(load_preset(name_or_path)["family"])


def resolve_settings(name_or_path: str, overrides: dict | None = None, source: str = "argument") -> dict:
    """The complete config `name_or_path` means, with `overrides` (None values ignored) applied;
    InputError in one line for an unknown key, a wrong type or a value outside the allowed set,
    naming where it came from."""
    overrides = {k: v for k, v in (overrides or {}).items() if v is not None}
    folder = Path(name_or_path)
    if folder.is_dir():
        family, given = checkpoint_settings(folder)
        given = {**given, "model": str(folder)}
        name, origin = folder.name, f"checkpoint {folder}"
    else:
        preset = checked_preset(load_preset(name_or_path), model_overridden="model" in overrides)
        family, name = current_family(preset["family"]), preset["name"]
        given, origin = preset_settings(preset), f"preset {name!r}"
    schema = schema_of(family)
    settings = schema.complete(given, origin)
    settings.update(schema.checked(overrides, source))
    refuse_other_family(settings.get("model"), family, origin)
    return {"family": family, "name": name, **settings}


def refuse_other_family(model, family: str, origin: str) -> None:
    """One line when `model` is a checkpoint folder this toolkit trained for another family than
    the one asked for (before any weight loads)."""
    if model and Path(str(model)).is_dir():
        trained = read_family(model).get("family")
        if trained is not None and trained != family:
            raise InputError(f"checkpoint {model} was trained as a {trained!r} model, not {family!r} "
                             f"(asked for by {origin}): use --encoder {model} alone, or a {family} checkpoint")


def base_settings(family: str, base: str) -> dict:
    """The settings a model trained from `base` starts with: the base's own (a preset or a checkpoint
    of `family`), else `family`'s defaults; with `model` the base's model."""
    schema = schema_of(family)
    folder = Path(base)
    if folder.is_dir():
        marker_family = read_family(folder).get("family")
        if marker_family == family:
            return {**schema.defaults(), **checkpoint_settings(folder)[1], "model": str(folder)}
        return {**schema.defaults(), "model": str(folder)}
    try:
        preset = load_preset(base)
    except InputError:  # not a preset: a hub id or a package reference, with the family's defaults
        return {**schema.defaults(), "model": base}
    preset = checked_preset(preset, model_overridden=False)
    if preset["family"] != family:
        return {**schema.defaults(), "model": preset["model"]}
    return schema.complete(preset_settings(preset), f"preset {preset['name']!r}")
