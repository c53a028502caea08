"""``grpo run --resume`` of a run that already ended on its budget (``grpo.local.run.ended_run``):
reported (stop reason, steps, what to raise) with exit 0 and nothing started, unless the budget
it reached is raised."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo.cli import app
from grpo.local.run import ended_run, run_local, write_run_config
from grpo.services.driver.summary import RunSummary
from grpo.services.runtime.accounting import RunAccounting
from grpo.services.settings.run import load_run_config
from grpo.v1 import assembler_pb2

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "e2e-tiny.yaml"  # budget: steps 3, wall_clock_s 240


def _ended(run_dir: Path, stop_reason: str = "steps", *, steps: int = 3,
           grpo_s: float = 50.0, tokens: int = 0) -> Path:  # fmt: skip
    """A run folder as a finished run leaves it: config.yaml and summary.json."""
    write_run_config(load_run_config(TINY, environ={}), run_dir)
    stats = assembler_pb2.AssemblerStats(generated_tokens=tokens)
    RunSummary(
        config="e2e-tiny", stop_reason=stop_reason, sft_accuracy=0.25, final_accuracy=0.5,
        steps=steps, final_policy_version=steps, final_policy_step=steps,
        accounting=RunAccounting.from_stats(stats), grpo_wall_clock_s=grpo_s,
        wall_clock_s=grpo_s + 10,
    ).write(run_dir / "summary.json")  # fmt: skip
    return run_dir


def _files(run_dir: Path) -> set[str]:
    return {str(p.relative_to(run_dir)) for p in run_dir.rglob("*")} - {"run.lock"}


def test_a_finished_run_is_reported_and_nothing_starts(tmp_path: Path) -> None:
    run_dir = _ended(tmp_path / "run")
    before = _files(run_dir)
    result = CliRunner().invoke(app, ["run", "--resume", str(run_dir)])
    said = " ".join(result.output.split())
    assert result.exit_code == 0, said
    assert f"run {run_dir} already ended (stop reason steps, 3 steps, final accuracy 0.500" in said
    assert "budget.steps 3 (--steps N with N > 3)" in said
    assert _files(run_dir) == before  # no logs, services, Redis or checkpoint written


@pytest.mark.parametrize("raise_by", [["--steps", "5"], ["--set", "budget.steps=5"]])
def test_a_raised_budget_resumes_the_run(tmp_path: Path, raise_by: list[str]) -> None:
    """Past the ended check, the resume proceeds (here to resume_policy, which finds no
    Redis state in this hand-made folder: the refusal a real resume would get past)."""
    run_dir = _ended(tmp_path / "run")
    result = CliRunner().invoke(app, ["run", "--resume", str(run_dir), *raise_by])
    said = " ".join(result.output.split())
    assert result.exit_code == 2, said
    assert "already ended" not in said and "no Redis state" in said
    # the way out is named (was "start a new run instead", which the folder then refused)
    assert f"start a new run with another --run-dir, or delete {run_dir} first" in said


def test_each_budget_the_run_reached_must_be_raised(tmp_path: Path) -> None:
    run_dir = _ended(tmp_path / "run", "wall_clock", steps=2, grpo_s=240.0)
    config = load_run_config(TINY, environ={})
    ended = ended_run(config, run_dir)
    assert ended is not None and len(ended.reached) == 1
    assert ended.reached[0].startswith("budget.wall_clock_s 240 (--set budget.wall_clock_s=S")
    assert ended_run(config, run_dir, steps=10) is not None  # the clock is still spent
    longer = load_run_config(TINY, {"budget.wall_clock_s": 600}, environ={})
    assert ended_run(longer, run_dir) is None  # steps 3 > 2 done, 600 s > 240 s spent
    exhausted = _ended(tmp_path / "dry", "exhausted")
    assert ended_run(load_run_config(TINY, {"budget.steps": 9}, environ={}), exhausted)
    for unfinished in ("interrupted", "error"):
        assert ended_run(config, _ended(tmp_path / unfinished, unfinished)) is None
    (run_dir / "summary.json").unlink()  # killed: no summary
    assert ended_run(config, run_dir) is None


def test_a_run_that_stopped_on_its_token_budget_ended_when_no_job_fits(tmp_path: Path) -> None:
    # The driver stops once no further job fits: below the budget by less than one job's
    # worst case (e2e-tiny: 4·24·2 = 192 tokens), not at or above it.
    run_dir = _ended(tmp_path / "run", "generated_tokens", steps=1, tokens=250)
    at = load_run_config(TINY, {"budget.generated_tokens": 300, "budget.steps": 9}, environ={})
    ended = ended_run(at, run_dir)
    assert ended is not None and len(ended.reached) == 1
    assert ended.reached[0].startswith("budget.generated_tokens 300 (--set ")
    assert "N >= 442" in ended.reached[0]
    just_short = load_run_config(
        TINY, {"budget.generated_tokens": 441, "budget.steps": 9}, environ={}
    )
    assert ended_run(just_short, run_dir) is not None  # 191 left: still no job fits
    room = load_run_config(TINY, {"budget.generated_tokens": 442, "budget.steps": 9}, environ={})
    assert ended_run(room, run_dir) is None  # one more job fits: resume
    unbounded = load_run_config(TINY, {"budget.steps": 9}, environ={})
    assert ended_run(unbounded, run_dir) is None


def test_the_python_api_returns_the_summary_without_starting(tmp_path: Path) -> None:
    run_dir = _ended(tmp_path / "run")
    before = _files(run_dir)
    said: list[str] = []
    summary = run_local(
        load_run_config(run_dir / "config.yaml", environ={}), run_dir, resume=True,
        log_fn=said.append,
    )  # fmt: skip
    assert summary.stop_reason == "steps" and summary.steps == 3
    assert len(said) == 1 and "already ended" in said[0]
    assert _files(run_dir) == before
