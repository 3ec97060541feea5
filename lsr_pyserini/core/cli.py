"""What every command shares: one-line errors with a non-zero exit, warnings on stderr, progress
bars and the torch thread count. Library code raises (`core/errors.py`); `run_main` turns those
errors into one `error:` line and an exit status."""
from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

from .errors import InputError, Interrupted, disk_full


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def progress_bar(total: int, quiet: bool, unit: str, desc: str | None = None):
    """A tqdm bar on stderr (rate in `unit`/s; bytes, unit "B", in kB/MB/GB), silent with `quiet`."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, disable=quiet, dynamic_ncols=True, smoothing=0.1, desc=desc,
                unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000)


def quiet_libraries(quiet: bool) -> None:
    """With `--quiet`, no progress bars from Hugging Face libraries either (transformers' "Loading
    weights"), in this process and in the worker processes it starts (they inherit the variable)."""
    if not quiet:
        return
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"  # read when transformers is imported
    if "transformers" in sys.modules:
        from transformers.utils import logging

        logging.disable_progress_bar()


def set_threads(threads: int | None) -> None:
    """Use this many torch CPU threads (None: torch's default, all cores)."""
    if threads:
        import torch

        torch.set_num_threads(threads)


def run_main(main: Callable[[], None]) -> None:
    """Run a command's main; bad input (and a full disk) becomes one `error:` line and exit status 2,
    an interruption one line saying how to resume and exit status 130."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        main()
    except InputError as err:
        fail(str(err))
    except Interrupted as err:
        fail(str(err), code=130)
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    except BrokenPipeError:
        sys.exit(1)
    except OSError as err:
        if disk_full(err) is None:
            raise
        fail(disk_full(err))
