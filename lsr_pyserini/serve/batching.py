"""Micro-batching: concurrent requests to one index are searched together.

A bounded queue feeds one worker thread. The worker takes the first waiting query, then every
query already queued (up to `max_batch`), waiting at most `max_wait_ms` for more, and runs each
group of queries that share a key (the same `k` and `explain`) as one `run_group(key, payloads)`
call. A full queue refuses at once (`Overloaded`), so memory stays bounded by
`queue_size x (the largest request)`. A group that fails is retried one query at a time, so one bad
query fails only its own request.
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
                 queue_size: int = 256, name: str = "batcher"):
        self.run_group, self.max_batch, self.max_wait = run_group, max_batch, max_wait_ms / 1000.0
        self._queue: queue.Queue = queue.Queue(maxsize=queue_size)
        self._closed = False
        self._submit_lock = threading.Lock()
        self.batches = self.queries = 0  # counters, for /status
        self._worker = threading.Thread(target=self._loop, name=f"batch-{name}", daemon=True)
        self._worker.start()

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
            self._worker.join()

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
                self._run(key, members)
            self.batches += bool(batch)
            self.queries += len(batch)

    def _run(self, key, members) -> None:
        try:
            results = self.run_group(key, [payload for payload, _ in members])
        except Exception as err:  # noqa: BLE001 - handed to the requests, never lost
            if len(members) > 1:
                for member in members:
                    self._run(key, [member])
                return
            members[0][1].set_exception(err)
            return
        for (_, future), result in zip(members, results):
            future.set_result(result)
