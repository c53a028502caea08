"""Kubernetes discovery: label/annotation -> route logic on the client's own model objects, and
the list+watch loop driven through the real ``kubernetes`` client against a fake API server
on loopback (no live cluster was available)."""

from __future__ import annotations

import json
import queue
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
from helpers import wait_until
from kubernetes import client
from kubernetes.client import V1ObjectMeta, V1Service, V1ServicePort, V1ServiceSpec

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.services.runtime.discovery import (
    DiscoverySettings,
    KubernetesDiscovery,
    discovery_worker,
    routes_from_services,
    verifier_from_service,
)
from grpo.services.runtime.routing import Route, RoutingTable


def service(
    name: str,
    task_types: str | None = "math,arith",
    kind: str | None = "outcome",
    *,
    namespace: str = "grpo",
    port_name: str = "grpc",
    port: int = 50051,
) -> V1Service:
    annotations = {}
    if task_types is not None:
        annotations["grpo.dev/task-types"] = task_types
    if kind is not None:
        annotations["grpo.dev/verifier-kind"] = kind
    return V1Service(
        api_version="v1",
        kind="Service",
        metadata=V1ObjectMeta(
            name=name,
            namespace=namespace,
            labels={"grpo.dev/verifier": "true"},
            annotations=annotations,
            resource_version="1",
        ),
        spec=V1ServiceSpec(
            ports=[
                V1ServicePort(name="metrics", port=9090),
                V1ServicePort(name=port_name, port=port, target_port="grpc"),
            ]
        ),
    )


def test_headless_service_gets_a_round_robin_dns_target() -> None:
    svc = service("verifier-math")
    svc.spec.cluster_ip = "None"
    assert verifier_from_service(svc).address == "dns:///verifier-math.grpo.svc:50051"
    svc.spec.cluster_ip = "10.0.0.7"
    assert verifier_from_service(svc).address == "verifier-math.grpo.svc:50051"


def test_service_to_verifier() -> None:
    found = verifier_from_service(service("verifier-math", " math, arith ,math ", "outcome"))
    assert found.service == "grpo/verifier-math"
    assert found.address == "verifier-math.grpo.svc:50051"
    assert found.kind == "outcome"
    assert found.task_types == ("math", "arith")
    steps = verifier_from_service(
        service("steps", "math", "Process", port=6000), cluster_domain="cluster.local"
    )
    assert (steps.kind, steps.address) == ("process", "steps.grpo.svc.cluster.local:6000")
    assert verifier_from_service(service("plain", "code", None)).kind == "outcome"


@pytest.mark.parametrize(
    ("svc", "message"),
    [
        (service("a", None), r"grpo/a: annotation grpo.dev/task-types is missing"),
        (service("a", " , "), r"grpo.dev/task-types is missing or empty"),
        (service("a", "math,bad type"), r"grpo.dev/task-types: task type 'bad type'"),
        (service("a", "math", "judge"), r"grpo.dev/verifier-kind='judge'"),
        (service("a", "math", port_name="http"), r"no port named 'grpc'"),
    ],
)
def test_bad_service_is_named(svc: V1Service, message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        verifier_from_service(svc)


def test_routes_from_services_groups_by_task_and_kind_and_skips_bad() -> None:
    result = routes_from_services(
        [
            service("math-b", "math,arith"),
            service("steps", "math", "process"),
            service("math-a", "math"),
            service("broken", "math", "judge"),
            service("code", "code", port=50052),
        ]
    )
    assert result.routes == {
        "arith": Route(outcome=("math-b.grpo.svc:50051",)),
        "code": Route(outcome=("code.grpo.svc:50052",)),
        "math": Route(
            outcome=("math-a.grpo.svc:50051", "math-b.grpo.svc:50051"),
            process=("steps.grpo.svc:50051",),
        ),
    }
    assert list(result.skipped) == ["grpo/broken"]
    assert [v.service for v in result.verifiers] == [
        "grpo/code",
        "grpo/math-a",
        "grpo/math-b",
        "grpo/steps",
    ]
    assert routes_from_services([]).routes == {}


def test_discovery_worker_is_off_by_default_and_fails_fast_without_a_cluster(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    table = RoutingTable.from_config({"math": "m:1"})
    assert discovery_worker(table, DiscoverySettings()) is None
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "missing"))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(FailedPreconditionError, match=r"discovery\.enabled=false"):
        discovery_worker(table, DiscoverySettings(enabled=True))


def test_settings_validation() -> None:
    with pytest.raises(ValueError, match="watch_timeout_s"):
        DiscoverySettings(watch_timeout_s=0)
    assert DiscoverySettings(namespace="x").resolved_namespace() == "x"
    assert DiscoverySettings().label_selector == "grpo.dev/verifier=true"


