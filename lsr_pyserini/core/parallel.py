"""Encoding shards elsewhere, writing them here: `encode corpus|dense --workers N` (processes on
this machine) and `--ray` (a pool of Ray Data actors, on this machine or a Ray cluster).

Both are an `encode_shards` for `core.writer.write_corpus_shards`: they take the pending
(index, documents) shards, have a *recipe* (`encoders/recipes.py`: picklable settings with `load()`,
`encode(texts)` and `records(shard, encoded)`) encode them where the model is, and yield
(index, documents, records) in shard order. This process stays the one writer: the same shard
files, checksums and manifest as one process, written in order, so an interrupted run resumes
after its last complete shard exactly as a single-process one does. Each worker or actor builds the
model once. A shard's texts are batched by length within the shard, so where it was encoded does not
change its bytes.

Ray is optional (`pip install 'lsr-pyserini[ray]'`) and imported only by `ray_shards`.
"""
from __future__ import annotations

import os
import pickle
import re
import threading
from collections import deque
from contextlib import contextmanager
from typing import Iterator

from .errors import InputError
from .jvm import restore_jvm_fault_handlers

RAY_EXTRA = "pip install 'lsr-pyserini[ray]'"

Pending = Iterator[tuple[int, list]]


def threads_per_worker(workers: int, threads: int | None = None) -> int:
    """--threads when given, else this machine's cores shared among the workers (at least 1)."""
    return threads or max(1, (os.cpu_count() or 1) // workers)


# -- worker processes ------------------------------------------------------------------------

_RECIPE = None  # the recipe of this worker process, loaded once by _start_worker


def _start_worker(recipe, threads: int) -> None:
    import signal

    import torch

    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the parent's to handle: it stops the workers
    torch.set_num_threads(threads)
    global _RECIPE
    _RECIPE = recipe
    _RECIPE.load()


def _encode_in_worker(texts: list[str]):
    return _RECIPE.encode(texts)


def process_shards(recipe, workers: int, threads: int | None, progress):
    """An `encode_shards` running `recipe` in `workers` spawned processes with `threads` torch
    threads each (default: the cores shared among them). At most 2 x workers shards are in flight;
    results come back in shard order."""
    def encode_shards(pending: Pending):
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool
        from multiprocessing import get_context

        pool = ProcessPoolExecutor(workers, mp_context=get_context("spawn"), initializer=_start_worker,
                                   initargs=(recipe, threads_per_worker(workers, threads)))
        in_flight: deque = deque()
        finished = False
        try:
            for index, shard in pending:
                in_flight.append((index, shard, pool.submit(_encode_in_worker, [d.text for d in shard])))
                while len(in_flight) >= 2 * workers:
                    yield _collect(in_flight.popleft(), recipe, progress)
            while in_flight:
                yield _collect(in_flight.popleft(), recipe, progress)
            finished = True
        except BrokenProcessPool:
            raise InputError("a worker process died (out of memory, or killed); complete shards are kept: "
                             "run the same command again to resume") from None
        finally:
            if not finished:  # interrupted or failed: stop the workers now rather than after their shard
                for process in list(getattr(pool, "_processes", {}).values()):
                    process.terminate()
            pool.shutdown(wait=True, cancel_futures=True)

    return encode_shards


def _collect(item, recipe, progress):
    index, shard, future = item
    records = recipe.records(shard, future.result())
    progress.update(len(shard))
    return index, shard, records


# -- Ray Data --------------------------------------------------------------------------------

def import_ray():
    """The ray module, or InputError naming the extra to install."""
    try:
        import ray
        import ray.data  # noqa: F401
    except ImportError:
        raise InputError(f"--ray needs Ray Data, which is not installed: {RAY_EXTRA}") from None
    return ray


# A line of Ray's C++ backend: "[2026-12-03 10:04:49,802 E 12581 12581] core_worker.cc:2465: ..." from
# this process, "(pid=gcs_server) [... E 17518 17518] (gcs_server) gcs_actor_scheduler.cc:538: ..."
# forwarded from Ray's own processes, with the colour codes around it.
_COLOUR = rb"(?:\x1b\[[0-9;]*m)*"
RAY_BACKEND_LINE = re.compile(
    _COLOUR + rb"(?:\([^)\n]*\)" + _COLOUR + rb" )?\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d+ [DIWE] \d+ \d+\] "
    rb"(?:\([\w.-]+\) )?[\w.]+:\d+: [^\n]*\n?")


@contextmanager
def ray_backend_lines_dropped():
    """While Ray Data runs the actors (and Ray shuts down), the lines Ray's C++ backend writes to
    this process's stderr are dropped: on every run, a successful one too, it logs at error level
    that each actor "has constructor arguments in the object store and max_restarts > 0" (Ray
    Data's own arguments, a known Ray issue, nothing to act on), and at shutdown that the stopped
    actors could not be killed. Its failures still reach this process as exceptions. Everything
    else written to stderr (the progress bar, warnings, the actors' own output) passes unchanged."""
    stderr = os.dup(2)
    read_end, write_end = os.pipe()
    os.dup2(write_end, 2)
    os.close(write_end)

    def forward():
        while chunk := os.read(read_end, 65536):
            kept = RAY_BACKEND_LINE.sub(b"", chunk)
            if kept:
                os.write(stderr, kept)

    thread = threading.Thread(target=forward, name="ray-stderr", daemon=True)
    thread.start()
    try:
        yield
    finally:
        os.dup2(stderr, 2)  # the pipe's last writer is gone: the thread reads the rest, then stops
        thread.join(timeout=5)
        os.close(read_end)
        os.close(stderr)


class ShardActor:
    """A Ray Data actor: builds the recipe's model once, then encodes one shard per row."""

    def __init__(self, recipe, threads: int):
        import torch

        torch.set_num_threads(threads)
        self.recipe = recipe
        self.recipe.load()

    def __call__(self, batch: dict) -> dict:
        import numpy as np

        encoded = [pickle.dumps(self.recipe.encode([str(t) for t in texts]), protocol=pickle.HIGHEST_PROTOCOL)
                   for texts in batch["texts"]]
        return {"index": np.asarray(batch["index"], dtype=np.int64), "encoded": np.array(encoded, dtype=object)}


def ray_shards(recipe, progress, address: str | None = None, actors: int | None = None,
               gpus_per_actor: float = 0, threads: int | None = None, quiet: bool = True,
               max_actors: int | None = None):
    """An `encode_shards` on Ray Data: the pending shards become a dataset (one row per shard: its
    index, ids and texts), encoded by `map_batches` over a pool of `actors` `ShardActor`s (default:
    one per CPU of the cluster, or per GPU with `gpus_per_actor`), each with `gpus_per_actor` GPUs
    and `threads` torch threads (default: the cluster's CPUs shared among the actors). Rows come
    back to this process in shard order. `address`: a running cluster's (`ray://HOST:10001`,
    `auto`); none starts a local Ray with this machine's cores. `max_actors`: at most this many
    (the shard count: an actor without a shard would hold cores the others could use)."""
    ray = import_ray()
    import logging

    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its plan and stats lines; errors still show
    started_here = not ray.is_initialized()
    if started_here:  # logging_level: Ray's notes ("Started a local Ray instance.") off
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=not quiet, logging_level=logging.ERROR)
        else:
            ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=not quiet,
                     logging_level=logging.ERROR)
        restore_jvm_fault_handlers()  # Ray's handlers replaced the JVM's, if it runs here
    cpus = int(ray.cluster_resources().get("CPU", os.cpu_count() or 1))
    if actors is None:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        actors = max(1, int(gpus // gpus_per_actor) if gpus_per_actor and gpus else cpus)
    if max_actors:
        actors = min(actors, max_actors)
    actor_threads = threads or max(1, cpus // actors)

    def encode_shards(pending: Pending):
        shards = dict(pending)  # this process reads the corpus once, as it does without --ray
        if not shards:
            return
        context = ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        context.enable_progress_bars = False  # the bar is this process's, counted in documents
        rows = [{"index": index, "ids": [d.id for d in shard], "texts": [d.text for d in shard]}
                for index, shard in shards.items()]
        dataset = ray.data.from_items(rows, override_num_blocks=len(rows)).map_batches(
            ShardActor, fn_constructor_args=(recipe, actor_threads), batch_size=1, batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=actors), num_cpus=max(1, min(actor_threads, cpus // actors)) if not gpus_per_actor else 1,
            num_gpus=gpus_per_actor or None)
        try:
            with ray_backend_lines_dropped():
                for row in dataset.iter_rows():
                    index = int(row["index"])
                    shard = shards.pop(index)
                    records = recipe.records(shard, pickle.loads(row["encoded"]))
                    progress.update(len(shard))
                    yield index, shard, records
                if started_here:  # now rather than at exit, where its last backend lines would show
                    ray.shutdown()
                    restore_jvm_fault_handlers()  # shutdown leaves SIG_DFL behind
        except ray.exceptions.RayTaskError as err:
            cause = getattr(err, "cause", None)
            if isinstance(cause, InputError):
                raise InputError(str(cause)) from None
            raise

    return encode_shards
