"""``grpo compare``: two arms from one SFT start at the same generated-token budget on
e2e-tiny, as a user starts it (the CLI as a process), and the budget check's rules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from grpo.errors import InvalidArgumentError
from grpo.experiments.compare import (
    ArmResult,
    arm_config,
    budget_check,
    curve_band,
    interpolate,
    job_tokens,
    parse_estimators,
)
from grpo.services.driver.driver import RunDriver
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import assembler_pb2, common_pb2, learner_pb2

REPO = Path(__file__).resolve().parents[2]
BUDGET = 300


def test_compare_two_arms_on_e2e_tiny_at_an_equal_token_budget(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # embedded Redis
    env["OMP_NUM_THREADS"] = "1"
    out = tmp_path / "cmp"
    cmd = [
        sys.executable, "-m", "grpo.cli", "compare", str(REPO / "configs" / "e2e-tiny.yaml"),
        "--estimators", "grpo,gae", "--seeds", "1", "--budget-tokens", str(BUDGET),
        "--out", str(out), "--kl-prompts", "4", "--set", "model.sft.steps=5",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    report = json.loads((out / "compare.json").read_text())
    assert report["budget_check"]["equal"] is True, report["budget_check"]
    assert "Budget equal: yes" in (out / "compare.md").read_text()
    assert (out / "compare.png").stat().st_size > 0
    assert set(report["arms"]) == {"grpo", "gae"}
    runs = {r["estimator"]: r for r in report["runs"]}
    assert set(runs) == {"grpo", "gae"}
    # SFT ran once, in start/; every arm started from that folder, with SFT off
    start = out / "start" / "model" / "sft"
    assert report["start_model"] == str(start)
    assert not (out / "grpo-seed0" / "model").exists()
    for est, run in runs.items():
        cfg = yaml.safe_load((Path(run["run_dir"]) / "config.yaml").read_text())
        assert cfg["model"]["path"] == str(start) and not cfg["model"]["sft"]["enabled"]
        assert cfg["learner"]["algo"]["estimator"] == est
        assert cfg["budget"]["generated_tokens"] == BUDGET
        assert run["stop_reason"] == "generated_tokens"
        # never above the budget, below it by less than one job's worst case
        assert run["job_tokens"] == 4 * 24 * 2  # G·L_max·(1 + one regeneration round)
        assert BUDGET - run["job_tokens"] < run["generated_tokens"] <= BUDGET
        assert run["steps"] >= 1 and run["cpu_s"] > 0 and run["train_s"] > 0
        assert run["kl_to_start"]["responses"] == 4 and run["kl_to_start"]["kl_per_token"] >= 0
        assert run["curve"][0]["generated_tokens"] == 0
        assert run["curve"][-1]["generated_tokens"] == run["generated_tokens"]
    assert report["same_start_accuracy"] is True
    # the gae arm trained a critic, the grpo arm none
    metrics = {
        est: (Path(run["run_dir"]) / "metrics.jsonl").read_text() for est, run in runs.items()
    }
    assert "critic/value_loss" in metrics["gae"] and "critic/" not in metrics["grpo"]


def _run(est: str, tokens: int, steps: int, stop: str = "generated_tokens") -> ArmResult:
    return ArmResult(
        estimator=est,
        seed=0,
        run_dir="",
        stop_reason=stop,
        steps=steps,
        generated_tokens=tokens,
        kept_tokens=tokens // 2,
        groups={},
        start_accuracy=0.1,
        final_accuracy=0.2,
        curve=[],
        train_s=1.0,
        run_s=2.0,
        cpu_s=2.0,
        job_tokens=job_tokens(load_run_config(REPO / "configs" / "e2e-tiny.yaml")),
    )


def test_budget_check_flags_an_overshoot_an_undershoot_and_another_budget() -> None:
    # e2e-tiny: one job's worst case W = G·L_max·(1 + 1 regeneration round) = 4·24·2 = 192
    ok = budget_check([_run("grpo", 1000, 10), _run("rloo", 809, 10)], 1000)
    assert ok.equal and ok.max_deviation == 191 and ok.problems == []
    over = budget_check([_run("grpo", 1000, 10), _run("rloo", 1001, 10)], 1000)
    assert not over.equal and "rloo seed 0" in over.problems[0]
    assert "1 above the budget" in over.problems[0]
    under = budget_check([_run("gae", 808, 4)], 1000)
    assert not under.equal and "192 below the budget" in under.problems[0]
    short = budget_check([_run("gae", 990, 10, stop="wall_clock")], 1000)
    assert not short.equal and "'wall_clock'" in short.problems[0]


def test_accuracy_curves_interpolate_and_band_over_seeds() -> None:
    a = [
        {"generated_tokens": 0.0, "train_s": 0.0, "accuracy": 0.2},
        {"generated_tokens": 100.0, "train_s": 10.0, "accuracy": 0.4},
    ]
    b = [
        {"generated_tokens": 0.0, "train_s": 0.0, "accuracy": 0.2},
        {"generated_tokens": 200.0, "train_s": 40.0, "accuracy": 0.8},
    ]
    assert interpolate(a, "train_s", 5.0) == pytest.approx(0.3)
    assert interpolate(a, "train_s", 11.0) != interpolate(a, "train_s", 11.0)  # nan past the end
    band = curve_band([a, b], "generated_tokens", points=3)
    assert band["x"] == [0.0, 50.0, 100.0]  # up to the shortest curve
    assert band["low"] == pytest.approx([0.2, 0.3, 0.4])  # a
    assert band["high"] == pytest.approx([0.2, 0.35, 0.5])  # b at a quarter and half its way
    assert band["median"] == pytest.approx([0.2, 0.325, 0.45])


def test_arm_config_and_estimator_names() -> None:
    base = load_run_config(REPO / "configs" / "e2e-tiny.yaml")
    cfg = arm_config(base, start_model="/m", estimator="rloo", seed=3, budget_tokens=500)
    assert cfg.model.path == "/m" and not cfg.model.sft.enabled
    assert cfg.learner.algo.estimator == "rloo" and cfg.seed == 3 and cfg.learner.trainer.seed == 3
    assert cfg.budget.generated_tokens == 500 and cfg.budget.steps > 10_000
    assert cfg.budget.wall_clock_s == base.budget.wall_clock_s
    assert parse_estimators(" grpo, dr_grpo ,gae") == ["grpo", "dr_grpo", "gae"]
    with pytest.raises(InvalidArgumentError, match=r"unknown estimator.*ppo.*valid: grpo"):
        parse_estimators("grpo,ppo")
    with pytest.raises(InvalidArgumentError, match="repeats"):
        parse_estimators("grpo,grpo")
    with pytest.raises(InvalidArgumentError, match="budget"):
        arm_config(base, start_model="/m", estimator="grpo", seed=0, budget_tokens=0)


class _Counts:
    """The driver's ``Endpoints`` for ``poll``: fixed learner status and assembler counters."""

    def __init__(self) -> None:
        self.stats = assembler_pb2.AssemblerStats()

    def learner_status(self) -> learner_pb2.GetStatusResponse:
        return learner_pb2.GetStatusResponse()

    def assembler_stats(self) -> assembler_pb2.AssemblerStats:
        return self.stats


