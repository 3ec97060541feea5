"""Nothing deleted that the toolkit did not write, nothing half-written: claims and --overwrite,
SIGKILL and resume, locks between processes, checksums of complete shards, a full disk."""
from __future__ import annotations

import errno
import hashlib
import json
import logging
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from conftest import REPO, SAMPLE, error_lines, run_tool, start_paused_at_part
from lsr_pyserini.core import outputs
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.core.readers import Document
from lsr_pyserini.core.writer import ShardWriter, manifest_path, write_corpus_shards

TIMING = ("seconds_this_run", "documents_per_second_this_run", "seconds")


@pytest.fixture(autouse=True)
def no_locks_left_in_this_process():
    """In-process commands hold their locks until the process ends: release them after each test."""
    yield
    release_outputs()


class Progress:
    def update(self, n):
        pass

    def close(self):
        pass


def documents(n: int) -> list[Document]:
    return [Document(f"d{i}", f"text {i}", i + 1) for i in range(n)]


def records(shard: list[Document]) -> list[dict]:
    return [{"id": d.id, "contents": d.text, "vector": {"t": int(d.id[1:]) + 1}} for d in shard]


def write_all(out: Path, n: int = 10, shard_size: int = 3) -> ShardWriter:
    writer = ShardWriter(str(out), {"model": "m"})
    write_corpus_shards(iter(documents(n)), writer, shard_size, records, Progress(), n, str(out))
    writer.finish({})
    return writer