class FakeKubeApi:
    """The two endpoints discovery uses: list and watch of namespaced Services."""

    def __init__(self) -> None:
        self.services: dict[str, dict[str, Any]] = {}
        self.events: queue.Queue[dict[str, Any]] = queue.Queue()
        self.list_calls = 0
        self.watch_calls: list[dict[str, list[str]]] = []
        self.version = 1
        self.fail_lists = 0  # answer this many list calls with HTTP 500
        self.lock = threading.Lock()

    def put(self, event_type: str, svc: V1Service) -> None:
        """Change the state and queue the matching watch event."""
        meta = svc.metadata
        assert meta is not None and meta.name
        with self.lock:
            self.version += 1
            meta.resource_version = str(self.version)
            raw = client.ApiClient().sanitize_for_serialization(svc)
            if event_type == "DELETED":
                self.services.pop(meta.name, None)
            else:
                self.services[meta.name] = raw
        self.events.put({"type": event_type, "object": raw})

    def handler(self) -> type[BaseHTTPRequestHandler]:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.0"

            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                url = urlparse(self.path)
                query = parse_qs(url.query)
                assert url.path == "/api/v1/namespaces/grpo/services", url.path
                assert query["labelSelector"] == ["grpo.dev/verifier=true"]
                if query.get("watch") != ["true"] and api.fail_lists > 0:
                    api.fail_lists -= 1
                    self.send_response(500)
                    self.end_headers()
                    return
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                if query.get("watch") != ["true"]:
                    with api.lock:
                        api.list_calls += 1
                        body = {
                            "apiVersion": "v1",
                            "kind": "ServiceList",
                            "metadata": {"resourceVersion": str(api.version)},
                            "items": list(api.services.values()),
                        }
                    self.wfile.write(json.dumps(body).encode())
                    return
                api.watch_calls.append(query)
                # Stream queued events; end the watch (expiry) after 0.3 s without events.
                while True:
                    try:
                        event = api.events.get(timeout=0.3)
                    except queue.Empty:
                        return
                    self.wfile.write(json.dumps(event).encode() + b"\n")
                    self.wfile.flush()

        return Handler


@pytest.fixture
def fake_api() -> Iterator[tuple[FakeKubeApi, Any]]:
    api = FakeKubeApi()
    server = ThreadingHTTPServer(("127.0.0.1", 0), api.handler())
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    config = client.Configuration(host=f"http://127.0.0.1:{server.server_address[1]}")
    core = client.CoreV1Api(client.ApiClient(config))
    yield api, core
    server.shutdown()
    server.server_close()


def test_discovery_routes_new_verifier_without_restart(fake_api: tuple[FakeKubeApi, Any]) -> None:
    api, core = fake_api
    api.put("ADDED", service("verifier-math", "math,arith"))
    api.events = queue.Queue()  # already in the initial list, not a watch event
    table = RoutingTable.from_config(
        {"math": {"outcome": ["static-math:1"], "process": ["static-steps:1"]}, "code": "c:1"}
    )
    worker = KubernetesDiscovery(
        table,
        DiscoverySettings(namespace="grpo", watch_timeout_s=5, retry_backoff_s=0.05),
        api=core,
    )
    worker.start()
    try:
        assert table.wait_for_version(1, 10.0)
        # discovered outcome verifier overrides static outcome; static process route kept.
        assert table.lookup("math") == Route(
            outcome=("verifier-math.grpo.svc:50051",), process=("static-steps:1",)
        )
        assert table.lookup("arith").outcome == ("verifier-math.grpo.svc:50051",)
        assert table.lookup("code").outcome == ("c:1",)

        api.put("ADDED", service("verifier-poetry", "poetry"))
        wait_until(lambda: "poetry" in table.task_types())
        assert table.lookup("poetry").outcome == ("verifier-poetry.grpo.svc:50051",)

        api.put("MODIFIED", service("verifier-poetry", "poetry,haiku"))
        wait_until(lambda: "haiku" in table.task_types())

        api.put("DELETED", service("verifier-math", "math,arith"))
        wait_until(lambda: "arith" not in table.task_types())
        assert table.lookup("math").outcome == ("static-math:1",)  # static default is back

        # The watch expires every 0.3 s without events: discovery re-lists, state survives.
        wait_until(lambda: api.list_calls >= 3)
        assert table.lookup("haiku").outcome == ("verifier-poetry.grpo.svc:50051",)
        assert all(q["timeoutSeconds"] == ["5"] for q in api.watch_calls)
        assert api.watch_calls[-1].get("resourceVersion") is not None
    finally:
        worker.stop(5.0)


def test_discovery_relists_after_gone_and_survives_api_errors(
    fake_api: tuple[FakeKubeApi, Any],
) -> None:
    api, core = fake_api
    table = RoutingTable()
    worker = KubernetesDiscovery(
        table, DiscoverySettings(namespace="grpo", retry_backoff_s=0.05), api=core
    )
    api.fail_lists = 2  # the API server is down at first: retry with backoff
    api.events.put(
        {
            "type": "ERROR",
            "object": {"kind": "Status", "code": 410, "reason": "Expired", "message": "old"},
        }
    )
    worker.start()
    try:
        assert table.wait_for_version(1, 10.0)
        assert api.fail_lists == 0
        wait_until(lambda: api.list_calls >= 2)  # 410 -> immediate re-list
        api.put("ADDED", service("verifier-code", "code", port=50052))
        wait_until(lambda: "code" in table.task_types())
        assert worker.last_result.skipped == {}
    finally:
        worker.stop(5.0)
