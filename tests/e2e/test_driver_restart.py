"""The run driver as a service of its own (``grpo serve driver``), SIGKILLed mid-run.

A local cluster runs configs/e2e-tiny.yaml with the driver launched like any other service.
Once the driver has recorded its first evaluation during training (found by ``due``, a
multiple of ``eval.every_steps``: the learner may be past it by then), the test pauses the
learner (SetPaused, as a driver does before its final evaluation) and SIGKILLs the driver.
The pause holds the learner where it is while no driver runs: unpaused, the tiny learner
trains through the groups already fed in a second or two, and a loaded machine's late first
evaluation plus that lead once left the restarted driver no step to evaluate before the
budget. The cluster's supervision restarts the driver, which resumes the learner and finishes
the run.
Then:

- the prompts stream holds exactly a prefix of the feed's deterministic order, in order and
  each job once: the restarted driver neither re-fed nor skipped a prompt;
- eval.jsonl holds each evaluation once (the restarted driver reused the recorded ones), each
  for a multiple of ``eval.every_steps``, in step order (training goes on during an
  evaluation, so a multiple the learner passed meanwhile is skipped), and the summary lists
  them all;
- the restarted driver evaluated at least one step of its own after the recorded ones;
- the summary is the restarted driver's (stop reason "steps"), and the learner reached the
  step budget: the restarted driver resumed the paused learner.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from helpers import wait_until

from grpo.local.cluster import LocalCluster
from grpo.local.policy import prepare_policy
from grpo.services.driver.driver import LEARNER_GROUP, WORKER_GROUP, DriverRecord
from grpo.services.driver.feeder import PromptFeeder
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import common_pb2

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def cluster(tmp_path: Path, redis_url: str, redis_namespace: str) -> Iterator[LocalCluster]:
    overrides = {
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "model.sft.enabled": False,
        "assembler.dynamic_sampling.mode": "off",
        "generation.max_new_tokens": 8,
        "learner.checkpoint_every": 2,
        "data.train_size": 8,
        "data.heldout_size": 4,
        "eval.every_steps": 2,
        "eval.max_new_tokens": 8,
        "budget.steps": 100,
    }
    c = LocalCluster(load_run_config(REPO / "configs" / "e2e-tiny.yaml", overrides), tmp_path / "r")
    yield c
    c.stop()


def test_a_restarted_driver_resumes_without_refeeding_or_reevaluating(
    cluster: LocalCluster,
) -> None:
    c, cfg = cluster, cluster.config
    tasks = load_run_tasks(cfg)
    c.start_redis()
    model = prepare_policy(cfg, c.run_dir, tasks, print)
    c.start(model, tasks.task_type)
    c.start_driver(model)
    record = DriverRecord(c.client, c.names)
    wait_until(
        lambda: [r for r in record.evaluations() if r.get("due")],
        timeout_s=180,
        what="a first evaluation during training",
    )
    assert c.supervisor.services["driver"].alive(), "the driver finished before the kill"
    paused_at = c.set_learner_paused(True, timeout_s=60).step
    assert paused_at < cfg.budget.steps - 20, f"the learner is at step {paused_at} already"
    c.supervisor.kill("driver")  # SIGKILL mid-run (reaped: it records nothing more)
    recorded_at_kill = [int(r["due"]) for r in record.evaluations() if "due" in r]

    def finished() -> bool:
        c.check()  # restarts the driver
        return c.driver_finished()

    started = time.monotonic()
    wait_until(finished, timeout_s=240, interval_s=0.5, what="the restarted driver to finish")
    print(f"restarted driver finished in {time.monotonic() - started:.1f} s")
    assert c.restarts.get("driver", 0) >= 1
    assert c.learner_status().step >= cfg.budget.steps

    assert c.streams is not None
    jobs = [
        common_pb2.PromptJob.FromString(fields[b"pb"]).group_id
        for _id, fields in c.client.xrange(c.names.prompts)
    ]
    feeder = PromptFeeder(
        c.streams,
        c.names,
        tasks.train,
        group_size=cfg.generation.group_size,
        prompts_ahead=cfg.generation.prompts_ahead,
        groups_ahead=2 * cfg.learner.batch_groups,
        worker_group=WORKER_GROUP,
        learner_group=LEARNER_GROUP,
        seed=cfg.seed,
        repeats=cfg.data.prompt_repeats,
    )
    assert feeder.resumed_at == len(jobs) > 2 * cfg.learner.batch_groups
    assert jobs == [feeder._job_id(i) for i in range(len(jobs))]  # a prefix, in order, once

    rows = [json.loads(line) for line in (c.run_dir / "eval.jsonl").read_text().splitlines()]
    labels = [r["label"] for r in rows]
    assert len(labels) == len(set(labels)) and labels[0] == "sft" and labels[-1] == "final"
    dues = [r["due"] for r in rows if "due" in r]
    assert dues[-1] > max(recorded_at_kill), (dues, recorded_at_kill)  # the new driver's own
    assert all(d % 2 == 0 for d in dues) and dues == sorted(set(dues)), dues
    summary = json.loads((c.run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "steps"
    assert [r["label"] for r in summary["evals"]] == labels
