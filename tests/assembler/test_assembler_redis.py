"""Assembler over a real Redis: idempotent member writes, closes, deadlines, crash recovery.

A fake scorer stands in for the verifier services (their gRPC client is tested in
test_verifier_client.py); the group store, the Lua scripts and the streams are real.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from assembler_helpers import rollout, score

from grpo.errors import ContractError
from grpo.services.assembler.assembler import Assembler
from grpo.services.assembler.service import StreamGroupSink
from grpo.services.assembler.store import GroupStore
from grpo.services.runtime.accounting import (
    read_accounting,
    run_accounting,
    stats_from_counters,
    stats_identity_gap,
)
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.runtime.verifier_client import RolloutScores, VerifierClientConfig
from grpo.services.settings.assembler import AssemblerConfig, DynamicSamplingConfig
from grpo.v1 import common_pb2


class TableScorer:
    """Reward = 1.0 when the response text ends with the gold answer; None for text 'FAIL'."""

    def __init__(self) -> None:
        self.calls = 0

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        self.calls += len(rollouts)
        out = []
        for r in rollouts:
            if r.completion.text == "FAIL":
                out.append(RolloutScores(None, None, "verifier down"))
            elif r.completion.text == "BADGOLD":  # what the math verifier answers then
                bad = score(0.0, common_pb2.SCORE_STATUS_INTERNAL)
                bad.detail = "gold answer: unbalanced brackets"
                out.append(RolloutScores(bad, None))
            elif r.completion.text == "UNDECIDED":
                out.append(RolloutScores(score(0.0, common_pb2.SCORE_STATUS_UNDECIDED), None))
            else:
                ok = r.completion.text.endswith(":" + r.task.gold_answer)
                out.append(RolloutScores(score(1.0 if ok else 0.0), None))
        return out


class FlakySink(StreamGroupSink):
    """A stream sink that fails its first ``failures`` writes (a crash mid-close)."""

    def __init__(self, streams: Streams, names: StreamNames, failures: int = 0) -> None:
        super().__init__(streams, names)
        self.failures = failures

    def write_group(self, group: common_pb2.Group) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise RuntimeError("crash before the group write")
        super().write_group(group)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def env(redis_client: redis.Redis, redis_namespace: str):  # type: ignore[no-untyped-def]
    ns = redis_namespace
    names = StreamNames(ns)
    streams = Streams(redis_client)
    clock = Clock()

    def make(failures: int = 0, **config: object) -> Assembler:
        config.setdefault("verifier", VerifierClientConfig(timeout_s=10.0))
        cfg = AssemblerConfig(group_deadline_s=60.0, **config)  # type: ignore[arg-type]
        store = GroupStore(redis_client, ns, group_deadline_s=cfg.group_deadline_s)
        sink = FlakySink(streams, names, failures)
        return Assembler(store, TableScorer(), sink, cfg, clock=clock)

    return make, streams, names, clock


def _groups(streams: Streams, names: StreamNames) -> list[common_pb2.Group]:
    raw: Any = streams.client.xrange(names.groups)
    return [common_pb2.Group.FromString(fields[b"pb"]) for _id, fields in raw]


def _jobs(streams: Streams, names: StreamNames) -> list[common_pb2.PromptJob]:
    raw: Any = streams.client.xrange(names.prompts)
    return [common_pb2.PromptJob.FromString(fields[b"pb"]) for _id, fields in raw]


def _stats(asm: Assembler):  # type: ignore[no-untyped-def]
    return stats_from_counters(asm.store.counters(), asm.store.pending())


def _mixed(gid: str = "p1/e0", g: int = 4) -> list[common_pb2.Rollout]:
    texts = ["x:15", "x:14", "x:15", "x:99"]
    return [rollout(gid, i, g, text=texts[i % 4]) for i in range(g)]


def test_complete_group_is_written_once_in_index_order(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make()
    parts = _mixed()
    first = asm.submit([parts[3], parts[1]])
    assert (first.accepted, first.closed) == (2, ())
    second = asm.submit([parts[0], parts[2], parts[1]])  # index 1 replayed
    assert (second.accepted, second.duplicates, second.closed) == (2, 1, ("p1/e0",))
    groups = _groups(streams, names)
    assert len(groups) == 1
    group = groups[0]
    assert [m.rollout.index for m in group.members] == [0, 1, 2, 3]
    assert [m.outcome.reward for m in group.members] == [1.0, 0.0, 1.0, 0.0]
    assert group.status == common_pb2.GROUP_STATUS_COMPLETE
    # Replaying the whole group after it closed changes nothing.
    again = asm.submit(parts)
    assert (again.accepted, again.closed) == (0, ())
    assert len(_groups(streams, names)) == 1
    stats = _stats(asm)
    assert stats.rollouts_received == 4 and stats.groups_accepted == 1
    assert stats.generated_tokens == 20 and stats.kept_tokens == 20
    assert stats.groups_zero_variance == 0 and stats.zero_variance_tokens == 0
    assert stats_identity_gap(stats) == 0


def test_replayed_rollouts_are_not_rescored(env) -> None:  # type: ignore[no-untyped-def]
    make, *_ = env
    asm = make()
    parts = _mixed()
    asm.submit(parts[:2])
    asm.submit(parts[:2])
    assert asm._scorer.calls == 2  # type: ignore[attr-defined]


def test_uniform_groups_are_rejected_and_regenerated_with_bound(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make(dynamic_sampling=DynamicSamplingConfig(max_rounds=1))
    asm.submit([rollout("p1/e0", i, 4, text="x:15") for i in range(4)])  # all correct
    jobs = _jobs(streams, names)
    assert [(j.group_id, j.round, j.group_size) for j in jobs] == [("p1/e0/r1", 1, 4)]
    # The regenerated group is all wrong again, at round 1 = max_rounds: no further job.
    asm.submit([rollout("p1/e0/r1", i, 4, text="x:0", round=1) for i in range(4)])
    assert len(_jobs(streams, names)) == 1
    assert _groups(streams, names) == []
    stats = _stats(asm)
    assert stats.groups_rejected_all_correct == 1 and stats.groups_rejected_all_wrong == 1
    assert stats.regenerations == 1 and stats.kept_tokens == 0
    assert stats.groups_zero_variance == 2 and stats.zero_variance_tokens == stats.generated_tokens
    assert stats_identity_gap(stats) == 0


def test_dynamic_sampling_off_keeps_uniform_groups_and_counts_them(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make(dynamic_sampling=DynamicSamplingConfig(mode="off"))
    asm.submit([rollout("p1/e0", i, 4, text="x:15") for i in range(4)])  # all correct
    asm.submit(_mixed("p2/e0"))
    assert len(_groups(streams, names)) == 2 and _jobs(streams, names) == []
    stats = _stats(asm)
    assert stats.groups_accepted == 2 and stats.groups_rejected_all_correct == 0
    assert stats.groups_zero_variance == 1 and stats.kept_tokens == stats.generated_tokens
    assert 0 < stats.zero_variance_tokens < stats.generated_tokens
    assert stats_identity_gap(stats) == 0


def test_verifier_failure_marks_member_missing_not_zero(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make()
    parts = _mixed()
    parts[1] = rollout("p1/e0", 1, 4, text="FAIL")
    asm.submit(parts)
    (group,) = _groups(streams, names)
    member = group.members[1]
    assert member.missing and member.outcome.status == common_pb2.SCORE_STATUS_INTERNAL
    assert "verifier down" in member.outcome.detail
    stats = _stats(asm)
    assert stats.rewards_missing == 1 and stats.verifier_failures == 1


def test_deadline_closes_partial_group_with_missing_members_left_out(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, clock = env
    asm = make()
    parts = _mixed()
    asm.submit(parts[:3])
    assert asm.sweep() == ()
    assert _stats(asm).groups_pending == 1
    clock.now += 61.0
    assert asm.sweep() == ("p1/e0",)
    (group,) = _groups(streams, names)
    assert group.status == common_pb2.GROUP_STATUS_TIMED_OUT
    assert [m.rollout.index for m in group.members] == [0, 1, 2]
    # The straggler arrives late: ignored, counted, no second group.
    late = asm.submit(parts[3:])
    assert late.accepted == 0
    assert len(_groups(streams, names)) == 1
    stats = _stats(asm)
    assert stats.groups_timed_out == 1 and stats.groups_pending == 0
    assert asm.store.counters()["rollouts_late"] == 1
    assert stats_identity_gap(stats) == 0


def test_timed_out_group_with_too_few_valid_is_dropped(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, clock = env
    asm = make(dynamic_sampling=DynamicSamplingConfig(regenerate=False))
    asm.submit([rollout("p9/e0", 0, 4, text="x:15")])
    clock.now += 61.0
    asm.sweep()
    stats = _stats(asm)
    assert stats.groups_rejected_too_few_valid == 1 and stats.groups_timed_out == 1
    assert _groups(streams, names) == [] and _jobs(streams, names) == []
    assert stats_identity_gap(stats) == 0


def test_crash_between_close_and_commit_is_repaired_exactly_once(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    crashing = make(failures=1)
    parts = _mixed()
    with pytest.raises(RuntimeError, match="crash"):
        crashing.submit(parts)  # members stored, group CLOSING, nothing written
    assert _groups(streams, names) == []
    # A fresh assembler gets the unacknowledged rollouts again (stream replay).
    fresh = make()
    result = fresh.submit(parts)
    assert result.accepted == 0 and result.closed == ("p1/e0",)
    fresh.submit(parts)
    assert len(_groups(streams, names)) == 1
    stats = _stats(fresh)
    assert stats.groups_accepted == 1 and stats.rollouts_received == 4
    assert stats_identity_gap(stats) == 0
    # Replays of members, while CLOSING and once CLOSED, are not late rollouts.
    assert fresh.store.counters()["rollouts_late"] == 0


def test_many_groups_interleaved_add_up(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make(dynamic_sampling=DynamicSamplingConfig(regenerate=False))
    texts = itertools.cycle(["x:15", "x:15", "x:1", "x:15", "x:1", "x:1"])
    rollouts = [
        rollout(f"p{g}/e0", i, 3, prompt_id=f"p{g}", text=next(texts))
        for i in range(3)
        for g in range(10)
    ]
    for lo in range(0, len(rollouts), 7):
        asm.submit(rollouts[lo : lo + 7])
    groups = _groups(streams, names)
    assert len({g.group_id for g in groups}) == len(groups)
    for g in groups:
        assert len(g.members) == 3 and {m.rollout.prompt_id for m in g.members} == {g.prompt_id}
    stats = _stats(asm)
    assert stats.groups_opened == 10 and stats.groups_pending == 0
    assert stats.groups_accepted == len(groups)
    assert stats_identity_gap(stats) == 0


def test_malformed_rollout_is_refused(env) -> None:  # type: ignore[no-untyped-def]
    make, *_ = env
    asm = make()
    bad = rollout(index=5, group_size=4)
    with pytest.raises(ContractError, match="index 5"):
        asm.submit([bad])
    broken = rollout()
    del broken.completion.behavior_logprobs[:]
    with pytest.raises(ContractError, match="behavior log-probs"):
        asm.submit([broken])


def test_discovery_enabled_outside_kubernetes_fails_fast(redis_url: str, monkeypatch: Any) -> None:
    """`discovery.enabled` wires KubernetesDiscovery into the assembler's workers: outside a
    cluster (no service-account token, no kubeconfig) the build refuses to start."""
    from grpo.errors import FailedPreconditionError
    from grpo.services.assembler.service import SERVICE, AssemblerSettings

    monkeypatch.setenv("KUBECONFIG", "/nonexistent/kubeconfig")
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    settings = AssemblerSettings.model_validate(
        {"redis_url": redis_url, "namespace": "disc-test", "discovery": {"enabled": True},
         "routing": {"arith": {"outcome": ["127.0.0.1:1"]}}}
    )  # fmt: skip
    with pytest.raises(FailedPreconditionError):
        SERVICE.build(settings)


def test_read_accounting_counts_queued_rollouts_and_a_lost_one(env) -> None:  # type: ignore[no-untyped-def]
    make, streams, names, _ = env
    asm = make()
    ns, group = names.namespace, "assembler"
    parts = [
        rollout(f"p{g}/e0", i, 2, prompt_id=f"p{g}", text="x:15")
        for g in range(5)
        for i in range(2)
    ]
    for r in parts:
        streams.produce(names.rollouts, r)

    def rollouts_block() -> dict[str, Any]:
        stats, produced, queued = read_accounting(streams.client, ns, names.rollouts, group)
        return run_accounting(stats, produced, queued)["rollouts"]  # type: ignore[return-value]

    # No consumer group yet: every entry is queued.
    assert rollouts_block()["queued"] == 10 and rollouts_block()["unaccounted"] == 0
    entries = streams.consume(names.rollouts, group, "a", common_pb2.Rollout, count=6)
    asm.submit([e.message for e in entries[:4]])
    streams.ack(names.rollouts, group, [e.id for e in entries[:4]])
    block = rollouts_block()  # 4 scored and acknowledged, 2 pending, 4 never delivered
    assert (block["produced"], block["scored"], block["queued"]) == (10, 4, 6)
    assert block["unaccounted"] == 0
    # An entry acknowledged without being recorded is lost: the identity shows it.
    streams.ack(names.rollouts, group, [entries[4].id])
    assert rollouts_block()["unaccounted"] == 1
    # A recorded entry whose ack was lost (Redis restarted from its append-only file) is
    # scored, not queued: counted once, so the lost one above still shows.
    asm.submit([entries[5].message])  # its group p2/e0 stays open (index 0 never recorded)
    block = rollouts_block()
    assert (block["scored"], block["queued"], block["unaccounted"]) == (5, 4, 1)


def test_missing_rewards_are_counted_per_reason_and_read_with_the_accounting(env, caplog) -> None:  # type: ignore[no-untyped-def]
    """Each missing reward is counted under its reason (``score_status.missing_reason``), a
    gold the verifier cannot parse is named in the log once per task, and the run's
    accounting reads the reasons in the same transaction as the counters."""
    import logging

    from grpo.services.runtime.accounting import read_run_accounting

    make, streams, names, _clock = env
    asm = make(dynamic_sampling=DynamicSamplingConfig(mode="off", max_undecided_frac=1.0))
    texts = ["BADGOLD", "BADGOLD", "FAIL", "UNDECIDED"]
    with caplog.at_level(logging.WARNING, logger="grpo.services.assembler.assembler"):
        asm.submit([rollout("g", i, 4, text=t) for i, t in enumerate(texts)])
    named = [r.getMessage() for r in caplog.records if "cannot parse its gold" in r.getMessage()]
    assert len(named) == 1 and "unbalanced brackets" in named[0]
    counters = asm.store.counters()
    assert counters["rewards_missing"] == 4 and counters["rewards_undecided"] == 1
    acc = read_run_accounting(streams.client, names.namespace, names.rollouts, "assembler")
    assert acc.rewards.missing_by_reason == {
        "gold_unparsable": 2, "no_verdict": 1, "undecided": 1,
    }  # fmt: skip
    assert sum(acc.rewards.missing_by_reason.values()) == acc.rewards.missing
