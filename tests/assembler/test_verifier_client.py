"""The assembler's verifier client against real gRPC servers on loopback (ephemeral ports)."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from assembler_helpers import rollout

from grpo.services.runtime.routing import RoutingTable
from grpo.services.runtime.server import GrpoServer, ServerSettings, ServiceBinding, create_server
from grpo.services.runtime.verifier_client import VerifierClient, VerifierClientConfig
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc


class EndsWithGold(verifier_pb2_grpc.VerifierServicer):
    """Reward 1 when the response ends with ':<gold>'; fails its first ``unavailable`` calls."""

    def __init__(self, name: str, unavailable: int = 0) -> None:
        self.name = name
        self.unavailable = unavailable
        self.batch_sizes: list[int] = []
        self._lock = threading.Lock()

    def ScoreBatch(self, request: Any, context: Any) -> verifier_pb2.ScoreBatchResponse:
        with self._lock:
            self.batch_sizes.append(len(request.items))
            if self.unavailable > 0:
                self.unavailable -= 1
                context.abort(grpc.StatusCode.UNAVAILABLE, "warming up")
        scores = []
        for item in request.items:
            ok = item.response.endswith(":" + item.task.gold_answer)
            scores.append(
                common_pb2.Score(
                    status=common_pb2.SCORE_STATUS_OK, reward=float(ok), verifier=self.name
                )
            )
        return verifier_pb2.ScoreBatchResponse(scores=scores)


@pytest.fixture
def servers() -> Iterator[dict[str, tuple[GrpoServer, EndsWithGold]]]:
    out = {}
    for name, unavailable in (("math", 0), ("steps", 0), ("flaky", 2)):
        servicer = EndsWithGold(name, unavailable)
        server = create_server(
            [
                ServiceBinding(
                    "grpo.v1.Verifier", verifier_pb2_grpc.add_VerifierServicer_to_server, servicer
                )
            ],
            ServerSettings(port=0, metrics_port=-1, grace_s=0.0),
        )
        server.start()
        out[name] = (server, servicer)
    yield out
    for server, _ in out.values():
        server.stop(0.0)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _addr(servers: dict[str, Any], name: str) -> str:
    return f"127.0.0.1:{servers[name][0].port}"


def test_batches_outcome_and_process_per_route(servers: dict[str, Any]) -> None:
    table = RoutingTable.from_config(
        {"arith": {"outcome": [_addr(servers, "math")], "process": [_addr(servers, "steps")]}}
    )
    sleeps: list[float] = []
    client = VerifierClient(table, VerifierClientConfig(max_batch=2), sleep=sleeps.append)
    rollouts = [rollout(index=i, text="a:15" if i % 2 else "a:3") for i in range(5)]
    results = client.score(rollouts)
    client.close()
    assert [r.outcome.reward for r in results if r.outcome] == [0.0, 1.0, 0.0, 1.0, 0.0]
    assert all(r.process is not None and r.process.verifier == "steps" for r in results)
    assert sorted(servers["math"][1].batch_sizes) == [1, 2, 2]
    assert sleeps == []


def test_retries_with_backoff_then_succeeds(servers: dict[str, Any]) -> None:
    table = RoutingTable.from_config({"arith": [_addr(servers, "flaky")]})
    sleeps: list[float] = []
    cfg = VerifierClientConfig(max_attempts=3, backoff_initial_s=0.1, backoff_max_s=0.15)
    client = VerifierClient(table, cfg, sleep=sleeps.append)
    (result,) = client.score([rollout(text="a:15")])
    client.close()
    assert result.outcome is not None and result.outcome.reward == 1.0
    assert sleeps == [0.1, 0.15]
    assert servers["flaky"][1].batch_sizes == [1, 1, 1]


def test_unreachable_verifier_gives_missing_not_zero() -> None:
    table = RoutingTable.from_config({"arith": [f"127.0.0.1:{_closed_port()}"]})
    sleeps: list[float] = []
    cfg = VerifierClientConfig(max_attempts=2, timeout_s=2.0)
    client = VerifierClient(table, cfg, sleep=sleeps.append)
    (result,) = client.score([rollout()])
    client.close()
    assert result.outcome is None
    assert "UNAVAILABLE" in result.failure
    assert len(sleeps) == 1 and client.failed_calls == 1


def test_failover_to_second_address(servers: dict[str, Any]) -> None:
    dead = f"127.0.0.1:{_closed_port()}"
    table = RoutingTable.from_config({"arith": [dead, _addr(servers, "math")]})
    client = VerifierClient(table, VerifierClientConfig(max_attempts=2), sleep=lambda _s: None)
    results = client.score([rollout(text="a:15")])
    results += client.score([rollout(text="a:15")])
    client.close()
    assert [r.outcome.reward for r in results if r.outcome] == [1.0, 1.0]


def test_unrouted_task_type_is_missing_with_reason(servers: dict[str, Any]) -> None:
    table = RoutingTable.from_config({"arith": [_addr(servers, "math")]})
    client = VerifierClient(table, VerifierClientConfig())
    results = client.score([rollout(task_type="code"), rollout(text="a:15")])
    client.close()
    assert results[0].outcome is None and "known task types: arith" in results[0].failure
    assert results[1].outcome is not None and results[1].outcome.reward == 1.0


def test_tls_to_verifiers_with_ca_file(localhost_cert: tuple[Any, Any]) -> None:
    """With tls_ca_file the client dials TLS (the chart's tls.enabled); plaintext would fail."""
    key, cert = localhost_cert
    servicer = EndsWithGold("math")
    binding = ServiceBinding(
        "grpo.v1.Verifier", verifier_pb2_grpc.add_VerifierServicer_to_server, servicer
    )
    settings = ServerSettings(port=0, metrics_port=-1, tls_cert_file=cert, tls_key_file=key)
    with create_server([binding], settings) as server:
        table = RoutingTable.from_config({"arith": [f"localhost:{server.port}"]})
        secure = VerifierClient(table, VerifierClientConfig(tls_ca_file=cert))
        (result,) = secure.score([rollout(text="a:15")])
        secure.close()
        assert result.outcome is not None and result.outcome.reward == 1.0
        plain = VerifierClient(table, VerifierClientConfig(max_attempts=1, timeout_s=3.0))
        (failed,) = plain.score([rollout(text="a:15")])
        plain.close()
        assert failed.outcome is None  # missing, never reward 0


def test_half_configured_client_tls_is_rejected() -> None:
    with pytest.raises(ValueError, match="tls_cert_file and tls_key_file"):
        VerifierClientConfig(tls_cert_file="c.pem")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="needs tls_ca_file"):
        VerifierClientConfig(tls_cert_file="c.pem", tls_key_file="k.pem")  # type: ignore[arg-type]
