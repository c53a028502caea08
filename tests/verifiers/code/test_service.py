"""``verifier-code`` as a real gRPC service on loopback, and its refusal to run unsandboxed."""

from __future__ import annotations

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from helpers import wait_for_port_file

from grpo.errors import FailedPreconditionError
from grpo.services.runtime.server import ServerSettings, create_server
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.code import CodeConfig, CodeVerifier, SandboxSettings
from grpo.verifiers.code.service import SERVICE, CodeServiceSettings

from .conftest import CANARY, code_task, need_sandbox

CHECK = "def check(candidate):\n    assert candidate(3) == 9\n"


def test_score_batch_over_grpc_and_healthy_after_hostile_input() -> None:
    need_sandbox()
    settings = CodeServiceSettings(
        server=ServerSettings(port=0, metrics_port=-1),
        verifier=CodeConfig(sandbox=SandboxSettings(slots=2, wall_time_s=2.0)),
    )
    parts = SERVICE.build(settings)
    server = create_server(parts.bindings, settings.server)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            info = stub.Describe(verifier_pb2.VerifierDescribeRequest())
            assert info.name == "code" and info.config["sandboxed"] == "True"
            items = [
                verifier_pb2.ScoreRequest(task=code_task(CHECK), response=r)
                for r in (
                    "def f(x):\n    return x * x\n",
                    "def f(x):\n    return x + x\n",
                    "import os\nprint(dict(os.environ))\nos.kill(os.getppid(), 9)\nos._exit(0)\n",
                )
            ]
            reply = stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=items), timeout=30)
            assert [s.reward for s in reply.scores] == [1.0, 0.0, 0.0]
            assert reply.scores[2].status == common_pb2.SCORE_STATUS_RUNTIME_ERROR
            assert CANARY not in str(reply)
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="grpo.v1.Verifier")
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            with pytest.raises(grpc.RpcError) as err:
                stub.Score(verifier_pb2.ScoreRequest(task=common_pb2.Task(id="x"), response="1"))
            assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    finally:
        server.stop(grace_s=1.0)
        for worker in parts.workers:
            worker.stop(1.0)


def test_refuses_to_start_without_bubblewrap() -> None:
    settings = SandboxSettings(bwrap_path="/nonexistent/bwrap")
    with pytest.raises(FailedPreconditionError, match="allow_unsandboxed"):
        CodeVerifier(CodeConfig(sandbox=settings))


def test_unsandboxed_only_when_explicitly_allowed() -> None:
    settings = SandboxSettings(bwrap_path="/nonexistent/bwrap", allow_unsandboxed=True, slots=1)
    verifier = CodeVerifier(CodeConfig(sandbox=settings))
    try:
        assert verifier.describe().config["sandboxed"] == "False"
        score = verifier.verify(code_task(CHECK), "def f(x):\n    return x ** 2\n")
        assert score.reward == 1.0
    finally:
        verifier.close()


def test_grpo_serve_verifier_code_process(tmp_path) -> None:
    """The real ``grpo serve verifier-code`` process scores over gRPC (sandbox spawns from a
    serving gRPC process) and exits 0 on SIGTERM."""
    import os
    import signal
    import subprocess
    import sys
    from pathlib import Path

    need_sandbox()
    port_file = tmp_path / "port.json"
    grpo = Path(sys.executable).parent / "grpo"
    env = {**os.environ, "GRPO_VERIFIER__SANDBOX__SLOTS": "1"}
    proc = subprocess.Popen(
        [
            str(grpo),
            "serve",
            "verifier-code",
            "--port",
            "0",
            "--metrics-port",
            "-1",
            "--port-file",
            str(port_file),
            "--log-text",
        ],
        env=env,
    )
    try:
        info = wait_for_port_file(port_file, proc, timeout_s=60)
        assert info is not None, f"grpo serve verifier-code exited with {proc.returncode}"
        port = info["port"]
        with grpc.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            for _ in range(3):
                reply = stub.Score(
                    verifier_pb2.ScoreRequest(
                        task=code_task(CHECK), response="def f(x): return x*x"
                    ),
                    timeout=30,
                )
                assert reply.score.status == common_pb2.SCORE_STATUS_OK, reply.score.detail
                assert reply.score.reward == 1.0
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0


def test_sandbox_that_cannot_start_is_internal_not_zero() -> None:
    """A broken sandbox yields status INTERNAL (reward missing), never a silent 0."""
    need_sandbox()
    verifier = CodeVerifier(CodeConfig(sandbox=SandboxSettings(bwrap_path="/bin/false", slots=1)))
    try:
        score = verifier.verify(code_task(CHECK), "def f(x):\n    return x * x\n")
    finally:
        verifier.close()
    assert score.status == common_pb2.SCORE_STATUS_INTERNAL
    assert "failed to start" in score.detail
