"""The audit of parameters held at their defaults (tests/audit_defaults.py) passes: every parameter a
user sets is varied by some test, or named in the script with why not."""
import contextlib
import importlib.util
import io
import sys
from pathlib import Path


def test_every_parameter_is_varied_or_named():
    path = Path(__file__).with_name("audit_defaults.py")
    spec = importlib.util.spec_from_file_location("audit_defaults", path)
    audit = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = audit  # its dataclasses look their module up
    spec.loader.exec_module(audit)
    shown = io.StringIO()
    with contextlib.redirect_stdout(shown), contextlib.redirect_stderr(io.StringIO()):
        status = audit.main([])
    failing = [line for line in shown.getvalue().splitlines() if "NOT VARIED" in line or "STALE" in line]
    assert status == 0 and not failing, "\n".join(failing)
