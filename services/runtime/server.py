"""The gRPC server runtime every service uses: ``create_server(bindings, settings)``.

What it supplies around a plain sync servicer (thread-pool ``grpc.server``):

- binding ``host:port`` (port 0 picks a free one; ``GrpoServer.port`` reports it), insecure or
  TLS from PEM files (mutual TLS when a client CA is given);
- the stock ``grpc.health.v1`` service, with a status per service name and the overall ``""``
  entry, SERVING after ``start()`` and NOT_SERVING from the first moment of a drain;
- server reflection listing every bound service plus health and reflection;
- a Prometheus ``/metrics`` HTTP endpoint (``grpo.services.runtime.metrics``) with per-RPC counters,
  latency histograms and in-flight gauges;
- max send/receive message size (an oversized request fails with RESOURCE_EXHAUSTED in
  grpc core, before any handler runs, and the server keeps serving);
- one interceptor that maps exceptions to status codes, the single place this happens:
  a ``grpo.errors`` exception -> its row of ``STATUS_CODES`` (the most derived class listed
  wins) with its message as details; any other exception -> INTERNAL, traceback logged;
- graceful drain: ``stop(grace_s)`` flips health to NOT_SERVING, waits ``drain_delay_s`` so load
  balancers notice, refuses new calls with UNAVAILABLE (retryable elsewhere) while health
  keeps answering, and lets in-flight calls finish within ``grace_s``.
  ``grpo.services.runtime.registry.serve`` calls it on SIGTERM/SIGINT.

Servicers read their deadline with ``remaining_s(context)`` and check required request fields
with ``require(request, "task.prompt")`` (re-exported from ``grpo.services.runtime.validation``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent import futures
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection
from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import (
    DeadlineExceededError,
    FailedPreconditionError,
    GrpoError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
)
from grpo.services.runtime.metrics import (
    RPC_IN_FLIGHT,
    RPC_LATENCY,
    RPC_REQUESTS,
    start_metrics_server,
)
from grpo.services.runtime.validation import require

__all__ = [
    "STATUS_CODES",
    "GrpoServer",
    "ServerSettings",
    "ServiceBinding",
    "create_server",
    "grpc_status_for",
    "remaining_s",
    "require",
]

log = logging.getLogger(__name__)

# A server context without a client deadline reports roughly "infinite future"; anything beyond
# this many seconds is treated as "no deadline".
_NO_DEADLINE_S = 1e8

STATUS_CODES: dict[type[GrpoError], grpc.StatusCode] = {
    InvalidArgumentError: grpc.StatusCode.INVALID_ARGUMENT,  # ContractError too
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    FailedPreconditionError: grpc.StatusCode.FAILED_PRECONDITION,
    ResourceExhaustedError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    DeadlineExceededError: grpc.StatusCode.DEADLINE_EXCEEDED,
    UnavailableError: grpc.StatusCode.UNAVAILABLE,
    InternalError: grpc.StatusCode.INTERNAL,
    GrpoError: grpc.StatusCode.INTERNAL,
}
"""The exception -> gRPC status table of the interceptor: each ``grpo.errors`` class and its
code; a subclass not listed takes the code of its nearest listed base."""


def grpc_status_for(exc: BaseException) -> grpc.StatusCode:
    """The gRPC status code for ``exc``: the ``STATUS_CODES`` row of the first class in its
    method resolution order that the table lists (so ``ContractError`` gets
    INVALID_ARGUMENT through ``InvalidArgumentError``); INTERNAL for any other exception."""
    for cls in type(exc).__mro__:
        code = STATUS_CODES.get(cls)  # type: ignore[call-overload]
        if code is not None:
            return code
    return grpc.StatusCode.INTERNAL


class ServerSettings(BaseModel):
    """Network, limits, drain and TLS settings of one gRPC server (the ``server:`` block)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    host: str = Field(
        default="127.0.0.1",
        description="Address the gRPC and metrics servers bind; use 0.0.0.0 in containers.",
    )
    port: int = Field(default=50051, ge=0, le=65535, description="gRPC port; 0 picks a free port.")
    max_message_bytes: int = Field(
        default=16 * 1024 * 1024,
        ge=1024,
        description="Largest request or response in bytes; larger requests get RESOURCE_EXHAUSTED.",
    )
    grace_s: float = Field(
        default=10.0,
        ge=0.0,
        description="Seconds in-flight calls may run after a drain starts (SIGTERM) before "
        "they are cancelled.",
    )
    drain_delay_s: float = Field(
        default=0.0,
        ge=0.0,
        description="Seconds between health turning NOT_SERVING and refusing new calls, so "
        "load balancers stop routing first (a few seconds on Kubernetes).",
    )
    max_workers: int = Field(
        default=8, ge=1, description="Handler threads: the most RPCs served at the same time."
    )
    stall_s: float = Field(
        default=0.0,
        ge=0.0,
        description="Liveness: health turns NOT_SERVING while one of the service's loops has "
        "not advanced for this long (a loop wedged in a call), SERVING again once it does; "
        "a supervisor watching health restarts it (seconds; 0 = not checked).",
    )
    redis_reply_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="Longest wait for one reply of the service's Redis client (seconds; "
        "grpo.services.runtime.redis_server.redis_client): a Redis that answers nothing is "
        "an outage past it, never a wait without end; blocking stream reads (block_ms) must "
        "be at most half of it. grpo run sets supervision.redis_reply_timeout_s.",
    )
    metrics_port: int = Field(
        default=0,
        ge=-1,
        le=65535,
        description="Prometheus /metrics HTTP port; 0 picks a free port, -1 disables it.",
    )
    tls_cert_file: Path | None = Field(
        default=None,
        description="PEM server certificate (chain); set with tls_key_file to enable TLS.",
    )
    tls_key_file: Path | None = Field(default=None, description="PEM private key of tls_cert_file.")
    tls_client_ca_file: Path | None = Field(
        default=None,
        description="PEM CA bundle; when set, clients must present a certificate it signed "
        "(mutual TLS). Needs tls_cert_file.",
    )

    @model_validator(mode="after")
    def _check_tls(self) -> ServerSettings:
        if (self.tls_cert_file is None) != (self.tls_key_file is None):
            raise ValueError(
                "set both server.tls_cert_file and server.tls_key_file for TLS, or neither"
            )
        if self.tls_client_ca_file is not None and self.tls_cert_file is None:
            raise ValueError(
                "server.tls_client_ca_file (mutual TLS) needs server.tls_cert_file and "
                "server.tls_key_file"
            )
        return self


