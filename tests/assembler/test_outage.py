"""An outage is not a verdict: the assembler worker over a real Redis with a scripted scorer.

The scorer stands in for the verifiers and can be "down" (every rollout unavailable) or hang
(block until released); the group store, the Lua scripts, the streams and the worker's
consumer loop and sweeper thread are real.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
import redis
from assembler_helpers import rollout, score
from helpers import wait_until

from grpo.services.assembler.assembler import Assembler
from grpo.services.assembler.service import AssemblerServicer, AssemblerWorker, StreamGroupSink
from grpo.services.assembler.store import GroupStore
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.runtime.verifier_client import RolloutScores
from grpo.services.settings.assembler import (
    AssemblerConfig,
    VerifierClientConfig,
    check_reclaim_before_deadline,
    reclaim_idle_ms_for,
)
from grpo.v1 import assembler_pb2, common_pb2

GROUP = "assembler"


class ScriptedScorer:
    """Correct when the text ends with ':<gold>'; ``down`` = unavailable; ``gate`` = hang."""

    def __init__(self) -> None:
        self.down = False
        self.gate: threading.Event | None = None
        self.entered = threading.Event()
        self.calls = 0
        self.raise_once: BaseException | None = None

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        self.calls += 1
        self.entered.set()
        if self.raise_once is not None:
            error, self.raise_once = self.raise_once, None
            raise error
        if self.gate is not None:
            self.gate.wait(30)
        if self.down:
            return [RolloutScores(None, None, "UNAVAILABLE", unavailable=True) for _ in rollouts]
        return [
            RolloutScores(score(float(r.completion.text.endswith(":" + r.task.gold_answer))), None)
            for r in rollouts
        ]


def _worker(client: redis.Redis, ns: str, scorer: ScriptedScorer, **cfg: Any):  # type: ignore[no-untyped-def]
    verifier = VerifierClientConfig(
        outage_budget_s=cfg.pop("outage_budget_s", 30.0), backoff_initial_s=0.05,
        backoff_max_s=0.1, timeout_s=cfg.pop("timeout_s", 10.0), max_attempts=1,
    )  # fmt: skip
    config = AssemblerConfig(
        group_deadline_s=cfg.pop("group_deadline_s", 60.0), verifier=verifier,
        sweep_interval_s=0.05, block_ms=10, **cfg,
    )  # fmt: skip
    names, streams = StreamNames(ns), Streams(client)
    store = GroupStore(client, ns, group_deadline_s=config.group_deadline_s)
    assembler = Assembler(store, scorer, StreamGroupSink(streams, names), config)
    worker = AssemblerWorker(assembler, streams, names, config, consumer="asm-0")
    streams.ensure_group(names.rollouts, GROUP)
    return worker, assembler, streams, names


def _mixed(gid: str) -> list[common_pb2.Rollout]:
    return [rollout(gid, i, 4, text=t) for i, t in enumerate(["x:15", "x:1", "x:15", "x:2"])]


def test_unavailable_verifier_holds_rollouts_pending_then_scores_them(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(redis_client, redis_namespace, scorer)
    for r in _mixed("g1"):
        streams.produce(names.rollouts, r)
    scorer.down = True
    assert worker.run_once() == 0  # nothing acknowledged, nothing recorded
    assert worker.held == 4 and streams.pending(names.rollouts, GROUP) == 4
    assert asm.store.counters()["rollouts_received"] == 0
    streams.produce(names.rollouts, rollout("g2", 0, 4))
    worker.run_once()  # within the backoff: no retry, and no new rollout read
    assert worker.held == 4 and streams.lag(names.rollouts, GROUP) == 5
    scorer.down = False
    wait_until(lambda: worker.run_once() == 4, interval_s=0.02)
    counters = asm.store.counters()
    assert counters["groups_accepted"] == 1 and counters["rewards_missing"] == 0
    assert counters["verifier_outage_ms"] > 0
    assert worker.held == 0 and streams.pending(names.rollouts, GROUP) == 0


def test_outage_past_its_budget_marks_rewards_missing(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(
        redis_client, redis_namespace, scorer, outage_budget_s=0.3
    )
    for r in _mixed("g1"):
        streams.produce(names.rollouts, r)
    scorer.down = True
    started = time.monotonic()
    wait_until(lambda: worker.run_once() == 4, interval_s=0.02)
    assert time.monotonic() - started >= 0.3  # held for the whole budget first
    counters = asm.store.counters()
    assert counters["rewards_missing"] == 4 and counters["groups_rejected_too_few_valid"] == 1
    assert streams.pending(names.rollouts, GROUP) == 0


def test_deadlines_stop_while_a_verifier_call_is_stalled_and_move_on_by_the_stall(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    """A call past one attempt's deadline is a stall: the sweeper pauses (a group waiting
    for the call's answer, or for rollouts queued behind it, is not closed short), the stall
    is counted as verifier outage, and the open groups' deadlines move on by it, so a group
    that really lost members still closes, later."""
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(
        redis_client, redis_namespace, scorer, group_deadline_s=0.5, timeout_s=0.2,
        reclaim_idle_ms=200,
    )  # fmt: skip
    asm.submit([rollout("short", 0, 4, text="x:15"), rollout("short", 1, 4, text="x:1")])
    scorer.gate = threading.Event()  # the next call hangs
    streams.produce(names.rollouts, rollout("other", 0, 4))
    worker.start()
    try:
        assert scorer.entered.wait(5)
        time.sleep(1.5)  # three deadlines of "short" pass while the call is stalled
        assert worker.stalled_s() > 1.0
        assert asm.store.counters()["groups_timed_out"] == 0
        scorer.gate.set()
        wait_until(lambda: asm.store.counters()["groups_timed_out"] == 2, timeout_s=10)
        counters = asm.store.counters()
        assert counters["groups_closed_short"] == 2  # both lost members: closed, later
        assert counters["verifier_outage_ms"] >= 1500
        stats = AssemblerServicer(asm, worker).GetStats(assembler_pb2.GetStatsRequest(), None)
        assert stats.stats.verifier_outage_s >= 1.5
    finally:
        scorer.gate.set()
        worker.stop(5)


def test_a_group_whose_members_are_in_a_call_is_not_swept_meanwhile(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    """Within one attempt's deadline the sweeper runs, but never closes a group whose
    members are in the call in flight: the call's answer completes it."""
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(
        redis_client, redis_namespace, scorer, group_deadline_s=1.0, timeout_s=1.0,
        reclaim_idle_ms=200,
    )  # fmt: skip
    rollouts = _mixed("g")
    asm.submit(rollouts[:2])  # opened now: its deadline is in 1 s
    scorer.gate = threading.Event()
    for r in rollouts[2:]:
        streams.produce(names.rollouts, r)
    worker.start()
    try:
        assert scorer.entered.wait(5)
        time.sleep(0.9)  # the group's deadline passes while its members are in the call
        scorer.gate.set()
        wait_until(lambda: asm.store.counters()["groups_accepted"] == 1, timeout_s=10)
        counters = asm.store.counters()
        assert counters["groups_timed_out"] == 0 and counters["groups_closed_short"] == 0
    finally:
        scorer.gate.set()
        worker.stop(5)