def test_the_driver_feeds_only_the_jobs_the_token_budget_still_covers(
    tmp_path: Path, redis_client: Any, redis_namespace: str
) -> None:
    base = load_run_config(REPO / "configs" / "e2e-tiny.yaml")  # G = 4, L_max = 24
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml", {"budget.generated_tokens": 1000})
    counts = _Counts()
    names = StreamNames(redis_namespace)
    driver = RunDriver(
        cfg,
        load_run_tasks(cfg),
        streams=Streams(redis_client),
        names=names,
        endpoints=counts,  # type: ignore[arg-type]  # poll needs only these two calls
        out_dir=tmp_path / "run",
    )
    feeder = SimpleNamespace(fed=0)
    gate = driver.token_gate  # one job: 4·24 tokens and one possible regeneration: 192
    assert gate.job_worst_case == 192
    assert driver.jobs_within_token_budget(feeder) == 0  # type: ignore[arg-type]  # not polled
    assert not driver.token_budget_spent(feeder)  # type: ignore[arg-type]
    driver.poll()
    assert driver.jobs_within_token_budget(feeder) == 5  # type: ignore[arg-type]  # 1000 // 192
    # 400 tokens counted over 40 short rollouts (10 each); 12 jobs fed, 10 groups closed: the
    # 2 open groups are reserved at their worst case (8 rollouts at 24, 2 regenerations at
    # 96), not at the mean length so far (which let the feeder through before)
    counts.stats = assembler_pb2.AssemblerStats(
        generated_tokens=400, rollouts_received=40, groups_accepted=10
    )
    driver.poll()
    feeder.fed = 12
    assert driver.jobs_within_token_budget(feeder) == 1  # type: ignore[arg-type]  # 216 left
    assert driver.jobs_within_token_budget(feeder, limit=0) == 0  # type: ignore[arg-type]
    # a regeneration the assembler wrote is issued work too
    counts.stats = assembler_pb2.AssemblerStats(
        generated_tokens=400, rollouts_received=40, groups_accepted=9,
        groups_rejected_too_few_valid=1, regenerations=1,
    )  # fmt: skip
    driver.poll()
    assert driver.jobs_within_token_budget(feeder) == 0  # type: ignore[arg-type]  # 24 left
    # 950 counted, every issued group closed but one (24 fed + 1 regeneration): nothing
    # fits, and the budget is not spent until that group closes
    counts.stats = assembler_pb2.AssemblerStats(
        generated_tokens=950, rollouts_received=96, groups_accepted=23,
        groups_rejected_too_few_valid=1, regenerations=1,
    )  # fmt: skip
    feeder.fed = 24
    driver.poll()
    assert driver.jobs_within_token_budget(feeder) == 0  # type: ignore[arg-type]
    assert not driver.token_budget_spent(feeder)  # type: ignore[arg-type]
    # its job was moved to dead letters by a rollout worker (an invalid prompt): closed
    redis_client.xadd(f"{names.prompts}:dead", {b"_reason": b"prompt too long"})
    driver.poll()
    assert driver.token_budget_spent(feeder)  # type: ignore[arg-type]  # 50 < 192 left
    unbounded = RunDriver(
        base,
        load_run_tasks(base),
        streams=Streams(redis_client),
        names=names,
        endpoints=counts,  # type: ignore[arg-type]
        out_dir=tmp_path / "run2",
    )
    assert unbounded.jobs_within_token_budget(feeder, limit=7) == 7  # type: ignore[arg-type]
    assert not unbounded.token_budget_spent(feeder)  # type: ignore[arg-type]


