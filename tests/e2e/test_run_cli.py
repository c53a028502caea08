"""`grpo run` as a user starts it from a terminal: Ctrl-C mid-GRPO (SIGINT to the whole
foreground process group, then SIGTERM to it) stops every process, the embedded Redis
included, still writes the summary, and exits 130."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

from helpers import process_alive, wait_until

from grpo.local.processes import orphans
from grpo.services.driver.driver import NO_SIGNAL_GROUPS, RunDriver
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import assembler_pb2

REPO = Path(__file__).resolve().parents[2]


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except OSError:
        return ""


def test_ctrl_c_to_the_process_group_stops_services_and_the_embedded_redis(
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}  # embedded Redis
    env["OMP_NUM_THREADS"] = "1"
    run_dir = tmp_path / "run"
    cmd = [
        sys.executable, "-m", "grpo.cli", "run", str(REPO / "configs" / "e2e-tiny.yaml"),
        "--run-dir", str(run_dir), "--steps", "10000",
        "--set", "model.sft.steps=5", "--set", "budget.wall_clock_s=600",
    ]  # fmt: skip
    service_pids: list[int] = []
    proc = subprocess.Popen(  # its own process group, as a terminal's foreground job
        cmd,
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:

        def redis_once_training() -> list[int]:
            assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
            metrics = run_dir / "metrics.jsonl"
            if not (metrics.is_file() and metrics.read_text().strip()):
                return []  # GRPO is not under way yet
            return [pid for pid in orphans(proc.pid) if "valkey" in _cmdline(pid)]

        wait_until(redis_once_training, timeout_s=240, interval_s=0.5,
                   what="a learner step and the embedded Redis")  # fmt: skip
        service_pids = orphans(proc.pid)
        # Ctrl-C reaches every process of the group: before the embedded Redis had its own
        # session it shut down at once, the driver's final evaluation failed on the lost
        # Redis and grpo run exited 1 without a summary.
        os.killpg(proc.pid, signal.SIGINT)
        wait_until(  # the shutdown is under way: a service has stopped (or grpo run is done)
            lambda: proc.poll() is not None or not all(map(process_alive, service_pids)),
            timeout_s=120,
            what="grpo run to start stopping its services",
        )
        with contextlib.suppress(ProcessLookupError):  # a second one must not cut it short
            os.killpg(proc.pid, signal.SIGTERM)
        out, _ = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        left = [pid for pid in service_pids if process_alive(pid)]
        for pid in left:  # never leak them into the rest of the session
            os.kill(pid, signal.SIGKILL)
    assert left == [], f"processes left after SIGTERM: {left}"
    assert proc.returncode == 130, out
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["stop_reason"] == "interrupted"
    assert summary["leftover_processes"] == []
    assert summary["steps"] >= 1
    # The driver paused the learner before its final evaluation: that evaluation scored the
    # last step (until SetPaused the learner went on, here from step 5 to 19).
    trained = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert summary["last_published_step"] == max(int(m["step"]) for m in trained)
    assert summary["last_published_step"] == summary["final_policy_step"], out
    assert "went on to step" not in out


def test_no_signal_warning_once_enough_groups_close_without_a_kept_one(
    tmp_path: Path, redis_client: Any, redis_namespace: str
) -> None:
    logged: list[str] = []
    cfg = load_run_config(REPO / "configs" / "e2e-tiny.yaml")
    pipeline = RunDriver(
        cfg,
        load_run_tasks(cfg),
        streams=Streams(redis_client),
        names=StreamNames(redis_namespace),
        endpoints=None,  # type: ignore[arg-type]  # the warning needs no service
        out_dir=tmp_path / "run",
        log_fn=logged.append,
    )
    few = assembler_pb2.AssemblerStats(groups_rejected_all_wrong=NO_SIGNAL_GROUPS - 1)
    assert not pipeline.warn_if_no_signal(few)
    kept = assembler_pb2.AssemblerStats(groups_rejected_all_wrong=500, groups_accepted=1)
    assert not pipeline.warn_if_no_signal(kept)
    assert logged == []
    none_kept = assembler_pb2.AssemblerStats(
        groups_rejected_all_wrong=NO_SIGNAL_GROUPS - 10, groups_rejected_all_correct=10
    )
    assert pipeline.warn_if_no_signal(none_kept)
    assert len(logged) == 1 and "mostly all wrong" in logged[0]
    assert f"{NO_SIGNAL_GROUPS - 10} all wrong, 10 all correct" in logged[0]
    # Dynamic sampling off: every group is accepted, none has a spread.
    logged.clear()
    pipeline = RunDriver(
        cfg,
        load_run_tasks(cfg),
        streams=Streams(redis_client),
        names=StreamNames(redis_namespace),
        endpoints=None,  # type: ignore[arg-type]
        out_dir=tmp_path / "run-off",
        log_fn=logged.append,
    )
    flat = {"groups_accepted": NO_SIGNAL_GROUPS, "groups_zero_variance": NO_SIGNAL_GROUPS}
    assert not pipeline.warn_if_no_signal(
        assembler_pb2.AssemblerStats(**{**flat, "groups_accepted": NO_SIGNAL_GROUPS + 1})
    )
    assert pipeline.warn_if_no_signal(assembler_pb2.AssemblerStats(**flat))
    assert len(logged) == 1 and "trained on with dynamic sampling off" in logged[0]


def test_a_run_dir_that_is_a_file_or_holds_a_run_is_refused_before_anything_starts(
    tmp_path: Path,
) -> None:
    from typer.testing import CliRunner

    from grpo.cli import app

    config = str(REPO / "configs" / "e2e-tiny.yaml")
    runner = CliRunner()
    afile = tmp_path / "afile"
    afile.write_text("x")
    for target in (afile, afile / "sub"):
        result = runner.invoke(app, ["run", config, "--run-dir", str(target)])
        assert result.exit_code == 2, result.output
        assert f"{afile} is not a folder" in " ".join(result.output.split())
    used = tmp_path / "used"
    used.mkdir()
    (used / "config.yaml").write_text("name: earlier\n")  # what a run writes first
    result = runner.invoke(app, ["run", config, "--run-dir", str(used)])
    said = " ".join(result.output.split())  # rich wraps long lines
    assert result.exit_code == 2, said
    assert "already holds a run" in said and f"grpo run --resume {used}" in said
    assert (used / "config.yaml").read_text() == "name: earlier\n"  # untouched
    result = runner.invoke(app, ["run"])
    assert result.exit_code == 2 and "neither was given" in " ".join(result.output.split())
