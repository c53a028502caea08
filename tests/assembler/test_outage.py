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

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        self.calls += 1
        self.entered.set()
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
        backoff_max_s=0.1,
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


def test_deadlines_fire_while_a_verifier_call_hangs(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    scorer = ScriptedScorer()
    worker, asm, streams, names = _worker(
        redis_client, redis_namespace, scorer, group_deadline_s=0.5, reclaim_idle_ms=200
    )
    asm.submit([rollout("short", 0, 4, text="x:15"), rollout("short", 1, 4, text="x:1")])
    scorer.gate = threading.Event()  # the next call hangs
    streams.produce(names.rollouts, rollout("other", 0, 4))
    worker.start()
    try:
        assert scorer.entered.wait(5)
        # The call is still in flight; the sweeper closes the expired group meanwhile.
        wait_until(lambda: asm.store.counters()["groups_timed_out"] == 1, timeout_s=5)
        assert not scorer.gate.is_set()
        counters = asm.store.counters()
        assert counters["groups_closed_short"] == 1
        assert counters["rollouts_in_closed_groups"] == 2
        stats = AssemblerServicer(asm, worker).GetStats(assembler_pb2.GetStatsRequest(), None)
        assert stats.stats.groups_closed_short == 1
    finally:
        scorer.gate.set()
        worker.stop(5)


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
