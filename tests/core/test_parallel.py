"""`encode corpus|dense --workers N` and `--ray`: the same bytes as one process (shards, dense and
SparseEmbed stores, manifests), resumable, refused in one line when misused or when Ray is missing.

Ray starts once for this module (`ray.init(num_cpus=2)`). Ray and faiss are pinned in requirements.txt:
imported plainly, so a broken install fails these tests instead of skipping them. The sample corpus
is encoded with the real SPLADE-tiny (the `splade-tiny` preset) in one process, `--workers 2` and
`--ray`; the other tests use tiny random models, whose mechanics are what they test
(benchmarks/bench_encode_parallel.py measures the speed, and the byte-identity, on SciFact)."""
from __future__ import annotations

import gzip
import itertools
import json
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import MEET_NULLS_IN_COMPILED_JAVA, REPO, SAMPLE, run_tool
from lsr_pyserini.commands import encode
from lsr_pyserini.core.errors import InputError
from lsr_pyserini.core.jvm import restore_jvm_fault_handlers
from lsr_pyserini.core.outputs import release_outputs
from lsr_pyserini.core.writer import manifest_path

# what differs between runs by design: timings, and the environment block (threads, versions, CPU),
# which core/environment.py records outside the settings a resume compares
TIMING = ("seconds_this_run", "documents_per_second_this_run", "seconds", "environment")
# one pytest-xdist worker runs this module (`--dist loadgroup`): one local Ray, started once
# slow tier: real checkpoints in worker processes and on Ray (docs/ci.md)
pytestmark = [pytest.mark.xdist_group("ray"), pytest.mark.slow]


@pytest.fixture(autouse=True)
def no_locks_left_in_this_process():
    yield
    release_outputs()


@pytest.fixture(scope="module")
def local_ray():
    import ray
    import ray.data  # noqa: F401  (what --ray imports)
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    restore_jvm_fault_handlers()  # Ray's replaced the JVM's, if an earlier test of this worker started it
    yield ray
    ray.shutdown()
    restore_jvm_fault_handlers()  # shutdown leaves SIG_DFL: the next null in compiled Java code would kill us


