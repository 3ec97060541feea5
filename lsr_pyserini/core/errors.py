"""The toolkit's errors: library code raises these; only commands turn them into an exit status."""
from __future__ import annotations


class InputError(ValueError):
    """Bad input; the message names the file, the line and what was wrong."""


class Interrupted(Exception):
    """Work stopped by Ctrl-C after saving what can be resumed; the message says how to resume."""
