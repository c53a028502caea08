"""A pre-started pool of worker processes with a hard wall-clock limit and a memory cap.

CPU-heavy checks (sympy) run here, never in a server thread: a call that exceeds its time
limit is ended by SIGKILL from the parent and its worker is replaced, so no signal-based
timeout (``signal.alarm``) is ever needed and the same limit holds whether the caller is the
main thread, a worker thread or an asyncio handler. Each worker caps its address space with
``RLIMIT_AS``; an allocation past the cap raises ``MemoryError`` inside the worker (reported as
:class:`CheckMemoryError`) or kills it (reported as :class:`WorkerCrashError`, worker replaced).

Workers are started with the ``forkserver`` method: the fork server is a fresh single-threaded
interpreter that imports the ``preload`` modules once (sympy takes ~1.2 s) and forks each
worker from that clean state. Create the pool before the gRPC server starts; replacing a
killed worker later is still safe because the fork happens in the fork server, not in the
threaded server process.

A script needs no ``if __name__ == "__main__":`` guard: a worker never imports the main module
(multiprocessing's spawn and forkserver children normally run the script again, which
without the guard starts a pool inside every worker). The preparation data sent to a process
named :data:`WORKER_NAME` leaves the main module out (:func:`_keep_main_out_of_workers`), so
the functions a pool runs must live in an importable module; one defined in ``__main__`` is
refused with a message saying so.
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import queue
import resource
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from multiprocessing import spawn
from multiprocessing.connection import Connection
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import DeadlineExceededError, InternalError, InvalidArgumentError, UnavailableError

__all__ = [
    "CallOutcome",
    "CheckMemoryError",
    "CheckTimeoutError",
    "PoolSettings",
    "RemoteCheckError",
    "WorkerCrashError",
    "WorkerPool",
    "request_deadline",
]


_REQUEST_DEADLINE: ContextVar[float | None] = ContextVar("grpo_request_deadline", default=None)


@contextlib.contextmanager
def request_deadline(deadline: float | None) -> Iterator[None]:
    """Within this block, :meth:`WorkerPool.call` without ``deadline`` uses ``deadline``.

    The servicer sets it (a ``time.monotonic()`` instant) around each item, so a check that
    is still queued for a worker when its request's deadline passes is not run at all.
    """
    token = _REQUEST_DEADLINE.set(deadline)
    try:
        yield
    finally:
        _REQUEST_DEADLINE.reset(token)


_READY_TIMEOUT_S = 120.0  # a worker must have imported its preload modules by then

WORKER_NAME = "grpo-pool-worker"
"""The ``multiprocessing`` name of every pool worker: its preparation data has no main module."""

_MAIN_KEYS = ("init_main_from_path", "init_main_from_name")


def _keep_main_out_of_workers() -> None:
    """Make ``multiprocessing.spawn.get_preparation_data`` leave the main module out for pool
    workers (processes named :data:`WORKER_NAME`); every other process is prepared as before.

    Both non-fork start methods (``popen_spawn_posix`` and ``popen_forkserver``) build a
    child's preparation data with this one function, by the process's name, and the child
    imports the main module only when the data names it (``spawn.prepare``). Installed once,
    at import; idempotent.
    """
    original = spawn.get_preparation_data
    if getattr(original, "grpo_pool_filter", False):
        return

    def get_preparation_data(name: str) -> dict[str, Any]:
        data = original(name)
        if name == WORKER_NAME:
            for key in _MAIN_KEYS:
                data.pop(key, None)
        return data

    get_preparation_data.grpo_pool_filter = True  # type: ignore[attr-defined]
    spawn.get_preparation_data = get_preparation_data


_keep_main_out_of_workers()


class PoolSettings(BaseModel):
    """Configuration of a :class:`WorkerPool`."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    workers: int = Field(default=2, ge=1, le=256, description="Number of worker processes.")
    timeout_s: float = Field(
        default=5.0,
        gt=0,
        description="Hard wall-clock limit of one call in seconds (SIGKILL after).",
    )
    memory_mb: int = Field(
        default=1536,
        ge=256,
        description="Address-space cap (RLIMIT_AS) of each worker in MiB; it includes the "
        "interpreter and preloaded libraries (~110 MiB with sympy and math-verify).",
    )
    start_method: Literal["forkserver", "spawn"] = Field(
        default="forkserver",
        description="How workers are started: 'forkserver' (fast replacement, shared preload) "
        "or 'spawn' (each worker a fresh interpreter).",
    )