def files_of(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def without_timing(manifest: Path) -> dict:
    """A manifest without its timings and environment, and without the --dense-store path (each mode
    has its own)."""
    data = json.loads(manifest.read_text())
    for key in TIMING:
        data.pop(key, None)
    data.get("settings", {}).pop("dense_store", None)
    return data


def encoded(*argv) -> None:
    """Run `encode ARGV` in this process (so that it uses this module's Ray), then release its locks."""
    encode.main([str(a) for a in argv] + ["--quiet"])
    release_outputs()


MODES = {"one process": [], "--workers 2": ["--workers", "2"], "--ray": ["--ray", "--ray-actors", "2"]}


def assert_same_shards(outputs: dict[str, Path]) -> None:
    (first, reference), *others = outputs.items()
    expected = files_of(reference)
    assert len(expected) > 1
    for name, folder in others:
        assert files_of(folder) == expected, f"{name}: shards differ from {first}'s"
        assert without_timing(manifest_path(folder)) == without_timing(manifest_path(reference)), name


def corpus_runs(preset, corpus: Path, tmp_path: Path, shard_size: int, *extra) -> dict[str, Path]:
    outputs = {}
    for name, flags in MODES.items():
        out = tmp_path / name.strip("-").replace(" ", "-") / "vectors"
        encoded("corpus", "--encoder", preset, "--input", corpus, "--output", out, "--shard-size", shard_size,
                *flags, *[str(e).replace("STORE", str(out.parent / "store")) for e in extra])
        outputs[name] = out
    return outputs


def test_sample_corpus_shards_of_the_real_splade_tiny_are_byte_identical_to_one_process(local_ray, tmp_path):
    """The real checkpoint (the preset's 256 tokens, batch 32), 4 shards of 3: two workers and two Ray
    actors each encode two shards, which this process writes in shard order."""
    outputs = corpus_runs("splade-tiny", SAMPLE / "corpus.jsonl", tmp_path, 3)
    assert_same_shards(outputs)
    manifest = json.loads(manifest_path(outputs["--workers 2"]).read_text())
    assert manifest["settings"]["encoder"]["model"] == "python-package:cognition/model"
    assert (manifest["documents_written"], len(manifest["shards"])) == (12, 4)


@pytest.fixture(scope="module")
def scifact_1000(tmp_path_factory, shared_data) -> Path:
    path = tmp_path_factory.mktemp("scifact") / "corpus.jsonl"
    with gzip.open(shared_data / "scifact" / "corpus.jsonl.gz", "rt", encoding="utf-8") as source:
        path.write_text("".join(itertools.islice(source, 1000)), encoding="utf-8")
    return path


def test_1000_scifact_documents_are_byte_identical_to_one_process(tiny_preset, local_ray, scifact_1000, tmp_path):
    outputs = corpus_runs(tiny_preset, scifact_1000, tmp_path, 150)
    assert_same_shards(outputs)
    assert json.loads(manifest_path(outputs["--ray"]).read_text())["documents_written"] == 1000


@pytest.fixture(scope="module")
def sparseembed_model(tmp_path_factory, tiny_mlm) -> Path:
    from lsr_pyserini.models.sparseembed.encoder import SparseEmbedModel

    folder = tmp_path_factory.mktemp("sparseembed") / "model"
    SparseEmbedModel(str(tiny_mlm), dim=16).save(folder)
    return folder


def test_sparseembed_store_is_byte_identical_to_one_process(sparseembed_model, local_ray, tmp_path):
    outputs = corpus_runs("sparseembed", SAMPLE / "corpus.jsonl", tmp_path, 4, "--model", sparseembed_model,
                          "--max-length", "48", "--dense-store", "STORE")
    assert_same_shards(outputs)
    assert_same_store({name: folder.parent / "store" for name, folder in outputs.items()})


def assert_same_store(stores: dict[str, Path]) -> None:
    """Every file of each store is the one process's byte for byte; JSON manifests but for their timings."""
    expected = files_of(stores["one process"])
    assert "docids.txt" in expected and any(name.endswith(".json") for name in expected)
    for name, store in stores.items():
        made = files_of(store)
        assert made.keys() == expected.keys(), name
        for file in expected:
            if file.endswith(".json"):
                assert without_timing(store / file) == without_timing(stores["one process"] / file), (name, file)
            else:
                assert made[file] == expected[file], (name, file)


def test_dense_store_is_byte_identical_to_one_process(tiny_encoder_only, local_ray, tmp_path):
    import faiss  # noqa: F401  (pinned: fails rather than skips when broken)
    stores = {}
    for name, flags in MODES.items():
        stores[name] = tmp_path / name.strip("-").replace(" ", "-")
        encoded("dense", "--model", tiny_encoder_only, "--input", SAMPLE / "corpus.jsonl", "--output", stores[name],
                "--shard-size", "5", "--batch-size", "2", *flags)
    assert_same_store(stores)


# -- resumption --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def corpus_2000(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "corpus.jsonl"
    words = (SAMPLE / "corpus.jsonl").read_text().split()
    path.write_text("".join(json.dumps({"_id": f"d{i}", "text": " ".join(words[i % 50:i % 50 + 40])}) + "\n"
                            for i in range(2000)))
    return path


def test_ctrl_c_with_workers_keeps_complete_shards_and_the_same_command_resumes(tiny_preset, corpus_2000, tmp_path):
    clean = tmp_path / "clean"
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus_2000, "--output", clean, "--shard-size", "25")
    out = tmp_path / "vectors"
    command = [sys.executable, "-m", "lsr_pyserini.encode", "corpus", "--encoder", str(tiny_preset), "--input",
               str(corpus_2000), "--output", str(out), "--shard-size", "25", "--workers", "2", "--quiet"]
    from conftest import interrupt_paused, start_paused_at_part

    # Ctrl-C, to the parent only (it stops its workers), while it writes the third shard: the parent
    # stops itself there (conftest.start_paused_at_part), its workers busy with the shards after it
    process = start_paused_at_part(command, 2, stderr=subprocess.PIPE, text=True,
                                   env={**os.environ, "TQDM_DISABLE": "1"})
    interrupt_paused(process)
    stderr = process.communicate(timeout=120)[1]
    errors = [line for line in stderr.splitlines() if line.startswith("error:")]
    assert process.returncode == 130, stderr
    assert len(errors) == 1 and "50 of 2000 documents are in complete shards" in errors[0] \
        and "resume" in errors[0], stderr
    kept = json.loads(manifest_path(out).read_text())
    assert kept["status"] == "running" and sorted(kept["shards"], key=int) == ["0", "1"]
    assert {p.name for p in out.iterdir()} <= {f"part-{int(i):05d}.jsonl" for i in kept["shards"]}

    encoded("corpus", "--encoder", tiny_preset, "--input", corpus_2000, "--output", out, "--shard-size", "25",
            "--workers", "2")
    assert files_of(out) == files_of(clean)
    assert without_timing(manifest_path(out)) == without_timing(manifest_path(clean))


