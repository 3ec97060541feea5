"""Where models run and in which precision: the one place `--device` and `--dtype` are resolved.

    --device auto|cpu|cuda|cuda:N|mps     auto = CUDA when present, else the CPU (never MPS by itself)
    --dtype  auto|float32|float16|bfloat16 auto = float32 on CPU and MPS, float16 on CUDA

A `Placement` (a device and a compute dtype) is made active by a command (`activate`, from its
flags) or by the Python API (`placed(device, dtype)`, a context manager); the model loaders
(`core/hf.py`), encoders, re-rankers and trainers read `current()` when they are built and keep it.

Half precision is autocast over the transformer only: the weights stay float32 ("master weights"
for training, GradScaler for float16), and pooling, ReLU/log1p, the SPLADE vocabulary projection
and the quantisation run in float32 outside autocast, so integer impacts stay stable. On the CPU
with float32 nothing moves and nothing is wrapped: today's output, bit for bit.

Identity: the dtype is part of an output's settings when it is not float32 (a resumed run with
another dtype is refused by the manifest comparison instead of mixing shards); the device never is,
so a CPU float32 run and a CUDA float32 run resume each other. See docs/devices.md.
"""
from __future__ import annotations

import argparse
import contextlib
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass

from .errors import InputError

DEVICES = ("auto", "cpu", "cuda", "cuda:N", "mps")
DTYPES = ("auto", "float32", "float16", "bfloat16")
_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def device_name(text: str) -> str:
    """argparse type for --device: the syntax only (availability is checked when resolved)."""
    value = str(text).strip().lower()
    if not _DEVICE.fullmatch(value):
        raise argparse.ArgumentTypeError(f"expected one of {'|'.join(DEVICES)}, got {text!r}")
    return value


def resolve_device(name: str = "auto") -> str:
    """'cpu', 'cuda', 'cuda:N' or 'mps'; InputError (one line) for a device this machine lacks."""
    import torch

    value = str(name or "auto").strip().lower()
    if not _DEVICE.fullmatch(value):
        raise InputError(f"device {name!r} is not one of {'|'.join(DEVICES)}")
    if value == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if value.startswith("cuda"):
        if not torch.cuda.is_available():
            raise InputError(f"device {value!r}: CUDA is not available on this machine "
                             f"(torch {torch.__version__}; use --device cpu or auto)")
        if ":" in value:
            index, count = int(value.split(":")[1]), torch.cuda.device_count()
            if index >= count:
                raise InputError(f"device {value!r}: this machine has {count} CUDA device(s), "
                                 f"numbered 0..{count - 1}")
    if value == "mps" and not (getattr(torch.backends, "mps", None) and torch.backends.mps.is_available()):
        raise InputError("device 'mps': Apple MPS is not available on this machine (use --device cpu or auto)")
    return value


def resolve_dtype(name: str = "auto", device: str = "cpu") -> str:
    """The compute dtype's name: auto = float32 on CPU/MPS (today's output), float16 on CUDA (11
    mantissa bits, against bfloat16's 8, keep impacts closest to float32; autocast keeps layer norms
    and softmax in float32, so float16's range is enough for encoders)."""
    import torch

    value = str(name or "auto").strip().lower()
    if value not in DTYPES:
        raise InputError(f"dtype {name!r} is not one of {', '.join(DTYPES)}")
    kind = device.split(":")[0]
    if value == "auto":
        return "float16" if kind == "cuda" else "float32"
    if value == "bfloat16" and kind == "cuda" and not torch.cuda.is_bf16_supported():
        raise InputError(f"dtype bfloat16: device {device!r} does not support it (use float16)")
    return value


