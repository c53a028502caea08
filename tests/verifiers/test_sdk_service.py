"""The SDK's gRPC service on a real server: Describe, Score, ScoreBatch, errors, deadlines."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import ClassVar

import _pool_funcs as funcs
import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from prometheus_client import REGISTRY

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.example import SERVICE as EXAMPLE_SERVICE
from grpo.verifiers.example import ExactMatchConfig, ExactMatchVerifier
from grpo.verifiers.sdk import (
    PoolSettings,
    ScoringSettings,
    Verifier,
    VerifierServicer,
    make_score,
)
from grpo.verifiers.sdk.failures import pool_scores
from grpo.verifiers.sdk.pooled import PoolVerifier
from grpo.verifiers.sdk.service import VERIFIER_SERVICE_NAME, verifier_service_spec


class _SlowVerifier(Verifier):
    """Sleeps ``float(task.gold_answer)`` seconds, then answers OK 1.0; raises on 'boom'."""

    name: ClassVar[str] = "slow"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("slow",)
    required_task_fields: ClassVar[tuple[str, ...]] = ("gold_answer",)

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        if response == "boom":
            raise RuntimeError("verifier bug")
        self.release.wait(float(task.gold_answer))
        return make_score(common_pb2.SCORE_STATUS_OK, 1.0, extracted=response)


class _PoolVerifier(PoolVerifier):
    """Runs ``_pool_funcs.act(response, int(gold))`` in its pool, a run of items per call;
    answers OK with ``"<value>@<worker pid>"``."""

    name: ClassVar[str] = "pooled"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, workers: int, start_method: str = "forkserver") -> None:
        settings = PoolSettings(
            workers=workers, timeout_s=20, memory_mb=512, start_method=start_method
        )
        # Under spawn each replacement imports sympy afresh (~1 s), as a math pool's does.
        super().__init__(None, settings, ("sympy",) if start_method == "spawn" else ())

    def score_many(self, items, on_score=None):  # type: ignore[no-untyped-def]
        return pool_scores(
            self.pool,
            funcs.act,
            items,
            args_of=lambda task, response: (response, int(task.gold_answer)),
            score_of=lambda r: make_score(
                common_pb2.SCORE_STATUS_OK, 1.0, extracted="{}@{}".format(*r)
            ),
            max_response_chars=1000,
            on_score=on_score,
        )


def _serve(
    verifier: Verifier, scoring: ScoringSettings
) -> Iterator[verifier_pb2_grpc.VerifierStub]:
    servicer = VerifierServicer(verifier, scoring)
    binding = ServiceBinding(
        VERIFIER_SERVICE_NAME, verifier_pb2_grpc.add_VerifierServicer_to_server, servicer
    )
    server = create_server([binding], ServerSettings(port=0, metrics_port=-1, grace_s=0))
    server.start()
    channel = grpc.insecure_channel(f"127.0.0.1:{server.port}")
    try:
        yield verifier_pb2_grpc.VerifierStub(channel)
    finally:
        channel.close()
        server.stop(0)
        servicer.close()


@pytest.fixture(scope="module")
def exact_stub() -> Iterator[verifier_pb2_grpc.VerifierStub]:
    yield from _serve(ExactMatchVerifier(), ScoringSettings(max_batch_items=4))


@pytest.fixture(scope="module")
def slow() -> Iterator[tuple[_SlowVerifier, verifier_pb2_grpc.VerifierStub]]:
    verifier = _SlowVerifier()
    for stub in _serve(verifier, ScoringSettings(concurrency=4, request_timeout_s=1.0)):
        yield verifier, stub
    verifier.release.set()


def _req(gold: str, response: str) -> verifier_pb2.ScoreRequest:
    return verifier_pb2.ScoreRequest(
        task=common_pb2.Task(id="t", type="exact", gold_answer=gold), response=response
    )


def test_describe(exact_stub: verifier_pb2_grpc.VerifierStub) -> None:
    info = exact_stub.Describe(verifier_pb2.VerifierDescribeRequest())
    assert info.name == "exact-match"
    assert list(info.task_types) == ["exact"]
    assert info.kind == verifier_pb2.VERIFIER_KIND_OUTCOME
    assert info.config["case_sensitive"] == "False"


def _scored(status: str) -> float:
    value = REGISTRY.get_sample_value(
        "grpo_verifier_scores_total", {"verifier": "exact-match", "status": status}
    )
    return value or 0.0


def test_score_and_batch_in_order(exact_stub: verifier_pb2_grpc.VerifierStub) -> None:
    ok_before, no_answer_before = _scored("OK"), _scored("NO_ANSWER")
    score = exact_stub.Score(_req("Paris", "I think\n  paris ")).score
    assert (score.status, score.reward, score.verifier) == (
        common_pb2.SCORE_STATUS_OK,
        1.0,
        "exact-match",
    )
    batch = exact_stub.ScoreBatch(
        verifier_pb2.ScoreBatchRequest(
            items=[_req("a", "a"), _req("a", "b"), _req("a", ""), _req("c", "C")]
        )
    )
    got = [(s.status, s.reward) for s in batch.scores]
    assert got == [
        (common_pb2.SCORE_STATUS_OK, 1.0),
        (common_pb2.SCORE_STATUS_OK, 0.0),
        (common_pb2.SCORE_STATUS_NO_ANSWER, 0.0),
        (common_pb2.SCORE_STATUS_OK, 1.0),
    ]
    assert _scored("OK") - ok_before == 4
    assert _scored("NO_ANSWER") - no_answer_before == 1


def test_errors_map_to_grpc_codes(exact_stub: verifier_pb2_grpc.VerifierStub) -> None:
    with pytest.raises(grpc.RpcError) as info:
        exact_stub.Score(verifier_pb2.ScoreRequest(task=common_pb2.Task(id="t"), response="x"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "gold_answer" in info.value.details()
    bad_batch = verifier_pb2.ScoreBatchRequest(items=[_req("a", "a"), _req("", "b")])
    with pytest.raises(grpc.RpcError) as info:
        exact_stub.ScoreBatch(bad_batch)
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "items[1]" in info.value.details()
    with pytest.raises(grpc.RpcError) as info:
        exact_stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=[_req("a", "a")] * 5))
    assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    wrong_type = common_pb2.Task(id="t", type="code", gold_answer="a")
    with pytest.raises(grpc.RpcError) as info:
        exact_stub.Score(verifier_pb2.ScoreRequest(task=wrong_type, response="a"))
    assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "task.type 'code'" in info.value.details() and "exact" in info.value.details()


def test_verifier_bug_is_internal_status_not_zero(
    slow: tuple[_SlowVerifier, verifier_pb2_grpc.VerifierStub],
) -> None:
    score = (
        slow[1]
        .Score(verifier_pb2.ScoreRequest(task=common_pb2.Task(gold_answer="0"), response="boom"))
        .score
    )
    assert score.status == common_pb2.SCORE_STATUS_INTERNAL
    assert "verifier bug" in score.detail


def test_batch_items_past_the_deadline_are_undecided(
    slow: tuple[_SlowVerifier, verifier_pb2_grpc.VerifierStub],
) -> None:
    _, stub = slow
    items = [
        verifier_pb2.ScoreRequest(task=common_pb2.Task(gold_answer=g), response=str(i))
        for i, g in enumerate(["0", "30", "0"])
    ]
    start = time.monotonic()
    scores = stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=items), timeout=20).scores
    assert time.monotonic() - start < 15  # request_timeout_s=1 cut it, not the 30 s item
    assert [s.status for s in scores] == [
        common_pb2.SCORE_STATUS_OK,
        common_pb2.SCORE_STATUS_UNDECIDED,  # the verifier's deadline: missing, not a 0
        common_pb2.SCORE_STATUS_OK,
    ]
    assert [s.extracted_answer for s in scores] == ["0", "", "2"]


def test_service_spec_builds_and_serves_with_health() -> None:
    settings = EXAMPLE_SERVICE.settings_cls(
        server=ServerSettings(port=0, metrics_port=-1),
        verifier=ExactMatchConfig(case_sensitive=True),
    )
    parts = EXAMPLE_SERVICE.build(settings)
    server = create_server(parts.bindings, settings.server)
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            health = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service="grpo.v1.Verifier")
            )
            assert health.status == health_pb2.HealthCheckResponse.SERVING
            stub = verifier_pb2_grpc.VerifierStub(channel)
            assert stub.Score(_req("Paris", "paris")).score.reward == 0.0  # case-sensitive
    finally:
        server.stop(0)
        assert parts.close is not None
        parts.close()


class _NoConfigVerifier(Verifier):
    """A verifier without options: reward 1 for a non-empty response."""

    name: ClassVar[str] = "nonempty"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("nonempty",)

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        return make_score(common_pb2.SCORE_STATUS_OK, float(bool(response.strip())))


def test_one_class_and_one_line_make_a_service() -> None:
    """A verifier class plus ``verifier_service_spec`` is a whole service: derived settings
    (``server``, ``scoring``, optional ``verifier``), unknown keys refused, scoring applied."""
    spec = verifier_service_spec("verifier-nonempty", _NoConfigVerifier)
    assert spec.settings_cls.__name__ == "_NoConfigServiceSettings"
    assert spec.settings_cls.__module__ == __name__  # where the one line is
    assert list(spec.settings_cls.model_fields) == ["server", "scoring"]
    settings = spec.settings_cls.model_validate(
        {"server": {"port": 0, "metrics_port": -1}, "scoring": {"max_batch_items": 1}}
    )
    with pytest.raises(ValueError, match="serving"):
        spec.settings_cls.model_validate({"serving": {"max_batch_items": 1}})
    parts = spec.build(settings)
    server = create_server(parts.bindings, settings.server)  # type: ignore[attr-defined]
    server.start()
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = verifier_pb2_grpc.VerifierStub(channel)
            one = verifier_pb2.ScoreRequest(task=common_pb2.Task(id="t"), response="x")
            assert stub.Score(one).score.reward == 1.0
            with pytest.raises(grpc.RpcError) as info:
                stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=[one, one]))
            assert info.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    finally:
        server.stop(0)
        assert parts.close is not None
        parts.close()
    with_config = verifier_service_spec("verifier-exact", ExactMatchVerifier, ExactMatchConfig)
    assert list(with_config.settings_cls.model_fields) == ["server", "scoring", "verifier"]
    with pytest.raises(InvalidArgumentError, match="Verifier subclass"):
        verifier_service_spec("verifier-bad", ExactMatchConfig)  # type: ignore[arg-type]


def test_builtin_verifier_services_share_the_sdk_settings() -> None:
    """The math, steps and code services are the SDK's derived settings, nothing copied."""
    from grpo.verifiers.code.service import SERVICE as CODE
    from grpo.verifiers.math.service import SERVICE as MATH
    from grpo.verifiers.steps.service import SERVICE as STEPS

    for spec in (MATH, STEPS, CODE, EXAMPLE_SERVICE):
        fields = spec.settings_cls.model_fields
        assert list(fields) == ["server", "scoring", "verifier"], spec.name
        assert fields["scoring"].annotation is ScoringSettings
        assert fields["server"].annotation is ServerSettings


