"""Readiness that tells the truth: ``verifier-code`` reports SERVING only after its self-test
(one passing, one failing candidate) was judged right in the configured sandbox; a sandbox
that cannot start keeps it NOT_SERVING, with the reason in its log and in ``Describe``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import wait_for_port_file

from grpo.services.runtime.registry import _ReadinessGate
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
from grpo.verifiers.code.sandbox import RunResult
from grpo.verifiers.sdk.base import Verifier
from grpo.verifiers.sdk.service import SelfTestWorker

from .conftest import need_sandbox

_SERVING = health_pb2.HealthCheckResponse.SERVING
_NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING


def _serve(tmp_path: Path, **env: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """Start ``grpo serve verifier-code`` (text log to a file); return it, its port, its log."""
    port_file = tmp_path / "port.json"
    log = tmp_path / "serve.log"
    grpo = Path(sys.executable).parent / "grpo"
    command = [str(grpo), "serve", "verifier-code", "--port", "0", "--metrics-port", "-1"]
    command += ["--port-file", str(port_file), "--log-text"]
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            command,
            env={**os.environ, "GRPO_VERIFIER__SANDBOX__SLOTS": "1", **env},
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    info = wait_for_port_file(port_file, proc, timeout_s=60)
    assert info is not None, f"grpo serve exited with {proc.returncode}: {log.read_text()}"
    return proc, int(info["port"]), log


def _health(port: int) -> int:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = health_pb2_grpc.HealthStub(channel)
        return stub.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status


def _describe(port: int) -> dict[str, str]:
    with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = verifier_pb2_grpc.VerifierStub(channel)
        return dict(stub.Describe(verifier_pb2.VerifierDescribeRequest(), timeout=5).config)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0


def test_a_sandbox_that_cannot_start_keeps_the_service_not_serving(tmp_path: Path) -> None:
    need_sandbox()
    proc, port, log = _serve(tmp_path, GRPO_VERIFIER__SANDBOX__BWRAP_PATH="/bin/false")
    try:
        gate_line = "service not ready, health NOT_SERVING: sandbox self-test"
        deadline = time.monotonic() + 60
        while gate_line not in log.read_text() and time.monotonic() < deadline:
            assert _health(port) == _NOT_SERVING
            time.sleep(0.2)
        text = log.read_text()
        assert gate_line in text and "failed to start" in text, text
        assert "self-test failed: sandbox self-test" in text
        for _ in range(5):  # it stays so: the retries fail too
            assert _health(port) == _NOT_SERVING
            time.sleep(0.3)
        reason = _describe(port)["self_test"]
        assert "passing candidate got SCORE_STATUS_INTERNAL with tests []" in reason, reason
        assert "bubblewrap warm" in reason
    finally:
        _stop(proc)


def test_the_service_turns_serving_once_the_self_test_passed(tmp_path: Path) -> None:
    need_sandbox()
    proc, port, log = _serve(tmp_path)
    try:
        deadline = time.monotonic() + 60
        while _health(port) != _SERVING:
            assert time.monotonic() < deadline, log.read_text()
            time.sleep(0.1)
        assert _describe(port)["self_test"] == "passed"
        assert "service ready" in log.read_text()
    finally:
        _stop(proc)


def test_a_wrong_verdict_fails_the_self_test() -> None:
    """A sandbox that starts but reports nothing (the program never loads) is caught too."""
    need_sandbox()
    verifier = CodeVerifier(CodeConfig(sandbox=SandboxSettings(slots=1, mode="spawn")))
    try:
        assert verifier.self_test() is None
        verifier.sandbox.run = lambda *_a, **_k: RunResult(records=[{"k": "hello"}])  # type: ignore[method-assign]
        reason = verifier.self_test()
    finally:
        verifier.close()
    assert reason is not None and "SCORE_STATUS_RUNTIME_ERROR" in reason, reason
    assert verifier.config_items()["self_test"] == reason


class _Flaky(Verifier):
    """A verifier whose self-test follows a script of outcomes (then keeps the last)."""

    name = "flaky"
    kind = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types = ("flaky",)

    def __init__(self, outcomes: list[str | None]) -> None:
        super().__init__()
        self.outcomes = outcomes

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        raise NotImplementedError

    def self_test(self) -> str | None:
        outcome = self.outcomes[0]
        if len(self.outcomes) > 1:
            self.outcomes.pop(0)
        if outcome == "raise":
            raise RuntimeError("boom")
        return outcome


def _runs(worker: SelfTestWorker, n: int) -> None:
    deadline = time.monotonic() + 10
    while worker.runs < n:
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_self_test_worker_follows_the_self_test() -> None:
    worker = SelfTestWorker(
        _Flaky(["raise", "sandbox broken", None, "broke later"]),
        recheck_s=0.05,
        retry_s=0.01,
        max_retry_s=0.02,
    )
    assert "has not run yet" in str(worker.readiness())
    worker.start()
    try:
        _runs(worker, 4)
    finally:
        worker.stop(5)
    assert worker.readiness() == "broke later"


@pytest.mark.parametrize("bad", [(0, 1, 1), (1, 0, 1), (1, 2, 1)])
def test_self_test_worker_rejects_bad_timing(bad: tuple[float, float, float]) -> None:
    with pytest.raises(Exception, match="SelfTestWorker needs"):
        SelfTestWorker(_Flaky([None]), *bad)


def test_the_readiness_gate_sets_health_on_each_change_only() -> None:
    outcomes: list[str | None] = ["starting", "starting", None, None, "broken"]
    calls: list[bool] = []
    gate = _ReadinessGate("svc", lambda: outcomes.pop(0), calls.append)
    for _ in range(5):
        gate.check()
    assert calls == [False, True, False]

    def boom() -> str | None:
        raise RuntimeError("check broke")

    raising = _ReadinessGate("svc", boom, calls.append)
    raising.check()
    assert calls[-1] is False and "check broke" in str(raising.reason)
