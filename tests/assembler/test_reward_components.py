"""Several weighted rewards per task (issue 29), against real gRPC verifier services.

Three SDK verifier services on loopback (the example exact-match verifier as correctness, the
shipped format and length verifiers) score a group through the assembler's verifier client
and a real Redis group store; the group read by the learner's batch edge gives advantages that
must equal a hand computation of sum(weight * reward) and GRPO's (R - mean) / std. Beside it:
the route forms and their errors, a missing component making the combined reward missing, a
batch-level error retried item by item, a verifier without the health service, per-endpoint
TLS, per-endpoint statistics in Redis, and dynamic sampling on the combined reward.
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
import torch
from assembler_helpers import rollout

from grpo.errors import InvalidArgumentError
from grpo.learner.advantages import group_advantages
from grpo.services.assembler.assembler import Assembler
from grpo.services.assembler.group import scored_member
from grpo.services.assembler.sampling import DynamicSampler, GroupVerdict
from grpo.services.assembler.service import StreamGroupSink
from grpo.services.assembler.store import GroupStore
from grpo.services.learner.batch import build_batch
from grpo.services.runtime.accounting import endpoint_summary, read_endpoint_stats
from grpo.services.runtime.routing import RewardTerm, Route, RoutingTable
from grpo.services.runtime.server import ServerSettings, ServiceBinding, create_server
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.runtime.verifier_client import (
    ComponentScore,
    EndpointTLS,
    VerifierClient,
    VerifierClientConfig,
)
from grpo.services.settings.assembler import AssemblerConfig, DynamicSamplingConfig
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.example import SERVICE as EXACT
from grpo.verifiers.shaping.service import FORMAT_SERVICE, LENGTH_SERVICE

WEIGHTS = {"correct": 1.0, "format": 0.2, "length": -0.1}


@pytest.fixture
def three_services() -> Iterator[dict[str, str]]:
    """correct (exact match), format and length (max_length 10 chars) on loopback ports."""
    specs = {
        "correct": (EXACT, {}),
        "format": (FORMAT_SERVICE, {}),
        "length": (LENGTH_SERVICE, {"verifier": {"max_length": 10}}),
    }
    servers, closers, out = [], [], {}
    for name, (spec, extra) in specs.items():
        settings = spec.settings_cls.model_validate(extra)
        parts = spec.build(settings)
        server = create_server(parts.bindings, ServerSettings(port=0, metrics_port=-1))
        server.start()
        servers.append(server)
        closers.append(parts.close)
        out[name] = f"127.0.0.1:{server.port}"
    yield out
    for server, close in zip(servers, closers, strict=True):
        server.stop(0.0)
        if close is not None:
            close()


def _route(addresses: dict[str, str]) -> Route:
    return Route(
        outcome=(addresses["correct"],),
        name="correct",
        weight=WEIGHTS["correct"],
        rewards=tuple(RewardTerm(n, WEIGHTS[n], (addresses[n],)) for n in ("format", "length")),
    )


def _exact(index: int, text: str) -> common_pb2.Rollout:
    return rollout(index=index, text=text, task_type="exact", gold="15", tokens=3)


def test_three_reward_services_give_the_hand_computed_advantages(
    three_services: dict[str, str], redis_client: Any, redis_namespace: str
) -> None:
    client = VerifierClient(RoutingTable({"exact": _route(three_services)}), VerifierClientConfig())
    streams, names = Streams(redis_client), StreamNames(redis_namespace)
    config = AssemblerConfig(dynamic_sampling=DynamicSamplingConfig(mode="off"))
    store = GroupStore(redis_client, redis_namespace, group_deadline_s=60)
    assembler = Assembler(store, client, StreamGroupSink(streams, names), config)
    texts = ["15", "so the answer is 15", "14", "#### 15"]
    try:
        result = assembler.submit([_exact(i, t) for i, t in enumerate(texts)])
    finally:
        client.close()
    assert result.closed == ("p1/e0",)
    (entry,) = redis_client.xrange(names.groups)
    group = common_pb2.Group.FromString(entry[1][b"pb"])
    # Each component as the services scored it (hand check of the verifiers themselves):
    # exact match on the last line; a final answer in an accepted form; min(1, chars / 10).
    expected = {
        "15": (1.0, 0.0, 0.2),
        "so the answer is 15": (0.0, 1.0, 1.0),
        "14": (0.0, 0.0, 0.2),
        "#### 15": (0.0, 1.0, 0.7),
    }
    for member, text in zip(group.members, texts, strict=True):
        got = [(c.name, c.weight, c.score.reward) for c in member.components]
        assert got == [
            (name, WEIGHTS[name], pytest.approx(value))
            for name, value in zip(WEIGHTS, expected[text], strict=True)
        ]
        assert member.outcome.reward == expected[text][0]  # the primary component
    # By hand: R = 1*correct + 0.2*format - 0.1*length.
    rewards = [0.98, 0.1, -0.02, 0.13]  # 1 - 0.02; 0.2 - 0.1; -0.02; 0.2 - 0.07
    assert [m.reward for m in group.members] == pytest.approx(rewards)
    mean = sum(rewards) / 4  # 0.2975
    std = math.sqrt(sum((r - mean) ** 2 for r in rewards) / 4)  # population: 0.39802
    by_hand = [(r - mean) / std for r in rewards]
    batch = build_batch([group], pad_token_id=0, eos_token_id=1)
    adv = group_advantages(batch.rewards, valid=batch.reward_valid, std="population")
    assert adv[0].tolist() == pytest.approx(by_hand, abs=1e-5)
    assert by_hand[0] == pytest.approx(1.7148, abs=1e-4)  # the best answer leads
    stats = endpoint_summary(read_endpoint_stats(redis_client, redis_namespace))
    assert set(stats) == set(three_services.values())
    for address in three_services.values():
        assert stats[address]["items"] == 4 and stats[address]["failed_calls"] == 0
        assert stats[address]["statuses"] == {"SCORE_STATUS_OK": 4}


def test_a_missing_component_makes_the_combined_reward_missing() -> None:
    ok = common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=1.0)
    undecided = common_pb2.Score(status=common_pb2.SCORE_STATUS_UNDECIDED, reward=0.0)
    parts = [
        ComponentScore("correct", 1.0, ok),
        ComponentScore("format", 0.2, None, "verifier 127.0.0.1:9: UNAVAILABLE"),
    ]
    member = scored_member(rollout(), ok, components=parts)
    assert member.missing and not member.HasField("reward")
    assert member.components[1].score.status == common_pb2.SCORE_STATUS_INTERNAL
    assert "UNAVAILABLE" in member.components[1].score.detail
    parts[1] = ComponentScore("format", 0.2, undecided)
    assert scored_member(rollout(), ok, components=parts).missing
    parts[1] = ComponentScore("format", 0.2, ok)
    whole = scored_member(rollout(), ok, components=parts)
    assert not whole.missing and whole.reward == pytest.approx(1.2)


def _group(combined: list[float], primary: list[float]) -> common_pb2.Group:
    ok = common_pb2.SCORE_STATUS_OK
    group = common_pb2.Group(group_id="p1/e0", group_size=len(combined))
    for i, (total, first) in enumerate(zip(combined, primary, strict=True)):
        m = group.members.add(rollout=rollout(index=i), reward=total)
        m.outcome.CopyFrom(common_pb2.Score(status=ok, reward=first))
        m.components.add(name="correct", weight=1.0, score=m.outcome)
        m.components.add(
            name="length", weight=-0.1, score=common_pb2.Score(status=ok, reward=first - total)
        )
    return group


def test_dynamic_sampling_reads_the_combined_reward() -> None:
    sampler = DynamicSampler(DynamicSamplingConfig(mode="mixed"))
    # Every primary reward correct, yet the combined rewards differ (lengths): trainable.
    kept = sampler.decide(_group([0.9, 0.95, 0.97, 0.9], [1, 1, 1, 1]))
    assert kept.verdict is GroupVerdict.ACCEPTED and kept.correct == 4
    assert not kept.zero_variance
    tied = sampler.decide(_group([0.9] * 4, [1, 1, 1, 1]))
    assert tied.verdict is GroupVerdict.REJECTED_ALL_CORRECT and tied.zero_variance
    wrong = sampler.decide(_group([-0.05] * 4, [0, 0, 0, 0]))
    assert wrong.verdict is GroupVerdict.REJECTED_ALL_WRONG


@pytest.mark.parametrize(
    ("route", "message"),
    [
        ({"outcome": ["a:1"], "rewards": [{"name": "outcome", "addresses": ["b:2"]}]},
         r"unique.*\['outcome'\]"),
        ({"process": ["a:1"], "rewards": [{"name": "f", "addresses": ["b:2"]}]},
         "need a primary outcome"),
        ({"outcome": ["a:1"], "weight": "heavy"}, "not a number"),
        ({"outcome": ["a:1"], "rewards": [{"name": "f", "address": ["b:2"]}]},
         r"rewards\[0\]: unknown key\(s\) \['address'\]"),
        ({"outcome": ["a:1"], "rewards": [{"name": "f", "addresses": []}]}, "no verifier address"),
    ],
)  # fmt: skip
def test_bad_reward_routes_name_what_is_wrong(route: dict[str, Any], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        RoutingTable.from_config({"exact": route})


def test_reward_routes_round_trip_through_their_config_form() -> None:
    table = RoutingTable.from_config(
        {
            "exact": {
                "outcome": ["a:1"],
                "name": "correct",
                "rewards": [{"name": "length", "weight": -0.1, "addresses": ["b:2"]}],
            }
        }
    )
    route = table.lookup("exact")
    assert [(t.name, t.weight, t.addresses) for t in route.terms] == [
        ("correct", 1.0, ("a:1",)),
        ("length", -0.1, ("b:2",)),
    ]
    assert route.addresses == ("a:1", "b:2")
    assert RoutingTable.from_config(table.to_config()).lookup("exact") == route


class _PickyVerifier(verifier_pb2_grpc.VerifierServicer):
    """Refuses a whole batch with INVALID_ARGUMENT when one item has no gold answer (as the SDK
    does); scores single items; serves no health service."""

    def __init__(self) -> None:
        self.batches = 0
        self.singles = 0
        self._lock = threading.Lock()

    def Describe(self, request: Any, context: Any) -> verifier_pb2.VerifierDescribeResponse:
        return verifier_pb2.VerifierDescribeResponse(
            name="picky", task_types=["arith"], kind=verifier_pb2.VERIFIER_KIND_OUTCOME
        )

    def _one(self, item: Any, context: Any) -> common_pb2.Score:
        if not item.task.gold_answer:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "task.gold_answer is required")
        ok = item.response.endswith(":" + item.task.gold_answer)
        return common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=float(ok))

    def Score(self, request: Any, context: Any) -> verifier_pb2.ScoreResponse:
        with self._lock:
            self.singles += 1
        return verifier_pb2.ScoreResponse(score=self._one(request, context))

    def ScoreBatch(self, request: Any, context: Any) -> verifier_pb2.ScoreBatchResponse:
        with self._lock:
            self.batches += 1
        return verifier_pb2.ScoreBatchResponse(
            scores=[self._one(i, context) for i in request.items]
        )


@pytest.fixture
def picky() -> Iterator[tuple[str, _PickyVerifier]]:
    """A bare grpc server (no health service, no reflection): what another language serves."""
    servicer = _PickyVerifier()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    verifier_pb2_grpc.add_VerifierServicer_to_server(servicer, server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield f"127.0.0.1:{port}", servicer
    server.stop(0)


def test_a_refused_batch_is_retried_item_by_item(picky: tuple[str, _PickyVerifier]) -> None:
    address, servicer = picky
    client = VerifierClient(RoutingTable.from_config({"arith": address}), VerifierClientConfig())
    items = [rollout(index=0, text="a:15"), rollout(index=1, gold=""), rollout(index=2)]
    try:
        results = client.score(items)
        stats = client.take_endpoint_stats()[address]
    finally:
        client.close()
    assert servicer.batches == 1 and servicer.singles == 3  # no retry of INVALID_ARGUMENT
    assert results[0].outcome is not None and results[0].outcome.reward == 1.0
    assert results[1].outcome is None and "gold_answer is required" in results[1].failure
    assert not results[1].unavailable  # a refusal, not an outage: the reward is missing
    assert results[2].outcome is not None
    assert stats.calls == 4 and stats.items == 6
    assert stats.codes == {"INVALID_ARGUMENT": 2, "OK": 2}


def test_a_verifier_without_health_is_ready_once_describe_answers(
    picky: tuple[str, _PickyVerifier],
) -> None:
    address, _ = picky
    with socketless_port() as closed:
        table = RoutingTable.from_config({"arith": address, "code": f"127.0.0.1:{closed}"})
        client = VerifierClient(table, VerifierClientConfig())
        try:
            assert client.ready(timeout_s=2.0) == [f"127.0.0.1:{closed}"]
        finally:
            client.close()


class socketless_port:
    """A loopback port nothing listens on (bound, then released on enter)."""

    def __enter__(self) -> int:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            return int(s.getsockname()[1])

    def __exit__(self, *exc: object) -> None:
        return None


def test_endpoint_tls_applies_to_its_address_only(localhost_cert: tuple[Any, Any]) -> None:
    """One endpoint over TLS with its own CA and expected name, another in plaintext."""
    key, cert = localhost_cert
    servicer = _PickyVerifier()
    binding = ServiceBinding(
        "grpo.v1.Verifier", verifier_pb2_grpc.add_VerifierServicer_to_server, servicer
    )
    tls = ServerSettings(port=0, metrics_port=-1, tls_cert_file=cert, tls_key_file=key)
    with (
        create_server([binding], tls) as secure,
        create_server([binding], ServerSettings(port=0, metrics_port=-1)) as plain,
    ):
        secure_at, plain_at = f"127.0.0.1:{secure.port}", f"127.0.0.1:{plain.port}"
        table = RoutingTable.from_config(
            {"arith": {"outcome": [secure_at], "rewards": [
                {"name": "plain", "weight": 0.5, "addresses": [plain_at]}]}}
        )  # fmt: skip
        config = VerifierClientConfig(
            max_attempts=1,
            endpoint_tls={secure_at: EndpointTLS(ca_file=cert, server_name="localhost")},
        )
        client = VerifierClient(table, config)
        try:
            (result,) = client.score([rollout(text="a:15")])
        finally:
            client.close()
    assert [c.score.reward if c.score else None for c in result.components] == [1.0, 1.0]


def test_combined_reward_trains_and_old_records_still_read() -> None:
    """A record without components (before revision 2) trains on its outcome reward."""
    old = scored_member(rollout(), common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=1))
    assert not old.components and not old.HasField("reward")
    group = common_pb2.Group(group_id="p1/e0", group_size=2, members=[old])
    new = group.members.add()
    new.CopyFrom(_group([0.4], [1.0]).members[0])
    new.rollout.index = 1
    batch = build_batch([group], pad_token_id=0, eos_token_id=1)
    assert batch.rewards[0].tolist() == pytest.approx([1.0, 0.4])
    assert torch.equal(batch.reward_valid[0], torch.tensor([True, True]))


def test_the_learners_correct_counts_read_the_primary_reward() -> None:
    """Combined rewards 0.9..0.97 of all-correct primaries: the learner trains on the combined
    ones and counts every member correct (groups/correct_frac, groups.jsonl's correct)."""
    from grpo.learner import metric_names as mn
    from grpo.learner.diagnostics import batch_diagnostics
    from grpo.services.learner.loop import group_records_for

    group = _group([0.9, 0.95, 0.97, 0.9], [1, 1, 1, 1])
    batch = build_batch([group], pad_token_id=0, eos_token_id=1)
    assert batch.rewards[0].tolist() == pytest.approx([0.9, 0.95, 0.97, 0.9])
    assert batch.correct_rewards is not None and batch.correct_rewards[0].tolist() == [1.0] * 4
    adv = group_advantages(batch.rewards, valid=batch.reward_valid)
    mask = batch.response_mask
    metrics = batch_diagnostics(
        batch.rewards, adv, mask, valid=batch.reward_valid, row_prompt=batch.row_prompt,
        row_slot=batch.row_slot, correct_rewards=batch.correct_rewards,
    )  # fmt: skip
    assert metrics[mn.GROUPS_CORRECT_FRAC] == 1.0 and metrics[mn.GROUPS_ALL_CORRECT_FRAC] == 1.0
    without = batch_diagnostics(
        batch.rewards, adv, mask, valid=batch.reward_valid, row_prompt=batch.row_prompt,
        row_slot=batch.row_slot,
    )  # fmt: skip
    assert without[mn.GROUPS_CORRECT_FRAC] == 0.0  # the combined rewards are all below 1

    class Algo:
        std, eps = "population", 1e-6

    (record,) = group_records_for([group], step=1, algo=Algo())
    assert record["correct"] == 4 and record["rewards"] == pytest.approx([0.9, 0.95, 0.97, 0.9])