def _act(action: str, value: int) -> verifier_pb2.ScoreRequest:
    return verifier_pb2.ScoreRequest(task=common_pb2.Task(gold_answer=str(value)), response=action)


def test_a_pool_verifier_scores_a_batch_in_runs_one_per_worker() -> None:
    verifier = _PoolVerifier(workers=2)
    try:
        for stub in _serve(verifier, ScoringSettings(request_timeout_s=30)):
            items = [_act("ok", i) for i in range(7)]
            scores = stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=items)).scores
            values = [s.extracted_answer.split("@") for s in scores]
            assert [int(v) for v, _ in values] == list(range(7))  # request order
            pids = [pid for _, pid in values]
            assert len(set(pids[:4])) == len(set(pids[4:])) == 1 and pids[0] != pids[4]
            assert all(s.verifier == "pooled" and s.latency_s > 0 for s in scores)
    finally:
        verifier.close()


@pytest.mark.parametrize("start_method", ["forkserver", "spawn"])
def test_a_run_cut_by_the_request_deadline_keeps_the_items_it_finished(start_method: str) -> None:
    """Also when replacing the worker cut at the deadline outlasts the deadline (spawn:
    a fresh interpreter, > 0.25 s)."""
    verifier = _PoolVerifier(workers=1, start_method=start_method)
    try:
        for stub in _serve(verifier, ScoringSettings(request_timeout_s=2.0)):
            items = [_act("ok", 0), _act("ok", 1), _act("sleep", 30), _act("ok", 3)]
            start = time.monotonic()
            scores = stub.ScoreBatch(verifier_pb2.ScoreBatchRequest(items=items)).scores
            assert time.monotonic() - start < 10
            assert [s.status for s in scores] == [
                common_pb2.SCORE_STATUS_OK,
                common_pb2.SCORE_STATUS_OK,
                common_pb2.SCORE_STATUS_UNDECIDED,  # cut at the deadline: missing, not a 0
                common_pb2.SCORE_STATUS_UNDECIDED,  # never started
            ]
            assert [s.extracted_answer.split("@")[0] for s in scores[:2]] == ["0", "1"]
    finally:
        verifier.close()