@dataclass(frozen=True)
class Placement:
    device: str = "cpu"
    dtype: str = "float32"
    dtype_given: bool = False  # an explicit --dtype (PromptReps keeps its own auto otherwise)

    @property
    def half(self) -> bool:
        return self.dtype != "float32"

    @property
    def torch_dtype(self):
        import torch

        return getattr(torch, self.dtype)

    @property
    def on_cpu(self) -> bool:
        return self.device == "cpu"

    def autocast(self):
        """Autocast to the half dtype around a forward pass; nothing at all for float32."""
        if not self.half:
            return contextlib.nullcontext()
        import torch

        return torch.autocast(device_type=self.device.split(":")[0], dtype=self.torch_dtype)

    def to(self, value):
        """A module or tensor moved to the device; a tokenizer batch (a mapping) as a new dict of moved
        tensors. Unchanged on the CPU (nothing copied)."""
        return moved(value, self.device)

    def identity(self) -> dict:
        """What an output's settings record: the dtype when not float32; never the device."""
        return {"dtype": self.dtype} if self.half else {}

    def describe(self) -> dict:
        return {"device": self.device, "dtype": self.dtype}

    def grad_scaler(self):
        """A GradScaler for float16 training (None otherwise: float32 and bfloat16 need none)."""
        if self.dtype != "float16":
            return None
        import torch

        return torch.amp.GradScaler(self.device.split(":")[0])


def moved(value, device):
    """`value` (a module, a tensor, or a tokenizer batch: a mapping, returned as a new dict of moved
    tensors) on `device` (a name or a torch.device); unchanged on the CPU (nothing copied)."""
    if value is None or str(device) == "cpu":
        return value
    if isinstance(value, Mapping):
        return {k: v.to(device) if hasattr(v, "to") else v for k, v in value.items()}
    return value.to(device)


def cpu_state_dict(module) -> dict:
    """`module.state_dict()` with every tensor on the CPU (what `torch.save` of a trained head writes, so
    that the file loads anywhere); the very same object, byte for byte, for a module on the CPU."""
    state = module.state_dict()
    for key, value in state.items():
        if getattr(value, "device", None) is not None and value.device.type != "cpu":
            state[key] = value.cpu()
    return state


CPU_FLOAT32 = Placement()
_CURRENT: ContextVar[Placement | None] = ContextVar("lsr_placement", default=None)


def resolve(device: str | None = "auto", dtype: str | None = "auto") -> Placement:
    resolved = resolve_device(device or "auto")
    return Placement(resolved, resolve_dtype(dtype or "auto", resolved), (dtype or "auto") != "auto")


def current() -> Placement:
    """The active placement (CPU float32 unless a command or `placed` chose another)."""
    return _CURRENT.get() or CPU_FLOAT32


def chosen() -> Placement | None:
    """The placement a command or `placed` chose; None when nothing did (a model class built directly)."""
    return _CURRENT.get()


def activate(device: str | None = "auto", dtype: str | None = "auto") -> Placement:
    """Make the placement of a command's --device/--dtype active for the rest of the command."""
    placement = resolve(device, dtype)
    _CURRENT.set(placement)
    return placement


@contextlib.contextmanager
def placed(device: str | Placement | None = None, dtype: str | None = None):
    """Models built inside run on this device in this dtype (the Python API's device=/dtype=). None
    for both keeps the placement already chosen (e.g. by an enclosing `placed`), else means auto."""
    if isinstance(device, Placement):
        placement = device
    elif device is None and dtype is None and chosen() is not None:
        placement = chosen()
    else:
        placement = resolve(device, dtype)
    token = _CURRENT.set(placement)
    try:
        yield placement
    finally:
        _CURRENT.reset(token)


def add_device_args(parser: argparse.ArgumentParser, what: str = "models", dtypes: tuple[str, ...] = DTYPES,
                    dtype_help: str | None = None) -> None:
    """--device and --dtype, the same on every command that runs a model (a command whose models only
    compute in float32, e.g. `ssr fit`, offers `dtypes=("auto", "float32")` with its own help)."""
    parser.add_argument("--device", type=device_name, default="auto", metavar="{auto,cpu,cuda,cuda:N,mps}",
                        help=f"device for the {what}: auto = CUDA when present, else the CPU (default: auto)")
    parser.add_argument("--dtype", choices=dtypes, default="auto",
                        help=dtype_help or "compute precision (autocast; weights, pooling and quantisation stay "
                                           "float32): auto = float32 on CPU/MPS, float16 on CUDA; promptreps: "
                                           "auto = bfloat16 where the hardware has it (default: auto)")