def files_of(folder: Path) -> dict[str, bytes]:
    """Every file below `folder` by relative path (hidden ones included)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def without_timing(manifest: Path) -> dict:
    return {k: v for k, v in json.loads(manifest.read_text()).items() if k not in TIMING}


def digest(path: Path) -> str:
    return hashlib.sha256(b"".join(files_of(path).values()) if path.is_dir() else path.read_bytes()).hexdigest()


# -- 1. nothing removed that the toolkit did not write ------------------------------------------

def foreign_folder(path: Path) -> Path:
    path.mkdir()
    (path / "notes.txt").write_text("mine, not a tool's output\n")
    return path


def foreign_file(path: Path) -> Path:
    path.write_text("my notes: not a run, not JSON\n")
    return path


def commands(tmp: Path, target: Path, tiny_preset: Path) -> dict[str, tuple[str, list[str]]]:
    """command -> (module, arguments writing `target`); every other path in them need not exist,
    since the output is checked before any input is read or model loaded."""
    missing = str(tmp / "missing")
    run = str(tmp / "run.txt")
    return {
        "encode corpus": ("encode", ["corpus", "--encoder", str(tiny_preset), "--input", missing, "--output", target]),
        "encode queries": ("encode", ["queries", "--encoder", str(tiny_preset), "--input", missing,
                                      "--output", target]),
        "encode dense": ("encode", ["dense", "--model", missing, "--input", missing, "--output", target]),
        "prepare corpus": ("prepare", ["corpus", "--input", missing, "--output", target]),
        "prepare queries": ("prepare", ["queries", "--input", missing, "--output", target]),
        "expand --output": ("expand", ["--model", missing, "--input", missing, "--output", target]),
        "expand --store": ("expand", ["--model", missing, "--input", missing, "--store", target]),
        "rerank": ("rerank", ["--reranker", "dense", "--run", run, "--queries", missing, "--store", missing,
                              "--output", target]),
        "fuse": ("fuse", ["--run", run, "--run", run, "--output", target]),
        "search_dense": ("search_dense", ["--store", missing, "--queries", missing, "--output", target]),
        "bm25aug index": ("bm25aug", ["index", "--input", missing, "--index", target]),
        "bm25aug queries": ("bm25aug", ["queries", "--model", missing, "--index", missing, "--input", missing,
                                        "--output", target]),
        "evaluate --json": ("evaluate", ["--qrels", missing, "--run", run, "--json", target]),
        "train": ("train.__main__", ["splade", "--queries", missing, "--qrels", missing, "--corpus", missing,
                                     "--negatives", missing, "--output", target, "--base", missing]),
        "ssr embed": ("ssr", ["embed", "--model", missing, "--input", missing, "--output", target]),
        "ssr fit": ("ssr", ["fit", "--tokens", missing, "--output", target]),
        "ssr index --codes": ("ssr", ["index", "--model", missing, "--tokens", missing,
                                               "--output", str(tmp / "vectors"), "--codes", target]),
        "lucene index": ("lucene", ["index", "--collection", "JsonCollection", "--input", missing, "--index", target]),
        "lucene search": ("lucene", ["search", "--index", missing, "--topics", missing, "--output", target]),
    }


FOLDER_OUTPUTS = {"encode corpus", "encode dense", "prepare corpus", "expand --store", "bm25aug index", "train",
                  "ssr embed", "ssr fit", "ssr index --codes", "lucene index"}
COMMANDS = sorted(commands(Path("/"), Path("/"), Path("/")))


def run_in_process(module: str, argv: list[str]) -> None:
    import importlib

    main = importlib.import_module(f"lsr_pyserini.{module}").main
    code = main([str(a) for a in argv])
    assert False, f"{module} {argv} returned {code} instead of refusing"


@pytest.mark.parametrize("command", COMMANDS)
def test_foreign_output_is_refused_even_with_overwrite_and_left_alone(command, tiny_preset, tmp_path):
    target = tmp_path / "target"
    (foreign_folder if command in FOLDER_OUTPUTS else foreign_file)(target)
    before = digest(target)
    module, argv = commands(tmp_path, target, tiny_preset)[command]
    with pytest.raises(InputError, match="was not written by this tool .* even with --overwrite") as refused:
        run_in_process(module, argv + ["--overwrite"])
    assert "\n" not in str(refused.value) and str(target) in str(refused.value)
    assert digest(target) == before


def test_refusal_is_one_line_exit_2_before_the_model_loads(tmp_path):
    store = foreign_folder(tmp_path / "store")
    result = run_tool("expand", "--model", tmp_path / "no-such-model", "--input", SAMPLE / "corpus.jsonl",
                      "--store", store, "--overwrite")
    assert result.returncode == 2 and len(error_lines(result)) == 1, result.stderr
    assert "was not written by this tool" in error_lines(result)[0] and "Traceback" not in result.stderr
    assert (store / "notes.txt").is_file() and not (tmp_path / ".store.lock").exists()


def test_own_kind_needs_overwrite_then_is_replaced(tmp_path):
    run = tmp_path / "run.txt"
    run.write_text("q1 Q0 d1 1 2.0 a\nq1 Q0 d2 2 1.0 a\n")
    other = tmp_path / "other.txt"
    other.write_text("q1 Q0 d2 1 3.0 b\nq1 Q0 d1 2 1.0 b\n")
    fused = tmp_path / "fused.txt"
    fused.write_text("q9 Q0 old 1 1.0 old\n")
    refused = run_tool("fuse", "--run", run, "--run", other, "--output", fused)
    assert refused.returncode == 2 and "pass --overwrite" in error_lines(refused)[0], refused.stderr
    assert fused.read_text() == "q9 Q0 old 1 1.0 old\n"
    replaced = run_tool("fuse", "--run", run, "--run", other, "--output", fused, "--overwrite")
    assert replaced.returncode == 0, replaced.stderr
    assert fused.read_text().split()[0] == "q1" and not list(tmp_path.glob(".fused.txt*"))


def test_expand_store_of_its_own_kind_is_refused_without_overwrite(tmp_path):
    store = tmp_path / "store"
    store.mkdir()
    (store / "tilde.json").write_text(json.dumps({"vocab_size": 5, "documents": 0}))
    with pytest.raises(InputError, match="a TILDE store already exists: pass --overwrite"):
        run_in_process("expand", ["--model", tmp_path / "m", "--input", tmp_path / "c", "--store", store])


def test_no_removal_outside_the_one_helper():
    """Every rmtree/unlink/rename/replace of the package is in core/outputs.py, but these."""
    allowed = {
        ("commands/demo.py", "shutil.rmtree(work"),  # the temporary folder it made with mkdtemp
        ("commands/regress/command.py", "shutil.rmtree(work"),  # likewise
        ("train/loop.py", "checkpoint.unlink("),  # its own checkpoint, once the model is saved
        ("core/writer.py", "path.unlink()"),  # a shard its manifest recorded, found damaged
        ("engines/lucene/command.py", "temporary.unlink("),  # its own hidden temporary run file
        ("engines/lucene/command.py", "stale.unlink("),  # its own INDEX.lsr.json beside (older indexes), stale once rebuilt
        ("engines/pisa/index.py", "(building / scratch).unlink()"),  # PISA's uncompressed copy in its building folder
        ("commands/bench/measure.py", "shutil.rmtree("),  # its own scratch: a prefix or an index its record says is unfinished
        ("commands/bench/measure.py", ".rename("),  # a prefix it built aside, renamed into --work when complete
        ("core/evaluation.py", "os.remove(run_path)"),  # its own temporary run file (mkstemp) for trec_eval
        ("core/gguf.py", "(partial, target)"),  # its own cache entry, written aside, renamed in when checked
        ("core/gguf.py", "partial.unlink("),  # that entry, when assembling it failed
        ("core/gguf.py", "shutil.rmtree(partial"),  # the de-quantized copy written aside (renamed, or failed)
        ("integrations/pyterrier.py", "shutil.rmtree(old)"),  # Indexer(overwrite=True): an index or its own
        ("integrations/pyterrier.py", "old.unlink()"),  # input, each checked first (_check_replaceable)
    }
    pattern = re.compile(r"rmtree|\.unlink\(|os\.replace|os\.rename|\.rename\(|os\.remove|\.rmdir\(")
    package = REPO / "lsr_pyserini"
    found = set()
    for path in package.rglob("*.py"):
        name = str(path.relative_to(package))
        if name == "core/outputs.py":
            continue
        for line in path.read_text().splitlines():
            if pattern.search(line):
                found.add((name, next((a for n, a in allowed if n == name and a in line), line.strip())))
    assert found <= allowed, sorted(found - allowed)


# -- 2. SIGKILL mid-run, then the same command: byte-identical output -----------------------------

@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    words = (SAMPLE / "corpus.jsonl").read_text().split()
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(words[i % 50:i % 50 + 40])}) + "\n"
                            for i in range(400)))
    return path


def corpus_command(preset: Path, corpus: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "lsr_pyserini.encode", "corpus", "--encoder", str(preset), "--input", str(corpus),
            "--output", str(out), "--shard-size", "25", "--threads", "1", "--quiet"]


def dense_command(model: Path, corpus: Path, out: Path) -> list[str]:
    return [sys.executable, "-m", "lsr_pyserini.encode", "dense", "--model", str(model), "--input", str(corpus),
            "--output", str(out), "--shard-size", "25", "--batch-size", "8", "--threads", "1", "--quiet"]


def run(command: list[str]) -> subprocess.CompletedProcess:
    result = subprocess.run(command, cwd=REPO, capture_output=True, text=True, env={**os.environ, "TQDM_DISABLE": "1"})
    assert result.returncode == 0, result.stderr
    return result


def kill_at_part(command: list[str], part: int) -> None:
    """Run `command` and SIGKILL it in the middle of writing part `part` (conftest.start_paused_at_part):
    parts 0..part-1 complete, part `part` half written aside."""
    process = start_paused_at_part(command, part, stderr=subprocess.DEVNULL)
    os.kill(process.pid, signal.SIGKILL)
    process.wait()
    assert process.returncode == -signal.SIGKILL


def kept_files(folder: Path, pattern: str) -> dict[str, tuple[int, int]]:
    """name -> (inode, mtime_ns) of the parts in `folder`: a part the resumed run wrote again is a new file."""
    return {p.name: (p.stat().st_ino, p.stat().st_mtime_ns) for p in folder.glob(pattern)}


def test_sigkill_mid_encode_then_the_same_command_gives_byte_identical_shards(tiny_preset, corpus, tmp_path):
    clean = tmp_path / "clean"
    run(corpus_command(tiny_preset, corpus, clean))
    out = tmp_path / "vectors"
    kill_at_part(corpus_command(tiny_preset, corpus, out), part=2)
    kept = json.loads(manifest_path(out).read_text())
    assert kept["status"] == "running" and sorted(kept["shards"], key=int) == ["0", "1"]
    assert (tmp_path / ".vectors.lock").is_file()  # left by the killed process
    # the complete shards only, under their names; the half-written third is aside (not recorded)
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert [len(p.read_text().splitlines()) for p in (tmp_path / "vectors.partial").glob("*.tmp")] == [1]
    before = kept_files(out, "part-*.jsonl")

    resumed = run([arg for arg in corpus_command(tiny_preset, corpus, out) if arg != "--quiet"])  # it warns
    assert "warning: " in resumed.stderr and "stale lock left by pid" in resumed.stderr
    assert {name: kept_files(out, "part-*.jsonl")[name] for name in before} == before  # resumed, not redone
    assert files_of(out) == files_of(clean)
    assert without_timing(manifest_path(out)) == without_timing(manifest_path(clean))
    assert not (tmp_path / ".vectors.lock").exists() and not (tmp_path / "vectors.partial").exists()


@pytest.mark.slow  # an end-to-end run of the commands (docs/ci.md: slow tier)
def test_sigkill_mid_dense_store_then_the_same_command_gives_a_byte_identical_store(tiny_encoder_only, corpus,
                                                                                   tmp_path):
    clean = tmp_path / "clean"
    run(dense_command(tiny_encoder_only, corpus, clean))
    out = tmp_path / "store"
    partial = tmp_path / "store.partial"
    kill_at_part(dense_command(tiny_encoder_only, corpus, out), part=2)
    assert not out.exists() and sorted(json.loads((partial / "progress.json").read_text())["parts"], key=int) == ["0", "1"]
    assert sorted(p.name for p in partial.glob("part-*")) == ["part-00000.npz", "part-00001.npz"]
    assert [p.stat().st_size > 0 for p in partial.glob("*.tmp")] == [True]  # the third, half written aside

    run(dense_command(tiny_encoder_only, corpus, out))
    made, expected = files_of(out), files_of(clean)
    assert made.keys() == expected.keys() and "manifest.json" in made
    assert {k: v for k, v in made.items() if k != "manifest.json"} == \
        {k: v for k, v in expected.items() if k != "manifest.json"}
    assert without_timing(out / "manifest.json") == without_timing(clean / "manifest.json")
    assert not partial.exists() and not (tmp_path / ".store.lock").exists()


# -- 3. one writer per output: a lock the OS drops when its process dies --------------------------

HOLDER = """
import sys
from lsr_pyserini.core.outputs import claim_output, TREC_RUN
from lsr_pyserini.core.writer import ShardWriter
from lsr_pyserini.stores.dense import DENSE_STORE
from lsr_pyserini.train.loop import claim_training_output
folder = sys.argv[1]
ShardWriter(folder + "/vectors", {"model": "m"})
claim_output(folder + "/store", DENSE_STORE, False)
claim_training_output(folder + "/model", False)
claim_output(folder + "/run.txt", TREC_RUN, False)
print("holding", flush=True)
sys.stdin.read()
"""


def test_a_second_process_is_refused_and_a_dead_ones_lock_is_stale(tiny_preset, tiny_encoder_only, tmp_path):
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "holding"
    run_file = tmp_path / "run.txt"
    (tmp_path / "a.txt").write_text("q1 Q0 d1 1 2.0 a\n")
    fuse = ["--run", tmp_path / "a.txt", "--run", tmp_path / "a.txt"]
    attempts = {
        "vectors": run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", SAMPLE / "corpus.jsonl",
                            "--output", tmp_path / "vectors"),
        "store": run_tool("encode", "dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl",
                          "--output", tmp_path / "store"),
        "model": run_tool("train", "splade", "--queries", "q", "--qrels", "q", "--corpus", "c", "--negatives", "n",
                          "--output", tmp_path / "model"),
        "run.txt": run_tool("fuse", *fuse, "--output", run_file),
    }
    for name, result in attempts.items():
        assert result.returncode == 2 and len(error_lines(result)) == 1, (name, result.stderr)
        assert f"{tmp_path / name}: in use by pid {holder.pid}" in error_lines(result)[0], result.stderr
    assert not run_file.exists() and not (tmp_path / "store").exists() and not (tmp_path / "model").exists()

    holder.kill()  # SIGKILL: no clean-up runs; the OS drops the lock
    holder.wait()
    assert (tmp_path / ".run.txt.lock").is_file()
    after = run_tool("fuse", *fuse, "--output", run_file)
    assert after.returncode == 0, after.stderr
    assert f"stale lock left by pid {holder.pid}" in after.stderr
    assert run_file.is_file() and not (tmp_path / ".run.txt.lock").exists()  # released on a normal exit


def test_lock_released_at_exit_of_a_failed_command(tmp_path):
    result = run_tool("fuse", "--run", tmp_path / "missing.txt", "--run", tmp_path / "missing.txt",
                      "--output", tmp_path / "fused.txt")
    assert result.returncode == 2, result.stderr
    assert not list(tmp_path.iterdir())


# -- 4. a complete shard or store part that changed is written again -----------------------------

def test_a_damaged_shard_is_reported_and_written_again(tmp_path, caplog):
    clean = tmp_path / "clean"
    write_all(clean)
    out = tmp_path / "vectors"
    write_all(out)
    release_outputs()
    shard = out / "part-00001.jsonl"
    data = bytearray(shard.read_bytes())
    data[5] ^= 0x01
    shard.write_bytes(bytes(data))
    (out / "part-00002.jsonl").write_bytes((out / "part-00002.jsonl").read_bytes()[:-4])  # truncated
    written = []
    writer = ShardWriter(str(out), {"model": "m"})
    write_corpus_shards(iter(documents(10)), writer, 3, lambda s: written.append(s[0].id) or records(s), Progress(),
                        10, str(out))
    writer.finish({})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 2 and all("does not match the SHA-256 recorded" in w for w in warnings)
    assert str(shard) in warnings[0]
    assert written == ["d3", "d6"]
    assert files_of(out) == files_of(clean)
    assert without_timing(manifest_path(out)) == without_timing(manifest_path(clean))


def test_a_damaged_store_part_is_reported_and_written_again(tmp_path, caplog):
    import faiss  # noqa: F401  pinned (faiss-cpu): a broken install fails, not skips
    from lsr_pyserini.stores.dense import DenseStoreWriter

    vectors = np.random.default_rng(0).normal(size=(10, 4)).astype(np.float32)

    def build(path: Path, damage: bool = False) -> None:
        writer = DenseStoreWriter(str(path), {"encoder": {"model": "m"}, "documents": 10})
        to_records = lambda shard: ([d.id for d in shard], [vectors[int(d.id[1:])] for d in shard])  # noqa: E731
        if damage:  # an earlier run stopped after 3 parts; one of them has since been damaged
            write_corpus_shards(iter(documents(9)), writer, 3, to_records, Progress(), 10, str(path))
            release_outputs()
            part = path.with_name(path.name + ".partial") / "part-00001.npz"
            part.write_bytes(part.read_bytes()[:-10])
            writer = DenseStoreWriter(str(path), {"encoder": {"model": "m"}, "documents": 10})
        write_corpus_shards(iter(documents(10)), writer, 3, to_records, Progress(), 10, str(path))
        writer.finish(10)

    build(tmp_path / "clean")
    build(tmp_path / "store", damage=True)
    assert "part-00001.npz: does not match the SHA-256 recorded" in caplog.text
    assert files_of(tmp_path / "store") == files_of(tmp_path / "clean")


# -- 5. a full disk in the middle of a shard -----------------------------------------------------

class FullDisk:
    """A file that takes `room` bytes, then fails as a full disk does."""

    def __init__(self, handle, room: int):
        self.handle, self.room = handle, room

    def write(self, data):
        if len(data) > self.room:
            self.handle.write(data[:self.room])
            self.room = 0
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        self.room -= len(data)
        return self.handle.write(data)

    def writelines(self, lines):
        for line in lines:
            self.write(line)

    def __getattr__(self, name):
        return getattr(self.handle, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.handle.close()


@pytest.mark.parametrize("full_at", [(".part-00002.jsonl.tmp", 1),  # writing the third shard
                                     (".vectors.manifest.json.tmp", 4)])  # recording it (after start, 2 shards)
def test_disk_full_mid_shard_leaves_no_complete_looking_shard_and_resumes(full_at, tmp_path, monkeypatch):
    clean = tmp_path / "clean"
    write_all(clean)
    out = tmp_path / "vectors"
    real_open = open
    opened = []

    def full_on_the_third_shard(path, *args, **kwargs):
        handle, name = real_open(path, *args, **kwargs), Path(path).name
        opened.append(name)
        return FullDisk(handle, room=20) if (name, opened.count(name)) == full_at else handle

    monkeypatch.setattr(outputs, "open", full_on_the_third_shard, raising=False)
    writer = ShardWriter(str(out), {"model": "m"})
    with pytest.raises(InputError) as full:
        write_corpus_shards(iter(documents(10)), writer, 3, records, Progress(), 10, str(out))
    message = str(full.value)
    assert "\n" not in message and "no space left on device (disk full)" in message
    assert full_at[0] in message and "6 of 10 documents are in complete shards" in message
    assert sorted(p.name for p in out.iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    assert sorted(json.loads(manifest_path(out).read_text())["shards"]) == ["0", "1"]
    assert not (tmp_path / "vectors.partial").exists()

    monkeypatch.undo()  # space freed
    release_outputs()
    write_all(out)
    assert files_of(out) == files_of(clean)
    assert without_timing(manifest_path(out)) == without_timing(manifest_path(clean))
