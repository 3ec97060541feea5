"""The one training loop: AdamW, linear warm-up and decay, clipping, progress bar with the loss,
checkpoints that resume exactly (model, optimiser, scheduler, RNG and position in the data): the
resumed run's weights are bit for bit the uninterrupted run's (on the same CPU and thread count), an
interruption anywhere in a step included. A Ctrl-C during a step's forward or backward pass drops
that step (its gradients; the RNG goes back to the step's start, before dropout drew), and one
during its update (optimiser, scheduler, step count) takes effect once the update is complete.

The output folder is claimed first (`core/outputs.py`): locked while training; a folder holding a
checkpoint of this loop is resumed; one holding a finished model (`lsr_training.json`) is
replaced only with `overwrite`; anything else is never touched. With no output (SSR's autoencoders,
whose two fits `ssr fit` writes as one model folder), the loop trains the model in place.

A model is a torch module with `loss(batch, step) -> (loss, logs)` and `save(folder)`; it may also
declare how it trains (SSR's SAE fit declares most: `models/ssr/sae.SAEFit`):

    parameter_groups(lr)  per-group learning rates for the AdamW optimiser
    optimizer(lr)         its own optimiser instead of AdamW (weight decay 0.01)
    warmup_and_decay      False: a constant learning rate
    clip_norm             the gradient norm clipped to (default 1.0; None: no clipping)
    before_update()       called between the backward pass and the update (e.g. to project gradients)
    after_update()        called after the update (e.g. to renormalise weights)
    device_ready          True when its loss puts every tensor on the model's device
"""
from __future__ import annotations

import json
import random
import signal
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import torch

from ..core.devices import current
from ..core.environment import environment
from ..core.errors import InputError, Interrupted
from ..core.hf import write_config
from ..core.outputs import OutputKind, atomic_write, claim_output, written_aside
from .data import TrainingData

CHECKPOINT, SUMMARY = "checkpoint.pt", "lsr_training.json"
TRAINING_OUTPUT = OutputKind("a training output folder (with checkpoint.pt or lsr_training.json)", folder=True,
                             recognise=lambda path: (path / CHECKPOINT).is_file() or (path / SUMMARY).is_file())


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _linear_schedule(total_steps: int, warmup_steps: int):
    def factor(step: int) -> float:
        if step < warmup_steps:
            return (step + 1) / max(1, warmup_steps)
        return max(0.0, (total_steps - step) / max(1, total_steps - warmup_steps))

    return factor


def _cuda_index(device: str) -> int | None:
    """The CUDA device index of a placement's device, None for any other device."""
    if not device.startswith("cuda"):
        return None
    return int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()


def _rng_states(device: str) -> dict:
    """Every generator a step may draw from (dropout, a family's sampling)."""
    states = {"torch_rng": torch.get_rng_state(), "python_rng": random.getstate(), "numpy_rng": np.random.get_state()}
    if _cuda_index(device) is not None:  # dropout on a GPU draws from its own generator
        states["cuda_rng"] = torch.cuda.get_rng_state(_cuda_index(device))
    return states


def _restore_rng(states: dict, device: str) -> None:
    torch.set_rng_state(states["torch_rng"])
    if "cuda_rng" in states and _cuda_index(device) is not None:
        torch.cuda.set_rng_state(states["cuda_rng"], _cuda_index(device))
    random.setstate(states["python_rng"])
    np.random.set_state(states["numpy_rng"])


@contextmanager
def _uninterrupted():
    """Hold a Ctrl-C (SIGINT) until the block is done, then raise it: a step's update is all or nothing."""
    if threading.current_thread() is not threading.main_thread():  # signals reach the main thread only
        yield
        return
    received = []
    previous = signal.signal(signal.SIGINT, lambda *_: received.append(True))
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        raise KeyboardInterrupt


def _save_checkpoint(path: Path, model, optimizer, scheduler, step: int, settings: dict, device: str = "cpu",
                     rng: dict | None = None) -> None:
    """`rng`: the generators' states to record (default: now)."""
    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(),
             "scheduler": scheduler.state_dict(), "step": step, "settings": settings,
             **(rng or _rng_states(device))}
    with written_aside(path) as handle:
        torch.save(state, handle)


def claim_training_output(output: str, overwrite: bool):
    """Claim the output folder: a checkpoint there is resumed, a finished model needs `overwrite`."""
    claim = claim_output(output, TRAINING_OUTPUT, overwrite, resumable=True)
    if claim.present and not overwrite and not (claim.path / CHECKPOINT).is_file():
        raise InputError(f"{claim.path}: holds a trained model already ({SUMMARY}): pass --overwrite to train "
                         f"again into it, or choose another --output")
    return claim