class CheckTimeoutError(DeadlineExceededError):
    """A call exceeded its wall-clock limit; its worker was killed and replaced."""


class CheckMemoryError(InternalError):
    """A call raised MemoryError in its worker (the RLIMIT_AS cap was reached)."""


class WorkerCrashError(InternalError):
    """A worker died during a call (e.g. killed by the kernel); it was replaced."""


class RemoteCheckError(InternalError):
    """The called function raised; ``exc_type`` is the name of the exception class."""

    def __init__(self, exc_type: str, message: str) -> None:
        super().__init__(f"{exc_type}: {message}")
        self.exc_type = exc_type


def _run(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[str, Any]:
    """One item in the worker: ``("ok", result)``, ``("memory", "")`` or ``("error", ...)``."""
    try:
        return ("ok", fn(*args))
    except MemoryError:
        return ("memory", "")
    except BaseException as exc:
        return ("error", (type(exc).__name__, str(exc)[:2000]))


def _worker_main(conn: Connection, memory_bytes: int, preload: Sequence[str]) -> None:
    """Worker loop: cap memory, import ``preload``, then answer ``(fn, [args, ...])`` with one
    reply per item, each sent as soon as it is done, until EOF/None."""
    resource.setrlimit(resource.RLIMIT_AS, (memory_bytes, memory_bytes))
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    for module in preload:
        importlib.import_module(module)
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            return
        if message is None:
            return
        fn, batch = message
        for args in batch:
            reply = _run(fn, args)
            try:
                conn.send(reply)
            except MemoryError:
                conn.send(("memory", ""))
            except Exception as exc:
                conn.send(("error", (type(exc).__name__, f"result not sendable: {exc}"[:2000])))


@dataclass(frozen=True)
class CallOutcome:
    """One item of :meth:`WorkerPool.call_many`.

    Attributes:
        value: what the function returned (None when ``error`` is set).
        error: the error :meth:`WorkerPool.call` would have raised for the item, or None.
        seconds: the item's wall time, from the previous item's reply (or the send) to its
            own reply, in seconds.
    """

    value: Any = None
    error: Exception | None = None
    seconds: float = 0.0


class _Worker:
    """One worker process and the parent's end of its pipe."""

    def __init__(self, ctx: Any, memory_bytes: int, preload: Sequence[str]) -> None:
        self.conn, child = multiprocessing.Pipe(duplex=True)
        self.process = ctx.Process(
            target=_worker_main,
            args=(child, memory_bytes, tuple(preload)),
            daemon=True,
            name=WORKER_NAME,
        )
        self.process.start()
        child.close()

    def wait_ready(self, timeout_s: float) -> None:
        """Wait for the worker's "ready" message (sent once its preload imports are done)."""
        try:
            if self.conn.poll(timeout_s) and self.conn.recv() == ("ready", None):
                return
        except (EOFError, OSError):
            pass
        self.kill()
        code = self.process.exitcode
        if code is not None:
            raise InternalError(
                f"worker process exited with code {code} before it was ready (a preload "
                "module failed to import?)"
            )
        raise InternalError(f"worker process did not start within {timeout_s:.0f} s")

    def kill(self) -> None:
        with contextlib.suppress(Exception):
            self.process.kill()
        self.process.join(5)
        self.conn.close()


class WorkerPool:
    """A fixed set of worker processes that run picklable module-level functions.

    Thread-safe: any number of threads may call :meth:`call` at once; each call takes an idle
    worker (waiting for one if all are busy), so at most ``settings.workers`` calls run. The
    constructor returns once every worker has imported ``preload`` (sympy: ~1-2 s), so a
    service built on the pool is ready when it reports SERVING.

    Args:
        settings: pool size, time limit, memory cap, start method.
        preload: modules imported once by the fork server (and by each worker) so that
            calls do not pay their import cost.
    """

    def __init__(self, settings: PoolSettings | None = None, preload: Sequence[str] = ()) -> None:
        self.settings = settings or PoolSettings()
        self._preload = tuple(preload)
        self._memory_bytes = self.settings.memory_mb * 1024 * 1024
        self._ctx: Any = multiprocessing.get_context(self.settings.start_method)
        if self.settings.start_method == "forkserver":
            self._ctx.set_forkserver_preload(list(self._preload))
        self._idle: queue.Queue[_Worker] = queue.Queue()
        self._all: set[_Worker] = set()
        self._lock = threading.Lock()
        self._closed = False
        self.replaced = 0
        workers = [self._start_worker() for _ in range(self.settings.workers)]
        try:
            for worker in workers:
                self._enlist(worker)
        except InternalError:
            self.close()
            raise

    def _start_worker(self) -> _Worker:
        return _Worker(self._ctx, self._memory_bytes, self._preload)

    def _enlist(self, worker: _Worker) -> None:
        worker.wait_ready(_READY_TIMEOUT_S)
        with self._lock:
            self._all.add(worker)
        self._idle.put(worker)

    def _add_worker(self) -> None:
        self._enlist(self._start_worker())

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        with self._lock:
            self._all.discard(worker)
            self.replaced += 1
            closed = self._closed
        if not closed:
            self._add_worker()

    @property
    def idle_workers(self) -> int:
        """Workers waiting for a call right now (approximate while calls start and end)."""
        return self._idle.qsize()

    @property
    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        with self._lock:
            return [w.process.pid for w in self._all if w.process.pid is not None]

    def call(
        self,
        fn: Callable[..., Any],
        *args: Any,
        timeout_s: float | None = None,
        deadline: float | None = None,
    ) -> Any:
        """Run ``fn(*args)`` in a worker and return its result.

        Args:
            fn: a module-level (picklable) function.
            *args: picklable arguments.
            timeout_s: wall-clock limit of the call in seconds; default ``settings.timeout_s``.
            deadline: optional ``time.monotonic()`` instant by which a worker must be free
                and the call done (the tighter of the two limits applies); default: the
                one set by :func:`request_deadline`, if any.

        Raises:
            CheckTimeoutError: the limit passed (the worker was killed and replaced), or no
                worker became free before ``deadline``.
            CheckMemoryError: ``fn`` raised MemoryError under the memory cap.
            WorkerCrashError: the worker died during the call (it was replaced).
            RemoteCheckError: ``fn`` raised another exception.
            UnavailableError: the pool is closed.
            InvalidArgumentError: ``fn`` is defined in ``__main__``.
        """
        (outcome,) = self.call_many(fn, [args], timeout_s=timeout_s, deadline=deadline)
        if outcome.error is not None:
            raise outcome.error
        return outcome.value

    def call_many(
        self,
        fn: Callable[..., Any],
        arg_list: Sequence[tuple[Any, ...]],
        *,
        timeout_s: float | None = None,
        deadline: float | None = None,
        on_outcome: Callable[[int, CallOutcome], None] | None = None,
    ) -> list[CallOutcome]:
        """Run ``fn(*args)`` for each ``args`` of ``arg_list``, in order, as :meth:`call` would
        one by one, but with one message to the worker for all of them.

        The worker sends each item's reply as soon as it is done, and every item has its own
        limit from the previous reply: an item past it has its worker killed and replaced,
        and the items after it go to the next free worker. So each item gets exactly the
        outcome :meth:`call` would have given it; only the pipe round trips are shared.

        Args:
            fn: a module-level (picklable) function.
            arg_list: one tuple of picklable arguments per item.
            timeout_s, deadline: as for :meth:`call`, per item.
            on_outcome: called with ``(index, outcome)`` as each item's outcome is known (an
                item cut at its limit before its worker is replaced), from this thread.

        Returns:
            One :class:`CallOutcome` per item, in order: the result, or the error
            :meth:`call` would have raised for it (``CheckTimeoutError``,
            ``CheckMemoryError``, ``WorkerCrashError``, ``RemoteCheckError``).

        Raises:
            UnavailableError: the pool is closed.
            InvalidArgumentError: ``fn`` is defined in ``__main__`` (workers never import the
                main module: define it in an importable module).
        """
        if self._closed:
            raise UnavailableError("worker pool is closed")
        if getattr(fn, "__module__", None) == "__main__":
            raise InvalidArgumentError(
                f"{getattr(fn, '__qualname__', fn)!r} is defined in the main script; pool "
                "workers never import the main module: define it in an importable module"
            )
        limit = self.settings.timeout_s if timeout_s is None else timeout_s
        if deadline is None:
            deadline = _REQUEST_DEADLINE.get()
        items = list(arg_list)
        outcomes: list[CallOutcome] = []

        def emit(outcome: CallOutcome) -> None:
            if on_outcome is not None:
                on_outcome(len(outcomes), outcome)
            outcomes.append(outcome)

        while len(outcomes) < len(items):
            rest = items[len(outcomes) :]
            try:
                if deadline is not None and time.monotonic() >= deadline:
                    raise CheckTimeoutError("the request deadline passed before the call started")
                worker = self._take(deadline)
            except CheckTimeoutError as exc:
                for _ in rest:
                    emit(CallOutcome(error=exc))
                break
            self._run_on(worker, fn, rest, limit, deadline, emit)
        return outcomes

    def _take(self, deadline: float | None) -> _Worker:
        """A live idle worker, waiting until ``deadline`` at most (CheckTimeoutError after)."""
        try:
            wait = None if deadline is None else max(0.0, deadline - time.monotonic())
            worker = self._idle.get(timeout=wait)
        except queue.Empty:
            raise CheckTimeoutError("no free worker before the request deadline") from None
        if worker.conn.poll(0):  # an idle worker only sends EOF: it died (e.g. OOM killer)
            self._replace(worker)
            worker = self._idle.get()
        return worker

    def _run_on(
        self,
        worker: _Worker,
        fn: Callable[..., Any],
        batch: list[tuple[Any, ...]],
        limit: float,
        deadline: float | None,
        emit: Callable[[CallOutcome], None],
    ) -> None:
        """Send ``batch`` to ``worker`` and ``emit`` each reply's outcome until all came or
        one item failed the worker (time limit or crash: that item's outcome is emitted last,
        as soon as the worker is killed, and the worker is replaced after)."""
        alive: _Worker | None = worker
        since = time.perf_counter()
        try:
            worker.conn.send((fn, batch))
            for _ in batch:
                item_limit = limit
                if deadline is not None:
                    item_limit = min(limit, max(0.0, deadline - time.monotonic()))
                if not worker.conn.poll(item_limit):
                    worker.kill()
                    alive = None
                    error = CheckTimeoutError(
                        f"call exceeded the {item_limit:.3g} s limit; worker killed"
                    )
                    emit(CallOutcome(error=error, seconds=item_limit))
                    self._replace(worker)
                    return
                kind, payload = worker.conn.recv()
                now = time.perf_counter()
                emit(self._outcome(kind, payload, now - since))
                since = now
        except (EOFError, OSError) as exc:
            if alive is not None:
                worker.kill()
                alive = None
                code = worker.process.exitcode
                crash = WorkerCrashError(f"worker died during the call (exit code {code})")
                crash.__cause__ = exc
                emit(CallOutcome(error=crash, seconds=time.perf_counter() - since))
                self._replace(worker)
        finally:
            if alive is not None:
                self._idle.put(alive)

    def _outcome(self, kind: str, payload: Any, seconds: float) -> CallOutcome:
        if kind == "ok":
            return CallOutcome(value=payload, seconds=seconds)
        if kind == "memory":
            error: Exception = CheckMemoryError(
                f"call exceeded the {self.settings.memory_mb} MiB memory cap"
            )
        else:
            error = RemoteCheckError(*payload)
        return CallOutcome(error=error, seconds=seconds)

    def close(self) -> None:
        """Stop every worker (idempotent); calls made afterwards raise UnavailableError."""
        with self._lock:
            self._closed = True
            workers = list(self._all)
            self._all.clear()
        for worker in workers:
            with contextlib.suppress(Exception):
                worker.conn.send(None)
        for worker in workers:
            worker.process.join(1)
            worker.kill()

    def __enter__(self) -> WorkerPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
