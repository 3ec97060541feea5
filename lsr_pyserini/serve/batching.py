"""Micro-batching: concurrent requests to one index are searched together.

A bounded queue feeds a worker thread. The worker takes the first waiting query, then every
query already queued (up to `max_batch`), waiting at most `max_wait_ms` for more, and runs each
group of queries that share a key (the same `k` and `explain`) as one `run_group(key, payloads)`
call. With `prepare`, the work is a two-stage pipeline: one thread runs `prepare(key, payloads)`
(encoding the queries) and hands its result to a second thread that runs `run_group(key,
prepared)` (searching them), so the next batch is encoded while this one is searched. A full
queue refuses at once (`Overloaded`), so memory stays bounded by `queue_size x (the largest
request)`. A group that fails is retried one query at a time, so one bad query fails only its own
request.
"""
from __future__ import annotations

import logging
import queue
import threading
import time
from concurrent.futures import Future
from typing import Callable, Hashable

logger = logging.getLogger(__name__)
_STOP = object()


class Overloaded(Exception):
    """The queue is full: come back later."""


class Closed(Exception):
    """This batcher no longer takes queries (its index was reloaded or the service is stopping)."""


class MicroBatcher:
    def __init__(self, run_group: Callable[[Hashable, list], list], max_batch: int = 32, max_wait_ms: float = 0.0,
                 queue_size: int = 256, name: str = "batcher", prepare: Callable[[Hashable, list], object] | None = None):
        self.run_group, self.max_batch, self.max_wait = run_group, max_batch, max_wait_ms / 1000.0
        self.pipelined = prepare is not None
        self.prepare = prepare or (lambda key, payloads: payloads)
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._closed = False
        self._submit_lock = threading.Lock()
        self.batches = self.queries = 0  # counters, for /status
        self._handoff: queue.Queue = queue.Queue(maxsize=1)  # prepared groups waiting for the second stage
        self._workers = [threading.Thread(target=self._loop, name=f"batch-{name}", daemon=True)]
        if self.pipelined:
            self._workers.append(threading.Thread(target=self._finish_loop, name=f"batch-{name}-search", daemon=True))
        for worker in self._workers:
            worker.start()

    def submit_many(self, items: list[tuple[Hashable, object]]) -> list[Future]:
        """Queue (key, payload) items, all or none: Overloaded when the queue has no room for all."""
        futures = [Future() for _ in items]
        with self._submit_lock:
            if self._closed:
                raise Closed()
            if self._queue.maxsize - self._queue.qsize() < len(items):
                raise Overloaded()
            for (key, payload), future in zip(items, futures):
                self._queue.put_nowait((key, payload, future))
        return futures

    @property
    def depth(self) -> int:
        return self._queue.qsize()

    def close(self, wait: bool = True) -> None:
        """Take no more queries; the worker finishes every one already queued, then stops."""
        with self._submit_lock:
            if self._closed:
                return
            self._closed = True
        self._queue.put(_STOP)  # may wait for the worker to free a place (submitters no longer put)
        if wait:
            for worker in self._workers:
                worker.join()

    def _take(self) -> tuple[list, bool]:
        """(the next batch, whether the stop sign came)."""
        first = self._queue.get()
        if first is _STOP:
            return [], True
        batch, deadline = [first], time.monotonic() + self.max_wait
        while len(batch) < self.max_batch:
            try:
                remaining = deadline - time.monotonic()
                item = self._queue.get(timeout=remaining) if remaining > 0 else self._queue.get_nowait()
            except queue.Empty:
                break
            if item is _STOP:
                return batch, True
            batch.append(item)
        return batch, False

    def _loop(self) -> None:
        stop = False
        while not stop:
            batch, stop = self._take()
            groups: dict = {}
            for key, payload, future in batch:
                if future.set_running_or_notify_cancel():
                    groups.setdefault(key, []).append((payload, future))
            for key, members in groups.items():
                (self._prepare if self.pipelined else self._run)(key, members)
            self.batches += bool(batch)
            self.queries += len(batch)
        if self.pipelined:
            self._handoff.put(_STOP)

    def _prepare(self, key, members) -> None:
        try:
            prepared = self.prepare(key, [payload for payload, _ in members])
        except Exception as err:  # noqa: BLE001 - handed to the requests, never lost
            self._failed(key, members, err, self._prepare)
            return
        self._handoff.put((key, members, prepared))

    def _finish_loop(self) -> None:
        while True:
            item = self._handoff.get()
            if item is _STOP:
                return
            key, members, prepared = item
            try:
                results = self.run_group(key, prepared)
            except Exception as err:  # noqa: BLE001
                self._failed(key, members, err, self._run)
                continue
            self._resolve(members, results)

    def _run(self, key, members) -> None:
        """Both stages for one group in this thread: the unpipelined path, and the retry, one query
        at a time, of a group that failed in the second stage."""
        try:
            results = self.run_group(key, self.prepare(key, [payload for payload, _ in members]))
        except Exception as err:  # noqa: BLE001 - handed to the requests, never lost
            self._failed(key, members, err, self._run)
            return
        self._resolve(members, results)

    @staticmethod
    def _failed(key, members, err, retry) -> None:
        """A group's failure: each of several queries again alone; a lone query gets the error."""
        if len(members) > 1:
            for member in members:
                retry(key, [member])
            return
        members[0][1].set_exception(err)

    @staticmethod
    def _resolve(members, results) -> None:
        for (_, future), result in zip(members, results):
            future.set_result(result)