def train(model, data: TrainingData, output: str, settings: dict, *, epochs: int, batch_size: int,
          group_size: int, lr: float, seed: int, warmup_ratio: float = 0.1, max_steps: int | None = None,
          save_every: int = 50, quiet: bool = False, overwrite: bool = False,
          config: tuple[str, dict] | None = None, label: str | None = None) -> dict:
    """Train `model` (a family module) and save it to `output`, with `config` (family, settings)
    recorded beside the weights; returns a summary. `output` None: train in place, save nothing, and
    let a Ctrl-C through (no checkpoint to resume from). `label`: the progress bar's."""
    from tqdm import tqdm

    placement = current()  # --device/--dtype (core/devices.py): float32 master weights, autocast forward
    # every family of this package moves its batches and tensors to the model's device and says so
    # (`device_ready = True`); a model without the attribute (e.g. one of a Python caller) trains on the CPU only
    if not placement.on_cpu and not getattr(model, "device_ready", False):
        raise InputError(f"training {type(model).__name__} on {placement.device}: the model does not declare "
                         f"device_ready (that its loss puts every tensor on the model's device); use --device cpu")
    claim = out = None
    if output is not None:
        claim = claim_training_output(output, overwrite)
        if claim.present and overwrite:
            claim.clear()
        out = claim.path
        out.mkdir(parents=True, exist_ok=True)
    model = placement.to(model)
    scaler = placement.grad_scaler()  # float16 only
    seed_everything(seed)
    steps_per_epoch = len(data) // batch_size
    if steps_per_epoch == 0 and max_steps != 0:  # 0 steps: the starting model is saved, no batch is needed
        raise InputError(f"{len(data)} training queries are fewer than one batch of {batch_size}")
    total = epochs * steps_per_epoch if max_steps is None else min(epochs * steps_per_epoch, max_steps)
    groups = model.parameter_groups(lr) if hasattr(model, "parameter_groups") else \
        [{"params": [p for p in model.parameters() if p.requires_grad]}]  # a family may set per-group rates
    optimizer = model.optimizer(lr) if hasattr(model, "optimizer") else \
        torch.optim.AdamW(groups, lr=lr, weight_decay=0.01)
    schedule = _linear_schedule(total, int(total * warmup_ratio)) if getattr(model, "warmup_and_decay", True) \
        else (lambda step: 1.0)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, schedule)
    clip_norm = getattr(model, "clip_norm", 1.0)
    before_update, after_update = getattr(model, "before_update", None), getattr(model, "after_update", None)
    checkpoint = out / CHECKPOINT if out is not None else None
    step = 0
    if checkpoint is not None and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=False, map_location="cpu")
        if state["settings"] != settings:
            raise InputError(f"{checkpoint}: was written with other settings: use another --output, or pass "
                             f"--overwrite to start again")
        model.load_state_dict(state["model"])
        optimizer.load_state_dict(state["optimizer"])
        scheduler.load_state_dict(state["scheduler"])
        step = state["step"]
        _restore_rng(state, placement.device)
    model.train()
    step_start = None  # the generators' states when the step under way began (None: between steps)
    progress = tqdm(total=total, initial=step, unit="step", desc=label, disable=quiet, dynamic_ncols=True)
    started, last_logs = time.time(), {}
    try:
        for epoch in range(epochs):
            for index, batch in enumerate(data.epoch_batches(epoch, seed, batch_size, group_size)):
                position = epoch * steps_per_epoch + index
                if position < step:
                    continue
                if step >= total:
                    break
                step_start = _rng_states(placement.device)
                with placement.autocast():
                    loss, logs = model.loss(batch, step)
                if scaler is None:
                    loss.backward()
                else:
                    scaler.scale(loss).backward()
                with _uninterrupted():
                    if scaler is not None:
                        scaler.unscale_(optimizer)
                    if before_update is not None:
                        before_update()
                    if clip_norm is not None:
                        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
                    if scaler is None:
                        optimizer.step()
                    else:
                        scaler.step(optimizer)
                        scaler.update()
                    if after_update is not None:
                        after_update()
                    scheduler.step()
                    optimizer.zero_grad(set_to_none=True)
                    step += 1
                    step_start = None
                last_logs = {"loss": float(loss.detach()), **logs}
                progress.set_postfix({k: f"{v:.4g}" for k, v in last_logs.items()})
                progress.update(1)
                if checkpoint is not None and step % save_every == 0 and step < total:
                    _save_checkpoint(checkpoint, model, optimizer, scheduler, step, settings, placement.device)
    except KeyboardInterrupt:
        progress.close()
        if checkpoint is None:
            raise
        # interrupted inside a step: the model and optimiser are still those before it, the RNG
        # goes back to where the step began, so the resumed run draws what this one would have
        _save_checkpoint(checkpoint, model, optimizer, scheduler, step, settings, placement.device, rng=step_start)
        raise Interrupted(f"interrupted at step {step} of {total}: checkpoint saved; "
                          f"run the same command to resume") from None
    progress.close()
    model.eval()
    if out is None:
        return {"steps": step, "seconds": round(time.time() - started, 1), "final": last_logs}
    model.save(out)
    if config is not None:
        write_config(out, *config)
    # the environment (thread count, library versions) is a record beside the settings: a checkpoint
    # resumed with another thread count is not refused (its settings leave the count out)
    summary = {"steps": step, "seconds": round(time.time() - started, 1), "final": last_logs, **settings,
               "environment": environment()}
    atomic_write(out / SUMMARY, [json.dumps(summary, indent=2) + "\n"])
    checkpoint.unlink(missing_ok=True)
    claim.release()
    return summary