@dataclass(frozen=True)
class ServiceBinding:
    """One proto service to serve.

    Attributes:
        name: full proto service name, e.g. ``"grpo.v1.Verifier"`` (health and reflection key).
        add_to_server: the generated ``add_<Service>Servicer_to_server`` function.
        servicer: the servicer instance passed to ``add_to_server``.
    """

    name: str
    add_to_server: Callable[[Any, grpc.Server], None]
    servicer: Any


def remaining_s(context: grpc.ServicerContext) -> float | None:
    """Seconds left before the caller's deadline, or None when the caller set no deadline.

    Returns 0.0 once the deadline has passed. Servicers pass this on as the time limit of
    their work (and of calls they make downstream).
    """
    left = context.time_remaining()
    if left is None or left > _NO_DEADLINE_S:
        return None
    return max(0.0, float(left))


def _split_method(full_method: str) -> tuple[str, str]:
    # "/grpo.v1.Verifier/Score" -> ("grpo.v1.Verifier", "Score")
    _, _, rest = full_method.partition("/")
    service, _, method = rest.partition("/")
    return service or "unknown", method or "unknown"


def _context_code(context: grpc.ServicerContext) -> grpc.StatusCode | None:
    code = context.code()  # type: ignore[attr-defined]
    return code if isinstance(code, grpc.StatusCode) else None


# Services that keep answering during a drain (so probes see NOT_SERVING) and whose calls do
# not hold a drain open (health Watch streams never end on their own).
_CONTROL_SERVICES = frozenset({health.SERVICE_NAME, reflection.SERVICE_NAME})


