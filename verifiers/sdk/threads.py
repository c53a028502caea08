"""The servicer's scoring threads: a fixed thread pool that can be closed with a bound.

``concurrent.futures.ThreadPoolExecutor`` cannot be stopped: ``shutdown(wait=False)`` leaves
its running threads behind, and they are joined at interpreter exit (its threads are not
daemons), so a process that closes a verifier in the middle of a long item (a sandboxed
infinite loop up to its wall clock, a sympy call up to its hard limit) cannot exit until that
item ends. :class:`StoppableThreadPool` is the same executor with the stop the servicer needs:
:meth:`~StoppableThreadPool.close` cancels the queued items, joins the threads for at most a
given time and says how many are still running an item. Those threads are daemons: they end
with their item (bounded by the verifier's own limits) or with the process, whichever comes
first; their results are dropped (the waiting request already answered those items with a
status, see ``grpo.verifiers.sdk.servicer``). A Python thread cannot be killed, so "stopped"
means: no new item starts, and nothing waits for the ones that run.
"""

from __future__ import annotations

import concurrent.futures as cf
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from grpo.errors import InvalidArgumentError, UnavailableError

__all__ = ["StoppableThreadPool"]

_Item = tuple["cf.Future[Any]", Callable[..., Any], tuple[Any, ...], dict[str, Any]]


class StoppableThreadPool(cf.Executor):
    """``workers`` daemon threads running submitted calls in order of submission.

    Args:
        workers: number of threads (all started here), >= 1.
        name: thread name prefix (threads are ``<name>-<i>``).

    Raises:
        InvalidArgumentError: ``workers`` < 1.
    """

    def __init__(self, workers: int, name: str) -> None:
        if workers < 1:
            raise InvalidArgumentError(f"a thread pool needs workers >= 1, got {workers}")
        self._queue: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._closed = False
        self._busy = 0  # threads inside a call
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True)
            for i in range(workers)
        ]
        for thread in self._threads:
            thread.start()

    def submit(self, fn: Callable[..., Any], /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        """Queue ``fn(*args, **kwargs)``; its future gets the result or the exception.

        Raises:
            UnavailableError: the pool is closed.
        """
        with self._lock:
            if self._closed:
                raise UnavailableError("the scoring thread pool is closed")
            future: cf.Future[Any] = cf.Future()
            self._queue.put((future, fn, args, kwargs))
        return future

    def _work(self) -> None:
        while (item := self._queue.get()) is not None:
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():  # False: cancelled while queued
                with self._lock:
                    self._busy += 1
                try:
                    future.set_result(fn(*args, **kwargs))
                except BaseException as exc:  # the caller's to judge, as in ThreadPoolExecutor
                    future.set_exception(exc)
                finally:
                    with self._lock:
                        self._busy -= 1
            del item, future, fn, args, kwargs  # no reference kept while idle

    @property
    def running_calls(self) -> int:
        """Threads inside a call right now."""
        with self._lock:
            return self._busy

    def _stop(self, *, cancel_queued: bool) -> None:
        with self._lock:
            first = not self._closed
            self._closed = True
        if cancel_queued:
            pending: list[_Item | None] = []
            while True:
                try:
                    pending.append(self._queue.get_nowait())
                except queue.Empty:
                    break
            for item in pending:
                if item is None:
                    self._queue.put(None)  # a thread's stop (an earlier close) stays queued
                else:
                    item[0].cancel()
        if first:
            for _ in self._threads:
                self._queue.put(None)  # after every queued item: each thread ends on one

    def close(self, timeout_s: float) -> int:
        """Stop: cancel the queued calls, then join the threads for at most ``timeout_s``.

        Idempotent; :meth:`submit` raises afterwards.

        Args:
            timeout_s: the longest wait, in seconds, for the running calls to end (>= 0).

        Returns:
            How many calls are still running after the wait (0: all ended; idle threads
            end on their own once they read their stop).
        """
        self._stop(cancel_queued=True)
        until = time.monotonic() + max(0.0, timeout_s)
        for thread in self._threads:
            thread.join(max(0.0, until - time.monotonic()))
        return self.running_calls

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """The ``Executor`` API: stop taking calls; with ``cancel_futures`` cancel the queued
        ones (else they still run); with ``wait`` join the threads without a bound."""
        self._stop(cancel_queued=cancel_futures)
        if wait:
            for thread in self._threads:
                thread.join()