def test_java_still_runs_after_an_encoding_on_ray_in_the_same_process(tiny_preset, tmp_path):
    """`encode corpus --ray` from Python in a process where the JVM runs (a search before it): Ray's
    start replaced the JVM's fault handlers and its stop left SIG_DFL, which killed the process at
    the next null met in compiled Java code; the encoder puts the JVM's back after each."""
    import ray.data  # noqa: F401  (pinned: fails rather than skips when broken)
    script = f"""
from lsr_pyserini.commands import encode
from lsr_pyserini.core.jvm import start_jvm
start_jvm()
encode.main(["corpus", "--encoder", {str(tiny_preset)!r}, "--input", {str(SAMPLE / "corpus.jsonl")!r},
             "--output", {str(tmp_path / "vectors")!r}, "--shard-size", "7", "--ray", "--ray-actors", "2", "--quiet"])
""" + MEET_NULLS_IN_COMPILED_JAVA + """
print("nulls", meet_nulls())
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "TQDM_DISABLE": "1"})
    assert done.returncode == 0 and "nulls 200" in done.stdout, (done.returncode, done.stderr[-3000:])


def test_a_ray_run_that_succeeds_prints_none_of_rays_own_lines(tiny_preset, tmp_path):
    """`encode corpus --ray` as users run it (its own local Ray): Ray's notes ("Started a local Ray
    instance."), its token warning and its backend's error-level line about actors with "constructor
    arguments in the object store and max_restarts > 0" stay off stderr; the command's own lines
    (here a warning about the actors) and the bytes stay as they are."""
    import ray.data  # noqa: F401  (pinned: fails rather than skips when broken)
    corpus, out = SAMPLE / "corpus.jsonl", tmp_path / "vectors"
    result = run_tool("encode", "corpus", "--encoder", tiny_preset, "--input", corpus, "--output", out,
                      "--shard-size", "7", "--ray", "--ray-actors", "3")
    assert result.returncode == 0, result.stderr
    for ray_line in ("core_worker.cc", "max_restarts", ".cc:", "Started a local Ray", "authentication_token",
                     "INFO", "WARNING"):
        assert ray_line not in result.stderr, result.stderr
    assert result.stderr.count("warning: ") == 1, result.stderr
    assert "warning: --ray-actors 3: the corpus makes 2 shard(s)" in result.stderr
    assert result.stderr.splitlines()[-1].startswith(f"encoded 12 documents into 2 shard(s) in {out}")
    clean = tmp_path / "clean"
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", clean, "--shard-size", "7")
    assert files_of(out) == files_of(clean)


def test_ray_backend_lines_are_dropped_and_everything_else_passes():
    from lsr_pyserini.core.parallel import RAY_BACKEND_LINE

    written = (b"\r 42%|####| 5/12\x1b[31m[2026-12-03 10:04:49,802 E 12581 12581] core_worker.cc:2465: Actor with "
               b"class name: 'MapWorker' has constructor arguments in the object store and max_restarts > 0.\n"
               b"\x1b[36m(pid=gcs_server)\x1b[0m [2026-12-03 10:14:47,224 E 17518 17518] (gcs_server) "
               b"gcs_actor_scheduler.cc:538: Failed to kill actor 9093\n"
               b"\x1b[36m(MapWorker(MapBatches(ShardActor)) pid=17737)\x1b[0m hello\nwarning: [2026] stays\n")
    assert RAY_BACKEND_LINE.sub(b"", written) == (
        b"\r 42%|####| 5/12\x1b[36m(MapWorker(MapBatches(ShardActor)) pid=17737)\x1b[0m hello\nwarning: [2026] stays\n")


def test_ray_resumes_after_the_shards_an_earlier_run_completed(tiny_preset, local_ray, tmp_path):
    corpus = SAMPLE / "corpus.jsonl"
    clean = tmp_path / "clean"
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", clean, "--shard-size", "3")
    out = tmp_path / "vectors"
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", out, "--shard-size", "3")
    manifest = json.loads(manifest_path(out).read_text())  # as if stopped with shards 0 and 2 complete
    for index in ("1", "3"):
        del manifest["shards"][index]
        (out / f"part-0000{index}.jsonl").unlink()
    manifest["status"] = "running"
    manifest_path(out).write_text(json.dumps(manifest))
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", out, "--shard-size", "3",
            "--ray", "--ray-actors", "2")
    assert files_of(out) == files_of(clean)
    done = json.loads(manifest_path(out).read_text())
    assert done["status"] == "complete" and done["documents_per_second_this_run"] is not None
    assert without_timing(manifest_path(out)) == without_timing(manifest_path(clean))


def test_more_workers_than_shards_are_cut_to_the_shard_count_with_a_warning(tiny_preset, tmp_path, caplog):
    """The sample corpus in 2 shards of 7: --workers 5 runs 2 workers (none would get a shard), and
    one shard encodes in this process with all its cores; the bytes are one process's."""
    corpus = SAMPLE / "corpus.jsonl"
    clean, two, one = tmp_path / "clean", tmp_path / "two", tmp_path / "one"
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", clean, "--shard-size", "7")
    caplog.clear()  # `encoded` passes --quiet: the warnings are log records, not lines on stderr
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", two, "--shard-size", "7",
            "--workers", "5")
    warning = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warning) == 1 and "--workers 5: the corpus makes 2 shard(s) of --shard-size 7" in warning[0]
    caplog.clear()
    encoded("corpus", "--encoder", tiny_preset, "--input", corpus, "--output", one, "--shard-size", "100",
            "--workers", "2")
    assert "--workers 2: the corpus makes 1 shard(s)" in caplog.text
    for out in (two, one):
        assert without_timing(manifest_path(out))["status"] == "complete"
    assert files_of(two) == files_of(clean)
    assert b"".join(files_of(one).values()) == b"".join(files_of(clean).values())


