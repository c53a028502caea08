"""End to end: every service as a real `grpo serve` process, a real Redis, the real tiny model.

One run of configs/e2e-tiny.yaml (SFT off, dynamic sampling off so every complete group
reaches the learner) on 3·B training prompts fed once: the learner can do exactly 3 steps, so
when it is SIGKILLed it is at step 3 with its last checkpoint at step 2 (checkpoints every 2
steps) — the kill lands between checkpoints by construction, not by timing. It is restarted
from that checkpoint and a second driver, allowed a second pass over the prompts, resumes
feeding and takes the run to step 6. Then it checks, from Redis and the run directory:

- every group on the groups stream has G members, indices 0..G-1, all of one prompt;
- the learner's lineage (groups.jsonl, the last checkpoint) holds each group id once, and
  exactly B groups per step: no group consumed twice;
- no group lost: every group the learner acknowledged is in its lineage;
- the assembler's counters add up (opened = accepted + rejected + pending) and agree with the
  streams (accepted = groups written; rollouts and generated tokens = distinct rollouts);
- after shutdown no service process (or process-group member) is alive.
"""

from __future__ import annotations

import json
import signal
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until

from grpo.learner.checkpoint import latest_checkpoint
from grpo.local.cluster import LocalCluster
from grpo.local.policy import prepare_policy
from grpo.local.processes import group_members
from grpo.services.driver.driver import LEARNER_GROUP, RunDriver
from grpo.services.runtime.accounting import stats_identity_gap
from grpo.services.runtime.policy import read_policy
from grpo.services.runtime.redis_server import connect
from grpo.services.settings.run import RunConfig, load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import common_pb2

REPO = Path(__file__).resolve().parents[2]
G, B = 4, 2


def _entries(client, stream: str, message_type):  # type: ignore[no-untyped-def]
    return [
        (eid.decode(), message_type.FromString(fields[b"pb"]))
        for eid, fields in client.xrange(stream)
    ]


def _lineage(run_dir: Path) -> list[dict]:  # type: ignore[type-arg]
    path = run_dir / "groups.jsonl"
    lines = path.read_text().splitlines() if path.is_file() else []
    return [json.loads(line) for line in lines if line.strip()]


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str, redis_namespace: str) -> Iterator[LocalCluster]:
    overrides = {
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "model.sft.enabled": False,
        "assembler.dynamic_sampling.mode": "off",
        "generation.group_size": G,
        "generation.max_new_tokens": 16,
        "learner.batch_groups": B,
        "learner.checkpoint_every": 2,
        "data.train_size": 3 * B,  # one pass = exactly 3 learner steps
        "data.prompt_repeats": 1,
        "data.heldout_size": 0,
        "budget.steps": 6,
    }
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml", overrides)
    c = LocalCluster(cfg, tmp_path / "run")
    yield c
    c.stop()


def _driver(cluster: LocalCluster, config: RunConfig) -> RunDriver:
    assert cluster.streams is not None
    return RunDriver(
        config,
        load_run_tasks(config),
        streams=cluster.streams,
        names=cluster.names,
        endpoints=cluster,
        out_dir=cluster.run_dir,
    )


