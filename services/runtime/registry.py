"""Service registry and the blocking ``serve()`` lifecycle behind ``grpo serve NAME``.

Each service module exposes ``SERVICE = ServiceSpec(name, settings_cls, build)``. ``build``
turns validated settings into ``ServiceParts``: the gRPC bindings, background workers (stream
consumers, pollers) and an optional ``close`` hook. ``SERVICES`` maps CLI names to the
``module:ATTRIBUTE`` import path of each spec; ``grpo serve`` also accepts such a path
directly, so a new service needs no edit here to be served.

``serve(spec, settings)`` runs one service until SIGTERM/SIGINT:

1. ``build(settings)``: process pools fork here, before gRPC starts (forking a process that
   runs gRPC threads breaks it);
2. ``create_server`` + ``start`` (health SERVING, or NOT_SERVING until the service's
   ``readiness`` check passes, and again whenever it fails), then start every worker;
3. on the signal: health NOT_SERVING, refuse new calls, let in-flight calls finish within
   ``server.grace_s``, stop workers (each gets ``grace_s``), call ``close``; return normally
   so the process exits 0, or raise ``InternalError`` (exit non-zero) when a worker's
   ``stop`` raised (its last work failed, e.g. the run driver's final evaluation).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, cast, runtime_checkable

from pydantic import BaseModel

from grpo.errors import InternalError, InvalidArgumentError, NotFoundError
from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server

__all__ = [
    "SERVICES",
    "BackgroundWorker",
    "ServiceParts",
    "ServiceSpec",
    "VerifierDeclaration",
    "load_settings_cls",
    "load_spec",
    "serve",
    "service_names",
]

log = logging.getLogger(__name__)

SERVICES: dict[str, str] = {
    "verifier-math": "grpo.verifiers.math.service:SERVICE",
    "verifier-steps": "grpo.verifiers.steps.service:SERVICE",
    "verifier-code": "grpo.verifiers.code.service:SERVICE",
    "verifier-format": "grpo.verifiers.shaping.service:FORMAT_SERVICE",
    "verifier-length": "grpo.verifiers.shaping.service:LENGTH_SERVICE",
    "generation": "grpo.services.generation.service:SERVICE",
    "rollout-worker": "grpo.services.generation.worker_service:SERVICE",
    "assembler": "grpo.services.assembler.service:SERVICE",
    "learner": "grpo.services.learner.service:SERVICE",
    "driver": "grpo.services.driver.service:SERVICE",
}
"""CLI service name -> ``module:ATTRIBUTE`` of its ``ServiceSpec``."""

SETTINGS: dict[str, str] = {
    "learner": "grpo.services.learner.settings:LearnerServiceSettings",
}
"""CLI service name -> ``module:ATTRIBUTE`` of its settings class, for the services whose
module imports torch: ``grpo run`` validates every service's settings before it starts them
and should not pay those imports itself (the services do). The class is the spec's
``settings_cls`` (tested)."""


@runtime_checkable
class BackgroundWorker(Protocol):
    """A long-running loop a service runs beside its gRPC server (e.g. a stream consumer).

    ``start()`` must return promptly (run the loop in a thread); ``stop(timeout_s)`` asks the
    loop to finish its current item, acknowledges nothing it has not made durable, and joins
    within ``timeout_s`` seconds. A worker may also define ``is_alive() -> bool``: ``serve``
    polls it and, when a started worker's loop has died, drains and raises ``InternalError``
    so that the process exits non-zero and its supervisor restarts it.
    """

    def start(self) -> None: ...

    def stop(self, timeout_s: float) -> None: ...


class LoopWorker:
    """A ``BackgroundWorker`` that calls ``run_once()`` in a daemon thread until stopped.

    An iteration that raises is logged and retried after ``error_backoff_s`` seconds (the
    stream's pending entries make a retry safe); ``stop`` lets the iteration in hand finish.
    Subclasses implement ``run_once`` and may extend ``start`` (e.g. to create a consumer group).
    """

    thread_name = "loop-worker"
    error_backoff_s = 1.0

    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._beat = time.monotonic()

    def beat(self) -> None:
        """Record that the loop advanced (each iteration does; a long one may too)."""
        self._beat = time.monotonic()

    def progress_age_s(self) -> float:
        """Seconds since the loop last advanced (``beat``); 0.0 once stopped."""
        if self._stop.is_set():
            return 0.0
        return time.monotonic() - self._beat

    def run_once(self) -> object:
        """One iteration of the loop (subclasses override)."""
        raise NotImplementedError

    def start(self) -> None:
        """Run the loop in a daemon thread (returns at once)."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Ask the loop to stop after the current iteration and join within ``timeout_s``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def is_alive(self) -> bool:
        """True while the loop thread runs (``serve`` restarts the process otherwise)."""
        return self._thread is not None and self._thread.is_alive()

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.beat()
            try:
                self.run_once()
            except Exception:
                log.exception("%s iteration failed; retrying", self.thread_name)
                self._stop.wait(self.error_backoff_s)


def _stalled_workers(workers: list[BackgroundWorker], stall_s: float) -> list[str]:
    """``repr`` and age of workers exposing ``progress_age_s()`` whose loop has not advanced
    for ``stall_s`` seconds (none when ``stall_s`` is 0)."""
    if not stall_s:
        return []
    out = []
    for worker in workers:
        age = getattr(worker, "progress_age_s", None)
        if callable(age) and (seconds := float(age())) >= stall_s:
            out.append(f"{worker!r} ({seconds:.0f} s)")
    return out


def _dead_workers(workers: list[BackgroundWorker]) -> list[BackgroundWorker]:
    """Workers that expose ``is_alive()`` (a thread, or a wrapper of one) and report False."""
    dead = []
    for worker in workers:
        is_alive = getattr(worker, "is_alive", None)
        if callable(is_alive) and not is_alive():
            dead.append(worker)
    return dead


@dataclass
class ServiceParts:
    """What ``ServiceSpec.build`` returns.

    Attributes:
        bindings: gRPC services to serve (may be empty for a worker-only process, which then
            serves health, reflection and metrics only).
        workers: background loops started after the server and stopped after its drain.
        close: called last on shutdown (e.g. to shut a process pool down); optional.
        readiness: called by ``serve`` once a second (it must return at once): None when the
            service may take work, else the reason it may not. While it returns a reason,
            health reports NOT_SERVING (the server starts NOT_SERVING and turns SERVING only
            when it first returns None); each change is logged with the reason. Optional:
            without it the service is SERVING as soon as its server starts.
    """

    bindings: list[ServiceBinding]
    workers: list[BackgroundWorker] = field(default_factory=list)
    close: Callable[[], None] | None = None
    readiness: Callable[[], str | None] | None = None


@dataclass(frozen=True)
class VerifierDeclaration:
    """What a verifier service scores, known without starting it (its class attributes): what
    ``Describe`` will answer, so ``grpo run`` checks its routes before any work.

    Attributes:
        kind: ``"outcome"`` (one reward per response) or ``"process"`` (one per step).
        task_types: the task types it accepts; empty = any task type.
    """

    kind: str
    task_types: tuple[str, ...]


@dataclass(frozen=True)
class ServiceSpec:
    """How to run one service.

    Attributes:
        name: CLI name, e.g. ``"verifier-math"``.
        settings_cls: its pydantic settings model; must have a ``server: ServerSettings`` field.
        build: settings -> ``ServiceParts``; may start process pools (before gRPC starts).
        verifier: for a verifier service, its kind and task types (None for other services).
    """

    name: str
    settings_cls: type[BaseModel]
    build: Callable[[Any], ServiceParts]
    verifier: VerifierDeclaration | None = None

    def __post_init__(self) -> None:
        server_field = self.settings_cls.model_fields.get("server")
        if server_field is None or server_field.annotation is not ServerSettings:
            raise InvalidArgumentError(
                f"{self.settings_cls.__name__} (service {self.name!r}) needs a field "
                "`server: ServerSettings = Field(default_factory=ServerSettings, ...)`"
            )


_WORKER_POLL_S = 1.0
"""How often ``serve`` checks that its background workers are still alive (seconds)."""


class _ReadinessGate:
    """Health follows a service's ``readiness`` check: SERVING only while it returns None."""

    def __init__(
        self,
        service: str,
        readiness: Callable[[], str | None] | None,
        set_serving: Callable[[bool], None],
    ) -> None:
        self.service = service
        self.readiness = readiness
        self.set_serving = set_serving
        self.reason: str | None = "not checked yet"

    def check(self, stalled: str | None = None) -> None:
        """Ask the check once; on a change, set health and log (ERROR with the reason).

        Args:
            stalled: why a worker loop counts as stalled (``_stalled_workers``), or None: a
                stalled service is not ready whatever its check says.
        """
        if self.readiness is None and stalled is None:
            if self.reason is not None:
                self.reason = None
                self.set_serving(True)
                log.info("service ready", extra={"service": self.service})
            return
        reason = stalled
        if reason is None and self.readiness is not None:
            try:
                reason = self.readiness()
            except Exception as exc:  # a broken check must not report a broken service ready
                log.exception("readiness check raised", extra={"service": self.service})
                reason = f"readiness check raised {type(exc).__name__}: {exc}"
        if reason == self.reason:
            return
        self.reason = reason
        self.set_serving(reason is None)
        if reason is None:
            log.info("service ready", extra={"service": self.service})
        else:
            log.error(
                "service not ready, health NOT_SERVING: %s",
                reason,
                extra={"service": self.service, "reason": reason},
            )


def _failure_of(worker: BackgroundWorker) -> str:
    """``": <Type>: <message>"`` of what ended a dead worker's loop (its ``failure`` or
    ``error`` attribute), "" when it recorded none."""
    error = getattr(worker, "failure", None) or getattr(worker, "error", None)
    return f": {type(error).__name__}: {error}" if isinstance(error, BaseException) else ""


def service_names() -> list[str]:
    """The CLI names in ``SERVICES``, sorted."""
    return sorted(SERVICES)


def load_spec(name: str) -> ServiceSpec:
    """Import and return the ``ServiceSpec`` for a CLI name or a ``module:ATTRIBUTE`` path.

    Raises:
        NotFoundError: unknown name (the message lists the known ones).
        ImportError: the service module cannot be imported (e.g. a missing extra).
        InvalidArgumentError: the module has no such attribute, or it is not a ``ServiceSpec``.
    """
    target = SERVICES.get(name, name)
    if ":" not in target:
        raise NotFoundError(
            f"unknown service {name!r}; known: {', '.join(service_names())} "
            "(or give module:ATTRIBUTE)"
        )
    module_name, _, attr = target.partition(":")
    module = importlib.import_module(module_name)
    if not hasattr(module, attr):
        raise InvalidArgumentError(f"{target}: module {module_name} has no attribute {attr!r}")
    spec = getattr(module, attr)
    if not isinstance(spec, ServiceSpec):
        raise InvalidArgumentError(f"{target} is {type(spec).__name__}, not a ServiceSpec")
    return spec


def load_settings_cls(name: str) -> type[BaseModel]:
    """The settings class of a CLI name or ``module:ATTRIBUTE`` path (``spec.settings_cls``),
    imported from ``SETTINGS`` where the service has an entry there, without its service
    module.

    Raises:
        the errors of :func:`load_spec`.
    """
    if name in SETTINGS:
        module_name, _, attr = SETTINGS[name].partition(":")
        return cast(type[BaseModel], getattr(importlib.import_module(module_name), attr))
    return load_spec(name).settings_cls


def _write_port_file(path: Path, port: int, metrics_port: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps({"port": port, "metrics_port": metrics_port, "pid": os.getpid()}))
    tmp.replace(path)


def serve(spec: ServiceSpec | str, settings: Any, *, port_file: Path | None = None) -> None:
    """Run ``spec`` with ``settings`` until SIGTERM or SIGINT, then drain and return.

    Must be called from the main thread (it installs signal handlers).

    Args:
        spec: the service to run, or its CLI name / ``module:ATTRIBUTE`` (see ``load_spec``).
        settings: an instance of ``spec.settings_cls``.
        port_file: when given, ``{"port", "metrics_port", "pid"}`` JSON is written there
            atomically once the server is SERVING (how callers learn an ephemeral port).

    Raises:
        InvalidArgumentError: ``settings`` is not a ``spec.settings_cls``.
        NotFoundError: ``spec`` is an unknown name.
        Whatever ``spec.build`` or binding raises; workers already started are stopped first.
        InternalError: a started worker's loop died, or a worker's ``stop`` raised (after
            everything else was stopped and closed).
    """
    if isinstance(spec, str):
        spec = load_spec(spec)
    if not isinstance(settings, spec.settings_cls):
        raise InvalidArgumentError(
            f"settings for {spec.name!r} must be {spec.settings_cls.__name__}, "
            f"got {type(settings).__name__}"
        )
    server_settings: ServerSettings = cast(Any, settings).server  # checked by ServiceSpec
    stop_requested = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        log.info("signal received, draining", extra={"signal": signal.Signals(signum).name})
        stop_requested.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    parts = spec.build(settings)
    started: list[BackgroundWorker] = []
    stop_failures: list[str] = []
    server = None
    try:
        server = create_server(parts.bindings, server_settings)
        server.start(serving=parts.readiness is None)
        for worker in parts.workers:
            worker.start()
            started.append(worker)
        if port_file is not None:
            _write_port_file(port_file, server.port, server.metrics_port)
        log.info("service started", extra={"service": spec.name, "port": server.port})
        gate = _ReadinessGate(spec.name, parts.readiness, server.set_serving)
        gate.check()
        while not stop_requested.wait(_WORKER_POLL_S):
            stalled = _stalled_workers(started, server_settings.stall_s)
            gate.check("worker loop stalled: " + ", ".join(stalled) if stalled else None)
            dead = _dead_workers(started)
            if dead:
                # A crashed loop must not hide behind a SERVING health check: drain and exit
                # non-zero so the supervisor (grpo run, Kubernetes) restarts the process, which
                # then resumes from its stream's pending entries.
                server.set_serving(False)
                raise InternalError(
                    f"background worker died: {type(dead[0]).__name__}"
                    f"{_failure_of(dead[0])}; exiting to restart"
                )
    finally:
        if server is not None:
            server.stop()
        for worker in reversed(started):
            try:
                worker.stop(server_settings.grace_s)
            except Exception as exc:
                log.exception("worker failed to stop", extra={"worker": repr(worker)})
                stop_failures.append(f"{worker!r}: {exc}")
        if parts.close is not None:
            parts.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        log.info("service stopped", extra={"service": spec.name})
    if stop_failures:  # a worker whose last work failed: the process must not exit 0
        raise InternalError(f"{spec.name}: a worker failed while stopping: {stop_failures[0]}")
