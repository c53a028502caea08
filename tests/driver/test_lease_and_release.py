"""The run driver's lease (at most one driver drives a run) against a real Redis, and its
release of the GPU workloads through the official Kubernetes client against an HTTPS API
server stand-in that enforces the rendered RBAC (tests/fake_kube.py)."""

from __future__ import annotations

import json
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from fake_kube import FakeKubeApi
from helpers import wait_until

from grpo.errors import FailedPreconditionError, UnavailableError
from grpo.services.driver.lease import DriverLease, process_start_ticks
from grpo.services.driver.release import ReleaseSettings, WorkloadRef, release_workloads
from grpo.services.runtime.streams import StreamNames


def lease(client: Any, namespace: str, ttl_s: float = 2.0) -> DriverLease:
    return DriverLease(client, StreamNames(namespace), ttl_s=ttl_s)


def test_a_second_driver_waits_until_the_first_releases(
    redis_client: Any, redis_namespace: str
) -> None:
    first, second = lease(redis_client, redis_namespace), lease(redis_client, redis_namespace)
    stop = threading.Event()
    assert first.acquire(stop)
    first.keep(on_lost=lambda: None)
    said: list[str] = []
    got = threading.Event()
    waiter = threading.Thread(target=lambda: got.set() if second.acquire(stop, said.append) else 0)
    waiter.start()
    wait_until(lambda: said, timeout_s=10)
    assert "held by" in said[0] and not got.is_set()
    # renewed past its time to live: still held
    threading.Event().wait(2.5)
    assert not got.is_set() and first.holder() == first.token
    first.release()
    assert got.wait(10) and second.holder() == second.token
    second.release()
    waiter.join(5)
    assert redis_client.get(first.key) is None


def test_a_dead_holder_on_this_host_is_taken_over_at_once(
    redis_client: Any, redis_namespace: str
) -> None:
    """A driver killed without releasing (SIGKILL, a container restart) does not make its
    successor on the same host wait out the time to live."""
    mine = lease(redis_client, redis_namespace, ttl_s=600)
    dead = json.dumps(
        {"host": socket.gethostname(), "pid": 2**22 + 7, "start": 1, "id": "gone"}, sort_keys=True
    )
    redis_client.set(mine.key, dead, px=600_000)
    assert process_start_ticks(2**22 + 7) is None
    assert mine.acquire(threading.Event()) and mine.holder() == mine.token
    # a live holder elsewhere is waited for (until stop)
    other = json.dumps({"host": "another-node", "pid": 1, "start": 5, "id": "x"}, sort_keys=True)
    redis_client.set(mine.key, other, px=600_000)
    stop = threading.Event()
    stop.set()
    assert lease(redis_client, redis_namespace).acquire(stop) is False


def test_a_holder_that_finds_another_token_has_lost_the_lease(
    redis_client: Any, redis_namespace: str
) -> None:
    mine = lease(redis_client, redis_namespace, ttl_s=1.0)
    assert mine.acquire(threading.Event())
    lost = threading.Event()
    mine.keep(on_lost=lost.set)
    redis_client.set(mine.key, "someone-else")
    assert lost.wait(10) and mine.lost.is_set()
    mine.release()
    assert redis_client.get(mine.key) == b"someone-else"  # never freed another's lease


ROLE = {
    "kind": "Role",
    "metadata": {"name": "rl-driver"},
    "rules": [
        {
            "apiGroups": ["apps"],
            "resources": ["deployments/scale"],
            "resourceNames": ["rl-rollout-worker"],
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": ["apps"],
            "resources": ["statefulsets/scale"],
            "resourceNames": ["rl-learner"],
            "verbs": ["get", "patch"],
        },
    ],
}
BINDING = {
    "kind": "RoleBinding",
    "metadata": {"name": "rl-driver"},
    "roleRef": {"kind": "Role", "name": "rl-driver"},
    "subjects": [{"kind": "ServiceAccount", "name": "rl-driver", "namespace": "ml"}],
}


def workload(kind: str, name: str) -> dict[str, Any]:
    return {"kind": kind, "metadata": {"name": name}, "spec": {"replicas": 2}}


@pytest.fixture
def api(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    objects = [
        ROLE,
        BINDING,
        workload("Deployment", "rl-rollout-worker"),
        workload("StatefulSet", "rl-learner"),
        workload("Deployment", "rl-assembler"),
    ]
    scaled: list[tuple[str, str, int]] = []
    server = FakeKubeApi(objects, "ml", on_scale=lambda *a: scaled.append(a))
    host, port = server.start(tmp_path / "api")
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", host)
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", str(port))
    yield server, scaled
    server.stop()


def test_release_scales_exactly_the_allowed_workloads_to_zero(tmp_path: Path, api: Any) -> None:
    server, scaled = api
    folder = server.service_account_dir(tmp_path / "sa", "rl-driver")
    settings = ReleaseSettings(
        workloads=[
            WorkloadRef(kind="Deployment", name="rl-rollout-worker"),
            WorkloadRef(kind="StatefulSet", name="rl-learner"),
        ],
        service_account_dir=folder,
    )
    assert release_workloads(settings) == ["Deployment/rl-rollout-worker", "StatefulSet/rl-learner"]
    assert scaled == [("Deployment", "rl-rollout-worker", 0), ("StatefulSet", "rl-learner", 0)]
    assert server.replicas[("Deployment", "rl-assembler")] == 2
    assert {r.account for r in server.requests} == {"rl-driver"}
    # the Role allows nothing else: a workload it does not name is refused at once (403)
    other = settings.model_copy(
        update={"workloads": [WorkloadRef(kind="Deployment", name="rl-assembler")]}
    )
    with pytest.raises(UnavailableError, match="rl-assembler"):
        release_workloads(other, sleep=0.01)
    assert server.requests[-1].status == 403 and len(server.requests) == 3
    # another account's token (not bound to the Role) is refused as well
    stranger = server.service_account_dir(tmp_path / "sa2", "rl-grpo-pipeline")
    with pytest.raises(UnavailableError, match=r"Forbidden|403"):
        release_workloads(settings.model_copy(update={"service_account_dir": stranger}))
    assert release_workloads(ReleaseSettings()) == []  # grpo run: nothing to release


def test_release_without_credentials_says_what_is_missing(tmp_path: Path, api: Any) -> None:
    settings = ReleaseSettings(
        workloads=[WorkloadRef(kind="Deployment", name="rl-rollout-worker")],
        service_account_dir=tmp_path / "nothing-mounted",
    )
    with pytest.raises(FailedPreconditionError, match="automountServiceAccountToken"):
        release_workloads(settings)
