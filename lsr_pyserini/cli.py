"""What every command shares: one-line errors with a non-zero exit, and warnings on stderr."""
from __future__ import annotations

import os
import sys
from typing import Callable, NoReturn

from .data import InputError


def warn(message: str) -> None:
    print(f"warning: {message}", file=sys.stderr)


def fail(message: str, code: int = 2) -> NoReturn:
    print(f"error: {message}", file=sys.stderr)
    sys.exit(code)


def run_main(main: Callable[[], None]) -> None:
    """Run a command's main; bad input becomes one `error:` line and exit status 2."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    try:
        main()
    except InputError as err:
        fail(str(err))
    except KeyboardInterrupt:
        fail("interrupted", code=130)
    except BrokenPipeError:
        sys.exit(1)