def test_kill_and_resume_loses_and_repeats_no_group(cluster: LocalCluster) -> None:
    p = cluster
    cfg = p.config
    started = time.monotonic()
    p.start_redis()
    model = prepare_policy(cfg, p.run_dir, load_run_tasks(cfg), print)
    p.start(model, "arith")
    # The learner published the initial policy as version 0 before it served.
    first = read_policy(p.client, p.names)
    assert first is not None and (first.policy_version, first.step) == (0, 0)
    assert Path(first.path) == p.run_dir / "weights" / "v0"
    t0 = time.monotonic()
    assert _driver(p, cfg).train(steps=3) == "steps"
    t1 = time.monotonic()
    # Only 3·B prompts were fed: the learner is at step 3 and cannot move on.
    assert p.learner_status().step == 3
    # The status counts a step before its run-log lines are written: kill once they are.
    wait_until(
        lambda: 3 in {r["step"] for r in _lineage(p.run_dir)},
        timeout_s=60,
        what="step 3's lines in groups.jsonl",
        retry_on=(json.JSONDecodeError,),  # a line being written
    )
    p.supervisor.kill("learner")  # SIGKILL: step 3 is lost with the process
    checkpoint = latest_checkpoint(p.run_dir / "checkpoints")
    assert checkpoint is not None
    resume_step = json.loads((checkpoint / "meta.json").read_text())["step"]
    assert resume_step == 2
    before_kill = _lineage(p.run_dir)
    assert sorted({r["step"] for r in before_kill}) == [1, 2, 3]
    p.start_learner()
    p.supervisor.wait_healthy(["learner"], timeout_s=120)
    assert p.learner_status().step >= resume_step  # it may redo step 3 at once
    second_pass = cfg.model_copy(update={"data": cfg.data.model_copy(update={"prompt_repeats": 2})})
    assert _driver(p, second_pass).train(steps=6) == "steps"
    print(
        f"phases: start {t0 - started:.1f} s, 3 steps {t1 - t0:.1f} s, "
        f"resume+rest {time.monotonic() - t1:.1f} s, killed at checkpoint {resume_step}"
    )
    # Quiesce generation, let the assembler drain the rollouts stream, then read its counters.
    p.supervisor.kill("rollout-worker-0", signal.SIGTERM)
    streams = p.streams
    assert streams is not None
    wait_until(
        lambda: streams.lag(p.names.rollouts, "assembler") == 0,
        timeout_s=60,
        what="the assembler to drain the rollouts stream",
    )
    stats = p.assembler_stats()
    pids = [proc.popen.pid for proc in p.supervisor.services.values()]
    client = connect(p.redis_url)
    p.stop()
    assert group_members(set(pids)) == [], "service processes left behind"

    names = p.names
    groups = _entries(client, names.groups, common_pb2.Group)
    for _eid, group in groups:
        assert len(group.members) == G
        assert [m.rollout.index for m in group.members] == list(range(G))
        assert {m.rollout.prompt_id for m in group.members} == {group.prompt_id}
        assert {m.rollout.group_id for m in group.members} == {group.group_id}
    group_ids = [g.group_id for _eid, g in groups]
    assert len(set(group_ids)) == len(group_ids), "a group was written twice"

    lineage = _lineage(p.run_dir)
    # Resumed from the checkpoint: its steps kept their groups; the lost steps' groups were
    # trained again after the restart (none lost).
    assert [r for r in lineage if r["step"] <= resume_step] == [
        r for r in before_kill if r["step"] <= resume_step
    ]
    assert {r["group_id"] for r in before_kill} <= {r["group_id"] for r in lineage}
    lineage_ids = [rec["group_id"] for rec in lineage]
    assert len(lineage_ids) == len(set(lineage_ids)), "a group was consumed twice"
    per_step = Counter(rec["step"] for rec in lineage)
    assert sorted(per_step) == [1, 2, 3, 4, 5, 6] and set(per_step.values()) == {B}
    steps = [
        json.loads(line)["step"] for line in (p.run_dir / "metrics.jsonl").read_text().splitlines()
    ]
    assert steps == [1, 2, 3, 4, 5, 6]
    meta = json.loads(
        sorted((p.run_dir / "checkpoints").glob("step-*"))[-1].joinpath("meta.json").read_text()
    )
    assert meta["consumed_group_ids"] == lineage_ids

    # No group lost: everything the learner acknowledged is in its lineage.
    pending_raw: Any = client.xpending_range(names.groups, LEARNER_GROUP, "-", "+", 10_000)
    pending = {e["message_id"].decode() for e in pending_raw}
    infos: Any = client.xinfo_groups(names.groups)
    info = {i["name"].decode(): i for i in infos}[LEARNER_GROUP]
    last = info["last-delivered-id"].decode()
    acked = [
        g.group_id
        for eid, g in groups
        if tuple(map(int, eid.split("-"))) <= tuple(map(int, last.split("-")))
        and eid not in pending
    ]
    assert set(acked) <= set(lineage_ids)
    assert len(acked) >= 4 * B  # the step-4 and step-6 checkpoints were acknowledged

    # GetStats adds up and agrees with the streams.
    assert stats_identity_gap(stats) == 0
    assert stats.groups_accepted == len(groups)
    rollouts = {
        (r.group_id, r.index): len(r.completion.token_ids)
        for _eid, r in _entries(client, names.rollouts, common_pb2.Rollout)
    }
    assert stats.rollouts_received == len(rollouts)
    assert stats.generated_tokens == sum(rollouts.values())
    kept = sum(len(m.rollout.completion.token_ids) for _e, g in groups for m in g.members)
    assert stats.kept_tokens == kept
    client.close()
