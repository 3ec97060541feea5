"""The skip gate of tests/conftest.py: every skip is listed at the end of the session, and one whose
reason matches no pattern of tests/allowed-skips.txt fails the session, on xdist workers too."""
import os
import shutil
import subprocess
import sys

from conftest import REPO

UNLISTED = """
import pytest

def test_passes():
    pass

def test_skips_for_a_missing_package():
    pytest.importorskip("a_package_that_is_not_installed")
"""
MODULE_SKIP = """
import pytest

pytest.importorskip("another_package_that_is_not_installed")

def test_never_collected():
    pass
"""
LISTED = """
import pytest

@pytest.mark.skipif(True, reason="needs CUDA")
def test_cuda_only():
    pass

def test_passes():
    pass
"""


def session(tmp_path, files: dict, *args) -> subprocess.CompletedProcess:
    tests = tmp_path / "tests"
    tests.mkdir()
    for name in ("conftest.py", "allowed-skips.txt"):
        shutil.copy(REPO / "tests" / name, tests / name)
    for name, text in files.items():
        (tests / name).write_text(text)
    env = {k: v for k, v in os.environ.items() if k not in ("LSR_PYSERINI_ALLOW_SKIPS", "PYTEST_ADDOPTS")}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--rootdir", tmp_path,
                           *args, "tests"], cwd=tmp_path, capture_output=True, text=True, env=env)


def test_an_unlisted_skip_fails_the_session_under_xdist_and_is_listed(tmp_path):
    result = session(tmp_path, {"test_unlisted.py": UNLISTED, "test_module_skip.py": MODULE_SKIP},
                     "-n", "2", "--dist", "loadgroup")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "1 passed, 2 skipped" in result.stdout, result.stdout
    assert "skips: 2, 2 not on allowed-skips.txt" in result.stdout, result.stdout
    assert "NOT ALLOWED  tests/test_unlisted.py::test_skips_for_a_missing_package: could not import " \
           "'a_package_that_is_not_installed'" in result.stdout, result.stdout
    assert "NOT ALLOWED  tests/test_module_skip.py: could not import 'another_package_that_is_not_installed'" \
           in result.stdout, result.stdout


def test_a_listed_skip_passes_and_is_listed(tmp_path):
    result = session(tmp_path, {"test_listed.py": LISTED})
    assert result.returncode == 0, result.stdout + result.stderr
    assert "skips: 1, 0 not on allowed-skips.txt" in result.stdout
    assert "allowed  tests/test_listed.py::test_cuda_only: needs CUDA" in result.stdout
