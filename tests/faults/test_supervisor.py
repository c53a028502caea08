"""The supervisor of ``grpo run`` on a real ``grpo serve`` process (the runtime's echo service).

A SIGKILLed service is restarted with the same config on the same port and serves again; the
death is recorded with its cause; one death more than ``max_restarts`` within the window fails
with a summary; the drain stops services in reverse start order. Liveness by progress: a
service stopped (SIGSTOP) or whose loop stopped advancing is killed after ``stall_s`` and
restarted, its death saying it stalled. A deterministic failure (the same error twice in a
row: a full disk) is not restarted again, and the error names its cause.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
import yaml

from grpo.local.processes import (
    ProcessSupervisor,
    RestartPolicy,
    ServiceFailedError,
    last_error,
    named_cause,
)

ECHO = "echo_service:SERVICE"
TESTS = Path(__file__).resolve().parents[1]


def test_restart_same_port_then_give_up_with_a_summary(tmp_path: Path) -> None:
    config = tmp_path / "echo.yaml"
    config.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "metrics_port": -1}}))
    sup = ProcessSupervisor(
        tmp_path / "logs", env={"PYTHONPATH": os.pathsep.join([str(TESTS / "runtime")])}
    )
    policy = RestartPolicy(max_restarts=1, window_s=600, backoff_initial_s=0.0, backoff_max_s=0.0)
    lines: list[str] = []
    try:
        first = sup.start("echo", config, service=ECHO)
        sup.wait_healthy(["echo"], 60)
        port, pid = first.port, first.popen.pid
        assert sup.supervise(policy, say=lines.append) == []  # alive: nothing to do
        sup.kill("echo")
        assert sup.supervise(policy, say=lines.append) == ["echo"]
        again = sup.services["echo"]
        assert again.port == port and again.popen.pid != pid and again.config == config
        sup.wait_healthy(["echo"], 60)  # it serves again, on the same port
        assert sup.restarts == {"echo": 1}
        assert sup.deaths[0].reason == "killed by SIGKILL"
        assert any("restarted on port" in line for line in lines)
        os.killpg(again.popen.pid, signal.SIGKILL)
        again.popen.wait()
        with pytest.raises(ServiceFailedError, match=r"died 2 times .* giving up"):
            sup.supervise(policy, say=lines.append)
    finally:
        codes = sup.stop_all(5.0)
        assert sup.reap_orphans() == []
    assert list(codes) == ["echo"]


def test_a_restart_backoff_whose_max_is_below_its_start_is_rejected() -> None:
    with pytest.raises(ValueError, match="backoff_max_s"):
        RestartPolicy(backoff_initial_s=5.0, backoff_max_s=1.0)


def _echo(tmp_path: Path, **settings: object) -> tuple[ProcessSupervisor, Path]:
    config = tmp_path / "echo.yaml"
    server = {"host": "127.0.0.1", "metrics_port": -1, "grace_s": 1.0}
    server.update(settings.pop("server", {}))  # type: ignore[arg-type]
    config.write_text(yaml.safe_dump({"server": server, **settings}))
    sup = ProcessSupervisor(
        tmp_path / "logs", env={"PYTHONPATH": os.pathsep.join([str(TESTS / "runtime")])}
    )
    return sup, config


def _supervise_until(sup: ProcessSupervisor, policy: RestartPolicy, done: object,
                     lines: list[str], timeout_s: float = 60.0) -> None:  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, lines
        sup.supervise(policy, say=lines.append)
        time.sleep(0.2)


def test_a_stopped_service_is_killed_after_stall_s_and_restarted(tmp_path: Path) -> None:
    sup, config = _echo(tmp_path)
    policy = RestartPolicy(stall_s=3.0, backoff_initial_s=0.0, backoff_max_s=0.0)
    lines: list[str] = []
    try:
        first = sup.start("echo", config, service=ECHO)
        sup.wait_healthy(["echo"], 60)
        _supervise_until(sup, policy, lambda: sup.health.answered("echo"), lines)
        os.killpg(first.popen.pid, signal.SIGSTOP)  # alive, its port open, answering nothing
        _supervise_until(sup, policy, lambda: sup.restarts.get("echo"), lines)
        assert any("made no progress" in line for line in lines), lines  # named first
        assert any("stalled" in line and "killing it" in line for line in lines), lines
        assert sup.deaths[0].reason.startswith("stalled: no progress for"), sup.deaths
        assert sup.stalls and sup.stalls[0][0] == "echo" and sup.stalls[0][1] >= 3.0
        sup.wait_healthy(["echo"], 60)  # the new process serves on the same port
        assert sup.services["echo"].popen.pid != first.popen.pid
    finally:
        sup.stop_all(5.0)
        sup.reap_orphans()


def test_a_wedged_loop_turns_health_not_serving_and_is_restarted(tmp_path: Path) -> None:
    sup, config = _echo(tmp_path, wedge_after_s=1.0, server={"stall_s": 1.0})
    policy = RestartPolicy(stall_s=3.0, backoff_initial_s=0.0, backoff_max_s=0.0)
    lines: list[str] = []
    try:
        sup.start("echo", config, service=ECHO)
        sup.wait_healthy(["echo"], 60)
        _supervise_until(sup, policy, lambda: sup.restarts.get("echo"), lines)
        assert "NOT_SERVING" in sup.deaths[0].reason, sup.deaths
        assert "worker loop stalled" in sup.services["echo"].log.read_text()
    finally:
        sup.stop_all(5.0)
        sup.reap_orphans()


def test_the_same_error_twice_is_a_deterministic_failure_named_by_its_cause(
    tmp_path: Path,
) -> None:
    sup, config = _echo(tmp_path, disk_full_after_s=0.2)
    policy = RestartPolicy(max_restarts=5, backoff_initial_s=0.0, backoff_max_s=0.0)
    lines: list[str] = []
    try:
        sup.start("echo", config, service=ECHO)
        with pytest.raises(ServiceFailedError, match="deterministic") as failed:
            _supervise_until(sup, policy, lambda: False, lines)
        assert sup.restarts == {"echo": 1}  # restarted once, not five times
        assert failed.value.service == "echo"
        death = failed.value.death
        assert death is not None and death.cause == "disk full (ENOSPC)"
        assert "No space left on device" in death.last_error
        assert "[disk full (ENOSPC)]" in str(failed.value)
    finally:
        sup.stop_all(5.0)
        sup.reap_orphans()


def test_the_last_error_of_a_log_and_its_named_cause() -> None:
    log = "\n".join([
        '{"level": "INFO", "msg": "server started"}',
        '{"level": "ERROR", "msg": "learner loop failed; reporting dead", "exc": "Traceback '
        '(most recent call last):\\n  File x\\nOSError: [Errno 28] No space left on device"}',
        '{"level": "INFO", "msg": "service stopped"}',
    ])  # fmt: skip
    assert last_error(log) == "OSError: [Errno 28] No space left on device"
    assert named_cause(last_error(log)) == "disk full (ENOSPC)"
    crash = "Traceback (most recent call last):\n  File x\nValueError: bad\n"
    assert last_error(crash) == "ValueError: bad" and named_cause("ValueError: bad") is None
    oom = "error: learner: redis (learner) out of memory for 121.0 s (> budget 120 s): " \
          "command not allowed when used memory > 'maxmemory'."  # fmt: skip
    assert last_error("x\n" + oom) == oom
    assert named_cause(oom) == "Redis out of memory (maxmemory reached)"
    assert last_error("") == ""
