"""The toolkit's errors: library code raises these; only commands turn them into an exit status."""
from __future__ import annotations

import errno

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)


class InputError(ValueError):
    """Bad input; the message names the file, the line and what was wrong."""


class NotFound(InputError):
    """A document (or another named thing) that the collection does not hold."""


class Interrupted(Exception):
    """Work stopped by Ctrl-C after saving what can be resumed; the message says how to resume."""


def disk_full(err: OSError, path=None) -> str | None:
    """'PATH: no space left on device (disk full)' for an ENOSPC or EDQUOT error, else None."""
    if err.errno not in DISK_FULL:
        return None
    what = "no space left on device" if err.errno == errno.ENOSPC else "disk quota exceeded"
    return f"{err.filename or path or 'output'}: {what} (disk full)"
