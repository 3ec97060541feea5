"""What every command shares: one-line errors with a non-zero exit, warnings on stderr, progress
bars and the torch thread count. Library code raises (`core/errors.py`) and logs
(`logging.getLogger(__name__)`); `run_main` turns those errors into one `error:` line and an exit
status, and shows the library's log records on stderr as `warning: MESSAGE` lines (`--quiet`:
none)."""
from __future__ import annotations

import logging
import os
import sys
from typing import Callable, NoReturn

from .errors import InputError, Interrupted, disk_full

PACKAGE_LOGGER = "lsr_pyserini"  # every library module's logger is below it (logging.getLogger(__name__))


class CommandMessages(logging.Handler):
    """The package's log records as a command shows them on stderr: a warning as one
    `warning: MESSAGE` line (none when `quiet`), an error as `error: MESSAGE`, a note (INFO: a
    result, such as a fitted head's R^2) as its message alone. Writes to the `sys.stderr` of the
    moment, so that a caller who redirects stderr (tests) gets the lines."""

    quiet = False

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
            if record.levelno >= logging.ERROR:
                line = f"error: {message}"
            elif record.levelno >= logging.WARNING:
                if self.quiet:
                    return
                line = f"warning: {message}"
            else:
                line = message
            print(line, file=sys.stderr, flush=True)
        except Exception:  # noqa: BLE001  (logging's own policy: a failing handler reports, never raises)
            self.handleError(record)


_MESSAGES = CommandMessages(logging.INFO)
QUIET_HELP = "no progress bar and no warnings (results and errors still show)"


def show_messages() -> None:
    """Show the package's log records on stderr (idempotent): what a command does before anything
    can warn. Records still propagate, so an application's or a test's own handlers see them too."""
    package = logging.getLogger(PACKAGE_LOGGER)
    if _MESSAGES not in package.handlers:
        package.addHandler(_MESSAGES)
    if package.level == logging.NOTSET:
        package.setLevel(logging.INFO)


def quiet_messages(quiet: bool) -> None:
    """With `--quiet`, no warnings on stderr; notes and errors still show."""
    show_messages()
    _MESSAGES.quiet = quiet


def add_impact_search_arguments(search, engine: str, index_help: str) -> None:
    """The flags every `ENGINE search` over an index of the shards shares (Seismic, PISA): the index,
    the impact query TSV `encode queries` wrote, the run to write and how."""
    from .options import positive_int

    search.add_argument("--index", required=True, help=index_help)
    search.add_argument("--topics", required=True, help="query TSV from `encode queries` (terms repeated by impact)")
    search.add_argument("--output", required=True, help="TREC run to write")
    search.add_argument("--overwrite", action="store_true", help="replace an existing run file (default: refuse)")
    search.add_argument("--hits", type=positive_int, default=1000, help="documents per query (default: 1000)")
    search.add_argument("--threads", type=positive_int, default=1, help="queries searched in parallel (default: 1)")
    search.add_argument("--tag", default=engine, help=f"run tag (default: {engine})")
    search.add_argument("--unrecorded-topics", action="store_true",
                        help="search a topics file that `encode queries` did not record and that reads as query "
                             "text (default: refuse it, docs/encoding.md)")


def warn(message: str) -> None:
    """A command's own warning: one `warning: MESSAGE` line on stderr (none with `--quiet`). Library
    modules log instead (`logging.getLogger(__name__).warning(...)`)."""
    show_messages()
    logging.getLogger(f"{PACKAGE_LOGGER}.command").warning(message)


def note(text: str) -> None:
    """A command's progress line (or a block of lines) on stderr, shown at once."""
    print(text, file=sys.stderr, flush=True)


SET_UP = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt -e ."  # README's set-up line
PIP_NAMES = {"jnius": "pyjnius", "yaml": "PyYAML", "sklearn": "scikit-learn", "faiss": "faiss-cpu"}


def missing_package(module: str) -> str:
    """One line naming the package a command needs and lacks, and how to install it: the project's
    environment is usually not the Python that ran the command."""
    package = PIP_NAMES.get(module.split(".")[0], module.split(".")[0])
    return (f"the Python package {package!r} is not installed for {sys.executable}: run the command in the "
            f"project's environment (`. .venv/bin/activate`), set up from the repository with `{SET_UP}`")


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def progress_bar(total: int, quiet: bool, unit: str, desc: str | None = None):
    """A tqdm bar on stderr (rate in `unit`/s; bytes, unit "B", in kB/MB/GB), silent with `quiet`."""
    from tqdm import tqdm

    return tqdm(total=total, unit=unit, disable=quiet, dynamic_ncols=True, smoothing=0.1, desc=desc,
                unit_scale=unit == "B", unit_divisor=1024 if unit == "B" else 1000)


class LoadingBars:
    """Whether transformers' "Loading weights" bars show while a model loads (core/hf.py's
    `quiet_loading`): off in the library (a program that imports it gets no output from it), on in
    a command (`run_main`) unless --quiet."""

    shown = False


def quiet_libraries(quiet: bool) -> None:
    """With `--quiet`, no warnings (`quiet_messages`) and no progress bars from Hugging Face
    libraries either (transformers' "Loading weights"), in this process and in the worker processes
    it starts (they inherit the variable)."""
    quiet_messages(quiet)
    LoadingBars.shown = not quiet
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
    a package the command imports and this Python lacks one line naming it and the set-up command,
    an interruption one line saying how to resume and exit status 130."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    quiet_messages(False)  # until the command's --quiet says otherwise
    LoadingBars.shown = True  # a command shows transformers' loading bars (the library does not)
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
    except ModuleNotFoundError as err:
        if not err.name or err.name.split(".")[0] == PACKAGE_LOGGER:
            raise  # a module of this package: a bug, with its traceback
        fail(missing_package(err.name))
    except OSError as err:
        if disk_full(err) is None:
            raise
        fail(disk_full(err))
