"""Prometheus metrics shared by every gRPC service, and the HTTP endpoint that exposes them.

Per-RPC metrics (recorded by the server interceptor in ``grpo.services.runtime.server``):

- ``grpo_rpc_requests_total{service, method, code}``: finished RPCs by gRPC status code name.
- ``grpo_rpc_latency_seconds{service, method}``: handler wall time in seconds.
- ``grpo_rpc_in_flight{service, method}``: RPCs currently being handled.

Verifier calls as their client sees them (``grpo.services.runtime.verifier_client``: the
assembler, per verifier address, external endpoints included):

- ``grpo_verifier_client_calls_total{address, code}``: attempts by gRPC status code name.
- ``grpo_verifier_client_latency_seconds{address}``: wall time of each attempt in seconds.
- ``grpo_verifier_client_scores_total{address, status}``: scores received by ScoreStatus name.

Services define their own domain metrics with ``prometheus_client`` on the default registry;
the endpoint started by ``start_metrics_server`` serves all of them.
"""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import Counter, Gauge, Histogram, start_http_server

__all__ = [
    "RPC_IN_FLIGHT",
    "RPC_LATENCY",
    "RPC_REQUESTS",
    "VERIFIER_CLIENT_CALLS",
    "VERIFIER_CLIENT_LATENCY",
    "VERIFIER_CLIENT_SCORES",
    "start_metrics_server",
]

RPC_REQUESTS = Counter(
    "grpo_rpc_requests",
    "Finished gRPC calls by service, method and status code name.",
    ["service", "method", "code"],
)
RPC_LATENCY = Histogram(
    "grpo_rpc_latency_seconds",
    "gRPC handler wall time in seconds.",
    ["service", "method"],
    buckets=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 120.0),
)
RPC_IN_FLIGHT = Gauge(
    "grpo_rpc_in_flight",
    "gRPC calls currently being handled.",
    ["service", "method"],
)

VERIFIER_CLIENT_CALLS = Counter(
    "grpo_verifier_client_calls",
    "Verifier call attempts by address and gRPC status code name, as the caller sees them.",
    ["address", "code"],
)
VERIFIER_CLIENT_LATENCY = Histogram(
    "grpo_verifier_client_latency_seconds",
    "Wall time of each verifier call attempt in seconds, by address, as the caller sees it.",
    ["address"],
    buckets=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 120.0),
)
VERIFIER_CLIENT_SCORES = Counter(
    "grpo_verifier_client_scores",
    "Scores received from verifiers by address and ScoreStatus name.",
    ["address", "status"],
)


def start_metrics_server(host: str, port: int) -> tuple[int, Callable[[], None]]:
    """Serve the default Prometheus registry over HTTP at ``http://host:port/metrics``.

    Args:
        host: address to bind (e.g. ``127.0.0.1`` or ``0.0.0.0``).
        port: TCP port; 0 picks a free one.

    Returns:
        The bound port and a function that stops the HTTP server.

    Raises:
        OSError: the port cannot be bound.
    """
    httpd, thread = start_http_server(port, addr=host)

    def stop() -> None:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)

    return int(httpd.server_port), stop
