"""Every registered service, started with `grpo serve NAME --port 0` as its own process:
health SERVING, reflection lists its service, the metrics endpoint answers, SIGTERM -> exit 0.

The selected services start at once (one module fixture) so the interpreter/import start-up is
paid in parallel. The torch services (generation, rollout-worker, learner: ~10 s of imports
each on 2 busy cores) are marked slow and run with `make soak`; their own service tests cover
them in-process in `make test`. Settings come from GRPO_* environment variables shared by all
of them (a variable that names no field of a service's settings is ignored by `load_settings`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from helpers import wait_for_port_file

from grpo.services.runtime.registry import SERVICES

REPO = Path(__file__).resolve().parents[2]

# The proto service each CLI name serves (None: health/reflection/metrics only).
EXPECTED = {
    "verifier-math": "grpo.v1.Verifier",
    "verifier-steps": "grpo.v1.Verifier",
    "verifier-code": "grpo.v1.Verifier",
    "generation": "grpo.v1.Generation",
    "rollout-worker": None,
    "assembler": "grpo.v1.Assembler",
    "learner": "grpo.v1.Learner",
}
TORCH_SERVICES = {"generation", "rollout-worker", "learner"}
PARAMS = [
    pytest.param(n, marks=pytest.mark.slow) if n in TORCH_SERVICES else pytest.param(n)
    for n in sorted(SERVICES)  # every registered service: a missing module fails, never skips
]


@dataclass
class Running:
    proc: subprocess.Popen[bytes]
    port: int
    metrics_port: int
    log: Path


def _selected(request: pytest.FixtureRequest) -> list[str]:
    """Service names whose tests in this module were selected (e.g. not deselected by -m)."""
    names = {
        item.callspec.params["name"]
        for item in request.session.items
        if getattr(item, "module", None) is request.module and hasattr(item, "callspec")
    }
    return [n for n in sorted(SERVICES) if n in names]


@pytest.fixture(scope="module")
def services(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory, redis_url: str
) -> Iterator[dict[str, Running]]:
    selected = _selected(request)
    root = tmp_path_factory.mktemp("services")
    os.environ["PYTEST_SERVICES_ROOT"] = str(root)
    tiny_model = root / "tiny"
    if TORCH_SERVICES & set(selected):
        from grpo.model import init_tiny_model

        tiny_model = Path(init_tiny_model(tiny_model, seed=0))
    namespace = f"t:skeletons:{os.getpid()}"
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "HF_HUB_OFFLINE": "1",
        "GRPO_SERVER__METRICS_PORT": "0",
        "GRPO_SERVER__GRACE_S": "5",
        "GRPO_REDIS_URL": redis_url,
        "GRPO_NAMESPACE": namespace,
        "GRPO_WORKER__NAMESPACE": namespace,
        "GRPO_MODEL_PATH": str(tiny_model),
        "GRPO_BACKEND__MODEL_PATH": str(tiny_model),
        "GRPO_CHECKPOINT_DIR": str(root / "ckpt"),
        "GRPO_RUN_DIR": str(root / "run"),
        # the run driver: its run (tasks, streams) and the addresses it would call (nothing
        # listens there: it serves health while it waits for the learner's version 0)
        "GRPO_RUN": json.dumps(
            {"namespace": namespace, "redis_url": redis_url, "data": {"train_size": 8}}
        ),
        "GRPO_LEARNER_ADDRESS": "127.0.0.1:9",
        "GRPO_ASSEMBLER_ADDRESS": "127.0.0.1:9",
        "GRPO_OUT_DIR": str(root / "driver"),
    }
    # The driver's stop lets the evaluation in hand finish and writes the summary: on 2 busy
    # cores its evaluation of the SFT policy alone took 4.5 s, so 5 s of grace failed it.
    grace = {"driver": "60"}
    started: dict[str, tuple[subprocess.Popen[bytes], Path, Path]] = {}
    for name in selected:
        port_file, log = root / f"{name}.json", root / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [sys.executable, "-m", "grpo.cli", "serve", name, "--port", "0",
                 "--port-file", str(port_file)],
                env={**env, "GRPO_SERVER__GRACE_S": grace.get(name, "5")}, cwd=REPO,
                stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip
        started[name] = (proc, port_file, log)
    running: dict[str, Running] = {}
    deadline = time.monotonic() + 240
    try:
        for name, (proc, port_file, log) in started.items():
            try:
                info = wait_for_port_file(
                    port_file, proc, timeout_s=max(1.0, deadline - time.monotonic())
                )
            except AssertionError:
                info = None  # hung: its tests fail with its log (_get)
            if info is not None:
                running[name] = Running(proc, info["port"], info["metrics_port"], log)
        yield running
    finally:
        for proc, _, _ in started.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc, _, _ in started.values():
            try:
                proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def _get(services: dict[str, Running], name: str) -> Running:
    if name not in services:
        log = Path(os.environ.get("PYTEST_SERVICES_ROOT", "")) / f"{name}.log"
        text = log.read_text()[-3000:] if log.is_file() else "(no log)"
        pytest.fail(f"{name} did not start; its log:\n{text}")
    return services[name]


@pytest.mark.parametrize("name", PARAMS)
def test_service_serves_health_reflection_and_metrics(services, name):
    svc = _get(services, name)
    with grpc.insecure_channel(f"127.0.0.1:{svc.port}") as ch:
        health = health_pb2_grpc.HealthStub(ch)
        expected = EXPECTED.get(name)
        for service in ["", *([expected] if expected else [])]:
            reply = health.Check(health_pb2.HealthCheckRequest(service=service), timeout=10)
            assert reply.status == health_pb2.HealthCheckResponse.SERVING, service
        replies = reflection_pb2_grpc.ServerReflectionStub(ch).ServerReflectionInfo(
            iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=10
        )
        listed = {s.name for r in replies for s in r.list_services_response.service}
        assert "grpc.health.v1.Health" in listed
        if expected:
            assert expected in listed
    url = f"http://127.0.0.1:{svc.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        assert b"grpo_rpc_requests_total" in response.read()


@pytest.mark.parametrize("name", PARAMS)
def test_service_exits_zero_on_sigterm(services, name):
    svc = _get(services, name)
    svc.proc.send_signal(signal.SIGTERM)
    code = svc.proc.wait(timeout=60)
    assert code == 0, svc.log.read_text()[-3000:]
    assert '"msg": "service stopped"' in svc.log.read_text()
