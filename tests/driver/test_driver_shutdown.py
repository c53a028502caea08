"""``grpo serve driver`` stopped by SIGTERM: the drive thread still evaluates the final policy
and writes the summary; when that fails (or outlasts ``server.grace_s``) ``serve`` raises, so
the process exits non-zero (``grpo serve`` exits 1) instead of 0, and the log says why."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from grpo.errors import InternalError
from grpo.local.cluster import LocalCluster
from grpo.local.processes import ProcessSupervisor
from grpo.services.driver.service import DriverSettings, DriverWorker
from grpo.services.driver.summary import RunSummary
from grpo.services.runtime.accounting import RunAccounting
from grpo.services.runtime.registry import ServiceParts, ServiceSpec, serve
from grpo.services.settings.run import RunConfig
from grpo.v1 import assembler_pb2

HANG_GUARD_S = 60.0  # only a bound on a hang; no assertion is about time
SUMMARY = RunSummary(
    config="t",
    stop_reason="interrupted",
    sft_accuracy=0.5,
    final_accuracy=0.5,
    steps=3,
    final_policy_version=3,
    final_policy_step=3,
    accounting=RunAccounting.from_stats(assembler_pb2.AssemblerStats()),
    grpo_wall_clock_s=1.0,
    wall_clock_s=1.0,
)


class _FakeDriver:
    """Stands in for ``RunDriver``: ``drive`` trains until ``stop_requested``, then runs its
    final step (``final``: return a summary, raise, or never end)."""

    def __init__(self, final: str) -> None:
        self.stop_requested = threading.Event()
        self.driving = threading.Event()
        self.final = final
        self.never = threading.Event()

    def drive(self, *_args: Any, **_kwargs: Any) -> RunSummary:
        self.driving.set()
        self.stop_requested.wait(HANG_GUARD_S)
        if self.final == "raise":
            raise RuntimeError("final evaluation failed: generation backend gone")
        if self.final == "hang":
            self.never.wait(HANG_GUARD_S)
        return SUMMARY


def _settings_dict(tmp_path: Path, grace_s: float) -> dict[str, Any]:
    return {
        "server": {"port": 0, "metrics_port": -1, "grace_s": grace_s},
        "run": {"namespace": "t", "data": {"train_size": 4}},
        "out_dir": str(tmp_path),
        "learner_address": "127.0.0.1:1",
        "assembler_address": "127.0.0.1:1",
        "exit_when_done": False,
    }


def _settings(tmp_path: Path, grace_s: float) -> DriverSettings:
    return DriverSettings.model_validate(_settings_dict(tmp_path, grace_s))


FAILING_DRIVER = ServiceSpec(
    "driver",
    DriverSettings,
    lambda s: ServiceParts([], [DriverWorker(_FakeDriver("raise"), s)]),  # type: ignore[arg-type]
)
"""``grpo serve test_driver_shutdown:FAILING_DRIVER``: a driver whose final evaluation fails."""


def _serve_and_sigterm(driver: _FakeDriver, settings: DriverSettings) -> DriverWorker:
    """Serve a driver worker, SIGTERM this process once it drives, return after serve."""
    worker = DriverWorker(driver, settings)  # type: ignore[arg-type]
    spec = ServiceSpec("driver", DriverSettings, lambda _s: ServiceParts([], [worker]))

    def terminate() -> None:
        if driver.driving.wait(HANG_GUARD_S):
            os.kill(os.getpid(), signal.SIGTERM)  # serve's handler: drain, stop the worker

    threading.Thread(target=terminate, daemon=True).start()
    try:
        serve(spec, settings)
    finally:
        driver.never.set()
    return worker


def test_a_clean_stop_returns_normally(tmp_path: Path) -> None:
    driver = _FakeDriver("summary")
    worker = _serve_and_sigterm(driver, _settings(tmp_path, grace_s=HANG_GUARD_S))
    assert worker.summary == SUMMARY
    assert worker.failure is None


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_drive_failing_while_stopping_makes_serve_fail_and_is_logged(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    driver = _FakeDriver("raise")
    with (
        caplog.at_level(logging.INFO),
        pytest.raises(InternalError, match="final evaluation failed: generation backend gone"),
    ):
        _serve_and_sigterm(driver, _settings(tmp_path, grace_s=HANG_GUARD_S))
    messages = [r.getMessage() for r in caplog.records]
    assert "run driver failed while stopping; no summary written" in messages
    assert not (tmp_path / "summary.json").exists()


def test_a_drive_outlasting_the_grace_makes_serve_fail(tmp_path: Path) -> None:
    driver = _FakeDriver("hang")
    with pytest.raises(InternalError, match=r"did not finish within 0 s of the stop"):
        _serve_and_sigterm(driver, _settings(tmp_path, grace_s=0.2))


def test_grpo_run_sees_the_driver_process_fail_while_stopping(tmp_path: Path) -> None:
    """The real process: ``grpo serve`` exits 1 and ``LocalCluster.stop_driver`` returns it
    (``run_local`` then writes the failure into the summary and exits 1)."""
    config = tmp_path / "driver.yaml"
    config.write_text(yaml.safe_dump(_settings_dict(tmp_path, grace_s=HANG_GUARD_S)))
    cluster = LocalCluster(RunConfig.model_validate({"data": {"train_size": 4}}), tmp_path)
    path = os.pathsep.join([str(Path(__file__).parent), os.environ.get("PYTHONPATH", "")])
    cluster.supervisor = ProcessSupervisor(tmp_path / "logs", env={"PYTHONPATH": path})
    proc = cluster.supervisor.start("driver", config, service="test_driver_shutdown:FAILING_DRIVER")
    try:
        until = time.monotonic() + HANG_GUARD_S
        while "service ready" not in proc.log.read_text() and proc.alive():
            assert time.monotonic() < until, proc.log.read_text()[-2000:]
            time.sleep(0.1)
        assert proc.alive(), proc.log.read_text()[-2000:]
        assert cluster.stop_driver() == 1
    finally:
        cluster.supervisor.stop_all(5.0)
    log_text = proc.log.read_text()
    assert "run driver failed while stopping; no summary written" in log_text
    assert "final evaluation failed: generation backend gone" in log_text