def test_a_restarted_driver_reserves_the_jobs_an_earlier_one_left_in_flight(
    tmp_path: Path, redis_client: Any, redis_namespace: str
) -> None:
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml", {"budget.generated_tokens": 1000})
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    for i in range(2):  # two jobs the rollout workers have not taken yet
        streams.produce(names.prompts, common_pb2.PromptJob(group_id=f"t{i}/e0", group_size=4))
    counts = _Counts()
    counts.stats = assembler_pb2.AssemblerStats(
        generated_tokens=100, rollouts_received=10, groups_pending=1, groups_accepted=2
    )  # and one group the assembler holds open
    driver = RunDriver(
        cfg, load_run_tasks(cfg), streams=streams, names=names,
        endpoints=counts, out_dir=tmp_path / "run",  # type: ignore[arg-type]
    )  # fmt: skip
    feeder = SimpleNamespace(fed=0)
    driver.poll()
    # 3 jobs in flight at their worst case (3·192) besides the 100 counted: 324 left
    assert driver.jobs_within_token_budget(feeder) == 1  # type: ignore[arg-type]
    assert not driver.token_budget_spent(feeder)  # type: ignore[arg-type]
    counts.stats = assembler_pb2.AssemblerStats(
        generated_tokens=300, rollouts_received=22, groups_pending=0, groups_accepted=5
    )  # all three closed
    driver.poll()
    assert driver.jobs_within_token_budget(feeder) == 3  # type: ignore[arg-type]  # 700 // 192


def test_compare_refuses_bad_input_before_any_run(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from grpo.cli import app

    config = str(REPO / "configs" / "e2e-tiny.yaml")
    out = tmp_path / "cmp"
    runner = CliRunner()
    bad_arm = runner.invoke(app, ["compare", config, "--budget-tokens", "100", "--estimators",
                                  "grpo,ppo", "--out", str(out)])  # fmt: skip
    assert bad_arm.exit_code == 2 and "unknown estimator(s) ppo" in bad_arm.output
    no_budget = runner.invoke(app, ["compare", config, "--budget-tokens", "0", "--out", str(out)])
    assert no_budget.exit_code == 2 and "--budget-tokens must be >= 1" in no_budget.output
    small = runner.invoke(app, ["compare", config, "--budget-tokens", "100", "--out", str(out)])
    said = " ".join(small.output.split())
    assert small.exit_code == 2, said  # no job (4·24·2 = 192 tokens at worst) could be fed
    assert (
        "arm grpo seed 0: budget.generated_tokens=100 is less than one prompt job's worst case "
        "192 tokens"
        in said
        and "at least 192, or 0 for no bound" in said
    ), said
    dead = runner.invoke(app, ["compare", config, "--budget-tokens", "300", "--out", str(out),
                               "--set", "verifiers.outcome=127.0.0.1:1"])  # fmt: skip
    said = [line for line in dead.output.splitlines() if line.strip()]
    assert dead.exit_code == 2 and said == [
        "error: verifiers.outcome: verifier 127.0.0.1:1: Describe failed (UNAVAILABLE): nothing "
        "answers there (is the verifier running, and is the address right?)"
    ], said  # as grpo run; was: SFT of the start first, then the first arm refused
    assert not out.exists()  # no SFT, no run
