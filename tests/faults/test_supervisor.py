"""The supervisor of ``grpo run`` on a real ``grpo serve`` process (the runtime's echo service).

A SIGKILLed service is restarted with the same config on the same port and serves again; the
death is recorded with its cause; one death more than ``max_restarts`` within the window fails
with a summary; the drain stops services in reverse start order.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import yaml

from grpo.local.processes import ProcessSupervisor, RestartPolicy, ServiceFailedError

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