def test_a_group_deadline_shorter_than_one_verifier_call_is_refused() -> None:
    verifier = VerifierClientConfig(timeout_s=2.0, max_attempts=3, backoff_initial_s=0.2)
    ok = AssemblerConfig(group_deadline_s=6.6, verifier=verifier, reclaim_idle_ms=1000)
    assert ok.group_deadline_s == 6.6
    with pytest.raises(ValueError, match=r"shorter than one verifier call's worst case \(6\.6 s"):
        AssemblerConfig(group_deadline_s=6.0, verifier=verifier, reclaim_idle_ms=1000)


def test_worker_waits_for_verifiers_before_reading(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    scorer = ScriptedScorer()
    worker, _asm, streams, names = _worker(redis_client, redis_namespace, scorer)
    down = ["verifier-math:1"]
    worker._verifiers_down, worker._wait_for_verifiers_s, worker._ready = (
        lambda: list(down), 60.0, False,
    )  # fmt: skip
    streams.produce(names.rollouts, rollout("g", 0, 4))
    assert worker.run_once() == 0 and scorer.calls == 0
    assert streams.lag(names.rollouts, GROUP) == 1  # not even read
    down.clear()
    assert worker.run_once() == 1 and scorer.calls == 1


def test_restarted_assembler_takes_back_its_own_pending_rollouts_at_once(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(redis_client, redis_namespace, scorer)
    for r in _mixed("g1"):
        streams.produce(names.rollouts, r)
    streams.consume(names.rollouts, GROUP, "asm-0", common_pb2.Rollout, count=2, block_ms=None)
    # The process that read 2 of them died; its successor has the same consumer name and
    # takes them back at once (not after reclaim_idle_ms, 30 s), with the 2 never read.
    assert worker.run_once() == 4
    assert asm.store.counters()["groups_accepted"] == 1
    assert streams.pending(names.rollouts, GROUP) == 0


def test_reclaim_delay_that_races_the_group_deadline_is_rejected() -> None:
    assert reclaim_idle_ms_for(60.0) == 15_000
    check_reclaim_before_deadline(30_000, 60.0, "x")
    with pytest.raises(ValueError, match="races the group deadline"):
        check_reclaim_before_deadline(60_000, 60.0, "rollout worker reclaim_idle_ms")
    with pytest.raises(ValueError, match=r"assembler\.reclaim_idle_ms"):
        AssemblerConfig(group_deadline_s=60.0, reclaim_idle_ms=40_000)


def test_rollouts_whose_records_redis_refused_are_taken_back_not_left_pending(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    """A Redis error while a batch is recorded (out of memory, a reset connection) ends the
    iteration; the batch must not stay marked as in hand: once Redis answers again the
    consumer takes it back and scores it (it stayed pending for good before)."""
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(redis_client, redis_namespace, scorer)
    for r in _mixed("g1"):
        streams.produce(names.rollouts, r)
    scorer.raise_once = redis.exceptions.OutOfMemoryError("command not allowed when used memory")
    with pytest.raises(redis.exceptions.OutOfMemoryError):
        worker.run_once()
    assert streams.pending(names.rollouts, GROUP) == 4 and worker.held == 0
    worker.reconnected()  # what the consumer loop does once the outage closes
    assert worker.run_once() == 4
    assert asm.store.counters()["groups_accepted"] == 1
    assert streams.pending(names.rollouts, GROUP) == 0