# -- refusals ----------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, message", [
    (["--workers", "0"], "argument --workers: expected an integer >= 1, got '0'"),
    (["--ray", "--ray-actors", "0"], "argument --ray-actors: expected an integer >= 1, got '0'"),
    (["--ray", "--ray-gpus-per-actor", "-1"], "argument --ray-gpus-per-actor: expected a finite number > 0"),
])
def test_bad_values_are_refused_by_the_option_type(flags, message, tmp_path):
    result = run_tool("encode", "corpus", "--input", SAMPLE / "corpus.jsonl", "--output", tmp_path / "v", *flags)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert not (tmp_path / "v").exists()


@pytest.mark.parametrize("flags, message", [
    (["--ray-actors", "2"], "--ray-actors is an option of --ray, which was not given"),
    (["--ray", "--workers", "2"], "--workers and --ray are exclusive"),
])
def test_misused_flags_are_refused_in_one_line(flags, message, tiny_preset, tmp_path):
    import ray  # noqa: F401  (pinned: fails rather than skips when broken)
    with pytest.raises(InputError, match=message):
        encode.main(["corpus", "--encoder", str(tiny_preset), "--input", str(SAMPLE / "corpus.jsonl"),
                     "--output", str(tmp_path / "v"), "--quiet", *flags])


def test_ray_missing_stops_in_one_line_naming_the_extra(tiny_preset, tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now raises ImportError
    monkeypatch.setitem(sys.modules, "ray.data", None)
    with pytest.raises(SystemExit) as stopped:
        from lsr_pyserini.core.cli import run_main

        run_main(lambda: encode.main(["dense", "--model", str(tiny_preset), "--input", str(SAMPLE / "corpus.jsonl"),
                                      "--output", str(tmp_path / "store"), "--ray"]))
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["error: --ray needs Ray Data, which is not installed: pip install 'lsr-pyserini[ray]'"]
    assert not list(tmp_path.iterdir())


def test_ray_is_imported_only_with_ray():
    result = subprocess.run([sys.executable, "-c", "import sys, lsr_pyserini.encode; print('ray' in sys.modules)"],
                            cwd=REPO, capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr
