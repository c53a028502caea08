"""Liveness by progress: which supervised services have stopped answering.

A process that exists is not a process that works: one stopped (SIGSTOP), swapped out or
wedged in a call keeps its sockets open and never exits, so watching for exits misses it.
Every ``grpo serve`` process answers ``grpc.health.v1`` Check from its gRPC threads, and
reports NOT_SERVING once one of its loops has not advanced for ``server.stall_s``
(``grpo.services.runtime.registry.serve``). :class:`HealthWatch` asks each service about once
a second (asynchronously: a hung service costs the caller nothing) and measures how long each
has gone without a SERVING answer, its *silence*. The checks run on a thread of their own, so
a supervising loop that is itself slow for a while (a status call to a hung service waits for
its deadline) neither delays them nor mistakes its own delay for the services' silence.

The supervisor (``grpo.local.processes.ProcessSupervisor.supervise``) reads ``silent_s`` and
restarts a service silent for ``supervision.stall_s`` (after a restart, a service may take
``startup_s`` to answer for the first time: loading a model is no stall); ``grpo run`` names
each silent service on its console once and in the summary (``stalls``).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc

__all__ = ["PROBE_EVERY_S", "PROBE_TIMEOUT_S", "HealthWatch"]

PROBE_EVERY_S = 1.0
"""Seconds between two health checks of one service."""
PROBE_TIMEOUT_S = 2.0
"""Deadline of one health check (seconds)."""


@dataclass
class _Probe:
    """The health checks of one process of one service."""

    address: str
    started: float
    channel: grpc.Channel | None = None
    future: grpc.Future | None = None
    sent: float = 0.0
    last_ok: float | None = None
    last_answer: str = "no answer yet"


class HealthWatch:
    """Asynchronous health checks of every watched service (module docstring); thread-safe.

    Checks start with the first ``watch``, on a daemon thread, and stop with ``close``.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        """Args: clock: monotonic seconds."""
        self._clock = clock
        self._probes: dict[str, _Probe] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, name: str, address: str, *, serving: bool = False) -> None:
        """Start watching ``name`` at ``address`` (a new process of it: its silence counts
        from now, and ``answered`` is False until its first SERVING answer, or True at once
        with ``serving``: the caller just saw it serve)."""
        self.forget(name)
        now = self._clock()
        with self._lock:
            self._probes[name] = _Probe(
                address=address, started=now, last_ok=now if serving else None
            )
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="health-watch",
                                                daemon=True)  # fmt: skip
                self._thread.start()

    def serving(self, name: str) -> None:
        """Record that ``name`` answered SERVING now (seen by someone else's check)."""
        with self._lock:
            probe = self._probes.get(name)
            if probe is not None:
                probe.last_ok = self._clock()
                probe.last_answer = "SERVING"

    def forget(self, name: str) -> None:
        """Stop watching ``name`` (it died, or is being stopped)."""
        with self._lock:
            probe = self._probes.pop(name, None)
        if probe is not None and probe.channel is not None:
            probe.channel.close()

    def _run(self) -> None:
        while not self._stop.wait(PROBE_EVERY_S / 4):
            self.poll()

    def poll(self) -> None:
        """Collect finished checks and send the ones due (returns at once; the watch's own
        thread calls it)."""
        with self._lock:
            now = self._clock()
            for probe in self._probes.values():
                if probe.future is not None and probe.future.done():
                    self._collect(probe, now)
                if probe.future is None and now - probe.sent >= PROBE_EVERY_S:
                    if probe.channel is None:
                        probe.channel = grpc.insecure_channel(probe.address)
                    stub = health_pb2_grpc.HealthStub(probe.channel)
                    request = health_pb2.HealthCheckRequest(service="")
                    probe.future = stub.Check.future(request, timeout=PROBE_TIMEOUT_S)
                    probe.sent = now

    def _collect(self, probe: _Probe, now: float) -> None:
        future, probe.future = probe.future, None
        assert future is not None
        try:
            reply = future.result()
        except grpc.RpcError as exc:
            code = exc.code() if hasattr(exc, "code") else None
            probe.last_answer = getattr(code, "name", "error")
            if code != grpc.StatusCode.DEADLINE_EXCEEDED and probe.channel is not None:
                # A fresh channel next time: a kept one may sit in reconnect backoff.
                with contextlib.suppress(Exception):
                    probe.channel.close()
                probe.channel = None
            return
        if reply.status == health_pb2.HealthCheckResponse.SERVING:
            probe.last_ok = now
            probe.last_answer = "SERVING"
        else:
            probe.last_answer = health_pb2.HealthCheckResponse.ServingStatus.Name(reply.status)

    def answered(self, name: str) -> bool:
        """True once the current process of ``name`` answered SERVING at least once."""
        with self._lock:
            probe = self._probes.get(name)
            return probe is not None and probe.last_ok is not None

    def silent_s(self, name: str) -> float:
        """Seconds since the current process of ``name`` last answered SERVING (since it
        started when it never did); 0.0 when it is not watched."""
        with self._lock:
            probe = self._probes.get(name)
            if probe is None:
                return 0.0
            since = probe.last_ok if probe.last_ok is not None else probe.started
            return self._clock() - since

    def last_answer(self, name: str) -> str:
        """What the last check of ``name`` got ("SERVING", "NOT_SERVING", "DEADLINE_EXCEEDED",
        "UNAVAILABLE", "no answer yet")."""
        with self._lock:
            probe = self._probes.get(name)
            return probe.last_answer if probe is not None else "not watched"

    def close(self) -> None:
        """Stop watching everything and the checking thread."""
        self._stop.set()
        thread, self._thread = self._thread, None
        if thread is not None:
            thread.join(5)
        for name in list(self._probes):
            self.forget(name)
        self._stop.clear()