class _Drain:
    """Counts in-flight work calls and refuses new ones once draining started."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._in_flight = 0
        self.draining = False

    def enter(self) -> bool:
        with self._cond:
            if self.draining:
                return False
            self._in_flight += 1
            return True

    def leave(self) -> None:
        with self._cond:
            self._in_flight -= 1
            self._cond.notify_all()

    def start_and_wait(self, timeout_s: float) -> int:
        """Refuse new calls; wait up to ``timeout_s`` for in-flight ones; return those left."""
        with self._cond:
            self.draining = True
            self._cond.wait_for(lambda: self._in_flight == 0, timeout=timeout_s)
            return self._in_flight


class _RpcGuard:
    """Drain admission, error mapping and metrics around one handler call.

    This is the only place an exception becomes a gRPC status.
    """

    def __init__(self, service: str, method: str, drain: _Drain) -> None:
        self.service = service
        self.method = method
        self.drain = None if service in _CONTROL_SERVICES else drain

    def admit(self, context: grpc.ServicerContext) -> None:
        if self.drain is not None and not self.drain.enter():
            context.abort(grpc.StatusCode.UNAVAILABLE, "server is draining; retry another replica")

    def fail(self, exc: Exception, context: grpc.ServicerContext) -> None:
        """Abort the RPC with the status for ``exc`` (always raises)."""
        already = _context_code(context)
        if already is not None and already != grpc.StatusCode.OK:
            # The servicer called context.abort() itself: keep its status.
            raise exc
        code = grpc_status_for(exc)
        if isinstance(exc, GrpoError):
            log.warning(
                "rpc failed",
                extra={
                    "rpc": f"{self.service}/{self.method}",
                    "code": code.name,
                    "error": str(exc),
                },
            )
            details = str(exc) or type(exc).__name__
        else:
            log.exception(
                "rpc raised an unexpected exception",
                extra={"rpc": f"{self.service}/{self.method}"},
            )
            details = f"internal error: {type(exc).__name__}: {exc}"
        context.abort(code, details)

    def record(self, context: grpc.ServicerContext, started: float) -> None:
        code = _context_code(context) or grpc.StatusCode.OK
        RPC_REQUESTS.labels(self.service, self.method, code.name).inc()
        RPC_LATENCY.labels(self.service, self.method).observe(time.perf_counter() - started)
        RPC_IN_FLIGHT.labels(self.service, self.method).dec()
        if self.drain is not None:
            self.drain.leave()

    def unary(self, behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def handler(request: Any, context: grpc.ServicerContext) -> Any:
            self.admit(context)
            started = time.perf_counter()
            RPC_IN_FLIGHT.labels(self.service, self.method).inc()
            try:
                return behavior(request, context)
            except Exception as exc:
                self.fail(exc, context)
            finally:
                self.record(context, started)

        return handler

    def streaming(self, behavior: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
        def handler(request: Any, context: grpc.ServicerContext) -> Iterator[Any]:
            self.admit(context)
            started = time.perf_counter()
            RPC_IN_FLIGHT.labels(self.service, self.method).inc()
            try:
                yield from behavior(request, context)
            except Exception as exc:
                self.fail(exc, context)
            finally:
                self.record(context, started)

        return handler


class _GuardInterceptor(grpc.ServerInterceptor):
    def __init__(self, drain: _Drain) -> None:
        self._drain = drain

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        service, method = _split_method(handler_call_details.method)  # type: ignore[attr-defined]
        guard = _RpcGuard(service, method, self._drain)
        codec: dict[str, Any] = {
            "request_deserializer": handler.request_deserializer,
            "response_serializer": handler.response_serializer,
        }
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(guard.unary(handler.unary_unary), **codec)
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                guard.streaming(handler.unary_stream), **codec
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(guard.unary(handler.stream_unary), **codec)
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                guard.streaming(handler.stream_stream), **codec
            )
        return handler


class GrpoServer:
    """A bound (not yet started) gRPC server with health, reflection and metrics.

    Use ``start()``, then ``wait()`` to block, and ``stop()`` to drain. Also a context manager
    (start on enter, stop on exit) for tests.
    """

    def __init__(
        self,
        server: grpc.Server,
        health_servicer: health.HealthServicer,
        service_names: Sequence[str],
        port: int,
        settings: ServerSettings,
        drain: _Drain,
    ) -> None:
        self._drain = drain
        self._server = server
        self._health = health_servicer
        self._service_names = list(service_names)
        self._port = port
        self._settings = settings
        self._metrics_port = -1
        self._stop_metrics: Callable[[], None] | None = None
        self._stopped = False

    @property
    def port(self) -> int:
        """The bound gRPC port (the real one when settings asked for 0)."""
        return self._port

    @property
    def metrics_port(self) -> int:
        """The bound Prometheus HTTP port after ``start()``; -1 when disabled or not started."""
        return self._metrics_port

    @property
    def address(self) -> str:
        """``host:port`` a client on this machine can dial."""
        host = self._settings.host
        if host in ("0.0.0.0", "[::]", "::", ""):
            host = "127.0.0.1"
        return f"{host}:{self._port}"

    def start(self, serving: bool = True) -> None:
        """Start the metrics endpoint and the gRPC server, then report SERVING (or keep
        NOT_SERVING when ``serving`` is false: a service whose readiness is not known yet).

        Raises:
            OSError: the metrics port cannot be bound.
        """
        if self._settings.metrics_port >= 0:
            http_host = self._settings.host.strip("[]")  # "[::]" is gRPC syntax for "::"
            self._metrics_port, self._stop_metrics = start_metrics_server(
                http_host, self._settings.metrics_port
            )
        self._server.start()
        self.set_serving(serving)
        log.info(
            "server started",
            extra={
                "services": self._service_names,
                "port": self._port,
                "metrics_port": self._metrics_port,
            },
        )

    def set_serving(self, serving: bool) -> None:
        """Set the health status of every bound service and of the server (``""``)."""
        status = (
            health_pb2.HealthCheckResponse.SERVING
            if serving
            else health_pb2.HealthCheckResponse.NOT_SERVING
        )
        for name in ["", *self._service_names]:
            self._health.set(name, status)

    def stop(self, grace_s: float | None = None) -> None:
        """Drain and stop: NOT_SERVING, wait ``drain_delay_s``, refuse new work calls with
        UNAVAILABLE ("server is draining"), let in-flight calls finish for up to ``grace_s``
        seconds (default ``settings.grace_s``), then stop the server and cancel what is left.
        Health and reflection keep answering until the server stops.

        Blocks until the server has stopped. Calling it again does nothing.
        """
        if self._stopped:
            return
        self._stopped = True
        grace = self._settings.grace_s if grace_s is None else grace_s
        self.set_serving(False)
        if self._settings.drain_delay_s > 0:
            time.sleep(self._settings.drain_delay_s)
        log.info("draining", extra={"grace_s": grace})
        started = time.monotonic()
        left = self._drain.start_and_wait(grace)
        if left:
            log.warning("grace period over; cancelling calls", extra={"in_flight": left})
        self._server.stop(max(0.0, grace - (time.monotonic() - started))).wait()
        self._health.enter_graceful_shutdown()
        if self._stop_metrics is not None:
            self._stop_metrics()
            self._stop_metrics = None
        log.info("server stopped")

    def wait(self, timeout_s: float | None = None) -> bool:
        """Block until the server stops (or ``timeout_s`` seconds pass); True if it stopped."""
        # grpc returns True when the wait timed out.
        return not self._server.wait_for_termination(timeout_s)

    def __enter__(self) -> GrpoServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop(0.0)


def _server_credentials(settings: ServerSettings) -> grpc.ServerCredentials:
    assert settings.tls_cert_file is not None and settings.tls_key_file is not None
    cert = settings.tls_cert_file.read_bytes()
    key = settings.tls_key_file.read_bytes()
    client_ca = settings.tls_client_ca_file.read_bytes() if settings.tls_client_ca_file else None
    return grpc.ssl_server_credentials(
        [(key, cert)], root_certificates=client_ca, require_client_auth=client_ca is not None
    )


def create_server(
    bindings: Sequence[ServiceBinding], settings: ServerSettings | None = None
) -> GrpoServer:
    """Build a gRPC server for ``bindings`` and bind its port; call ``.start()`` to serve.

    Args:
        bindings: the services to serve; names must be unique. Empty is allowed (a
            worker-only process still serves health, reflection and metrics).
        settings: network/limits/TLS settings; defaults to ``ServerSettings()``.

    Returns:
        The bound ``GrpoServer``; ``.port`` is the real port even when ``settings.port`` is 0.

    Raises:
        ValueError: a service name appears twice.
        OSError: a TLS file cannot be read.
        RuntimeError: grpc could not bind ``host:port``.
    """
    settings = settings or ServerSettings()
    names = [b.name for b in bindings]
    if len(set(names)) != len(names):
        raise ValueError(f"duplicate service names in bindings: {names}")
    options = [
        ("grpc.max_receive_message_length", settings.max_message_bytes),
        ("grpc.max_send_message_length", settings.max_message_bytes),
        ("grpc.so_reuseport", 0),
    ]
    drain = _Drain()
    server = grpc.server(
        futures.ThreadPoolExecutor(
            max_workers=settings.max_workers, thread_name_prefix="grpc-handler"
        ),
        interceptors=[_GuardInterceptor(drain)],
        options=options,
    )
    for binding in bindings:
        binding.add_to_server(binding.servicer, server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    reflection.enable_server_reflection(
        [*names, health.SERVICE_NAME, reflection.SERVICE_NAME], server
    )
    for name in ["", *names]:
        health_servicer.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
    target = f"{settings.host}:{settings.port}"
    if settings.tls_cert_file is not None:
        port = server.add_secure_port(target, _server_credentials(settings))
    else:
        port = server.add_insecure_port(target)
    return GrpoServer(server, health_servicer, names, port, settings, drain)
