"""A run that FAILS still writes summary.json, with its accounting and why it failed.

``run_local`` (the code behind ``grpo run``) on configs/e2e-tiny.yaml with a restart budget of
one (``supervision.max_restarts: 1``): once the learner has trained a step, the rollout
worker is SIGKILLed, restarted by the supervisor, and SIGKILLed again, one death more than the
budget. The run must then fail (ServiceFailedError, re-raised after the summary is written)
with a summary.json that holds:

- ``stop_reason: error`` and the failure (the service, "giving up"), every death with its
  cause, and the one restart;
- the accounting: groups opened = accepted + rejected (by reason, undecided included) +
  pending with the identity gap 0 (a snapshot of a live assembler), timed out and closed
  short beside it, rewards missing/undecided, rollouts produced/scored/late/held/unaccounted;
- outage seconds per dependency per service, read from the services' logs;
- no process left behind.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from pathlib import Path
from typing import Any

from helpers import wait_until
from tracking_files import tensorboard_scalars, wandb_history

from grpo.learner import metric_names as mn
from grpo.local.processes import ServiceFailedError
from grpo.local.run import run_local
from grpo.services.settings.run import load_run_config

REPO = Path(__file__).resolve().parents[2]
WORKER = "rollout-worker-0"


def _pid_of(run_dir: Path, name: str) -> int | None:
    """Pid of the live ``grpo serve`` process started with ``services/<name>.yaml``."""
    needle = f"--config {run_dir / 'services' / f'{name}.yaml'}"
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{entry}/cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, UnicodeDecodeError):
            continue
        if needle in cmd and state != "Z":
            return int(entry)
    return None


def _steps(run_dir: Path) -> list[dict[str, Any]]:
    path = run_dir / "metrics.jsonl"
    text = path.read_text() if path.is_file() else ""
    return [json.loads(line) for line in text.splitlines() if line.strip()]


def test_a_failed_run_writes_its_accounting_and_why(
    tmp_path: Path, redis_url: str, redis_namespace: str
) -> None:
    from grpo.model import init_tiny_model

    overrides: dict[str, Any] = {
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "model.sft.enabled": False,
        "data.heldout_size": 0,
        "assembler.dynamic_sampling.mode": "off",
        "generation.max_new_tokens": 8,
        "supervision.max_restarts": 1,
        "supervision.backoff_initial_s": 0.1,
        "budget.steps": 10_000,  # only the failure ends this run
        "budget.wall_clock_s": 300,
        "logging.report_to": ["tensorboard", "wandb"],  # tracking of a run without LoRA
    }
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml", overrides)
    tiny = cfg.model.tiny
    model = init_tiny_model(
        tmp_path / "init", seed=0, hidden=tiny.hidden, layers=tiny.layers, heads=tiny.heads,
        kv_heads=tiny.kv_heads, intermediate=tiny.intermediate, max_positions=tiny.max_positions,
    )  # fmt: skip
    overrides["model.path"] = str(model)
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml", overrides)
    run_dir = tmp_path / "run"
    result: dict[str, BaseException] = {}

    def target() -> None:
        try:
            run_local(cfg, run_dir, log_fn=print)
        except BaseException as exc:  # checked below
            result["error"] = exc

    thread = threading.Thread(target=target, name="grpo-run")
    thread.start()
    try:
        wait_until(lambda: _steps(run_dir), timeout_s=240, what="a first learner step")
        first = _pid_of(run_dir, WORKER)
        assert first is not None
        os.killpg(first, signal.SIGKILL)  # the worker and its process group, as a crash
        second = wait_until(
            lambda: (pid := _pid_of(run_dir, WORKER)) not in (None, first) and pid,
            timeout_s=60,
            what="the supervisor to restart the rollout worker",
        )
        os.killpg(second, signal.SIGKILL)  # one death more than max_restarts
    finally:
        thread.join(240)
    assert not thread.is_alive(), "the run did not end after the supervisor gave up"
    error = result.get("error")
    assert isinstance(error, ServiceFailedError), repr(error)

    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "error"
    assert WORKER in summary["failure"] and "giving up" in summary["failure"]
    assert summary["restarts"] == {WORKER: 1}
    assert [d["service"] for d in summary["deaths"]] == [WORKER, WORKER]
    assert {d["reason"] for d in summary["deaths"]} == {"killed by SIGKILL"}
    assert summary["leftover_processes"] == []
    assert summary["final_policy_step"] >= 1 and summary["final_policy_version"] >= 1
    assert _pid_of(run_dir, WORKER) is None and _pid_of(run_dir, "assembler") is None

    groups = summary["accounting"]["groups"]
    reasons = groups["rejected_by_reason"]
    assert set(reasons) == {"all_correct", "all_wrong", "too_few_valid", "too_many_undecided"}
    assert groups["rejected"] == sum(reasons.values())
    assert groups["identity_gap"] == 0, groups
    assert groups["opened"] == groups["accepted"] + groups["rejected"] + groups["pending"]
    assert groups["accepted"] >= cfg.learner.batch_groups  # a step was trained on them
    assert groups["identity"] == "opened = accepted + rejected + pending"
    assert {"timed_out", "closed_short"} <= set(groups)
    assert summary["groups_opened"] == groups["opened"]
    assert summary["groups_rejected_too_many_undecided"] == reasons["too_many_undecided"]
    rewards = summary["accounting"]["rewards"]
    assert rewards["missing"] == summary["rewards_missing"] >= rewards["undecided"]
    assert rewards["undecided"] == summary["rewards_undecided"]
    rollouts = summary["accounting"]["rollouts"]
    assert rollouts["produced"] >= rollouts["scored"] >= 2 * cfg.generation.group_size
    assert rollouts["queued"] >= rollouts["held"] == 0  # read after the assembler stopped
    assert rollouts["unaccounted"] == (
        rollouts["produced"] - rollouts["scored"] - rollouts["late"] - rollouts["queued"]
    )

    assert summary["outage_source"] == "service logs"
    outages = summary["outage_s"]
    assert set(outages["redis"]) == {"assembler", "driver", "learner", WORKER}
    assert set(outages["verifiers"]) == {"assembler"}
    assert all(s >= 0.0 for by in outages.values() for s in by.values())
    # The learner writes the outage figure the run driver reads from GetStatus.
    assert all(mn.LEARNER_REDIS_OUTAGE_S in row for row in _steps(run_dir))
    # Its tracking sinks (full fine-tuning; LoRA: test_tracking_run.py) hold every step.
    steps = [row["step"] for row in _steps(run_dir)]
    assert sorted(tensorboard_scalars(run_dir / "tensorboard")["policy_version"]) == steps
    (wandb_run,) = (run_dir / "wandb").glob("offline-run-*")
    assert sorted(wandb_history(wandb_run)) == steps
