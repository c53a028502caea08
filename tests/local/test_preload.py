"""Services forked from the preload interpreter (``grpo.local.preload``).

The supervisor runs in a subprocess that makes itself a subreaper, as ``grpo run`` does (a
subreaper pytest process would adopt every other test's orphans). There it starts the
runtime's echo service twice over the preload interpreter, SIGKILLs it (restart on the same
port), and drains; the forked services must be its own children (exit codes read), their
process groups killable, the preloaded modules already imported, and nothing left behind.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from grpo.local.preload import ForkedProcess, is_subreaper

TESTS = Path(__file__).resolve().parents[1]

SCRIPT = r"""
import json, os, signal, sys, time
from pathlib import Path
from grpo.local.processes import ProcessSupervisor, RestartPolicy, become_subreaper
from grpo.local.preload import ForkedProcess

assert become_subreaper()
tmp, config = Path(sys.argv[1]), Path(sys.argv[2])
sup = ProcessSupervisor(tmp / "logs", env={"PYTHONPATH": sys.argv[3]}, preload=True)
policy = RestartPolicy(max_restarts=3, backoff_initial_s=0.0, backoff_max_s=0.0)
out = {}
try:
    first = sup.start("echo", config, service="echo_service:SERVICE")
    sup.wait_healthy(["echo"], 120)
    out["forked"] = isinstance(first.popen, ForkedProcess)
    out["parent_is_us"] = int(open(f"/proc/{first.popen.pid}/stat").read().rsplit(")", 1)[1]
                              .split()[1]) == os.getpid()
    out["own_group"] = os.getpgid(first.popen.pid) == first.popen.pid
    out["title"] = open(f"/proc/{first.popen.pid}/cmdline", "rb").read().decode()
    port, pid = first.port, first.popen.pid
    sup.kill("echo")
    out["code"] = first.popen.returncode
    assert sup.supervise(policy) == ["echo"]
    again = sup.services["echo"]
    sup.wait_healthy(["echo"], 120)
    out["restarted"] = again.port == port and again.popen.pid != pid
    out["forked_again"] = isinstance(again.popen, ForkedProcess)
finally:
    out["codes"] = sup.stop_all(5.0)
    out["orphans"] = sup.reap_orphans()
print(json.dumps(out))
"""


@pytest.mark.skipif(sys.platform != "linux", reason="subreaper and prctl are Linux only")
def test_services_fork_from_the_preload_interpreter_and_stay_supervised(tmp_path: Path) -> None:
    config = tmp_path / "echo.yaml"
    config.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "metrics_port": -1}}))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), str(config), str(TESTS / "runtime")],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["forked"] and out["forked_again"], (tmp_path / "logs" / "preload.log").read_text()
    assert out["parent_is_us"] and out["own_group"]
    assert f"-m grpo serve echo_service:SERVICE --config {config} --port" in out["title"]
    assert out["code"] == -9  # SIGKILL, read by waitpid as for a Popen child
    assert out["restarted"]
    assert list(out["codes"]) == ["echo"] and out["codes"]["echo"] == 0  # drained by SIGTERM
    assert out["orphans"] == []
    assert (tmp_path / "logs" / "echo.log").read_text().count('"msg": "server started"') == 2


FALLBACK = r"""
import json, sys
from pathlib import Path
from grpo.local.processes import ProcessSupervisor, become_subreaper

assert become_subreaper()
tmp, config = Path(sys.argv[1]), Path(sys.argv[2])
sup = ProcessSupervisor(tmp / "logs", env={"PYTHONPATH": sys.argv[3]}, preload=True)
try:
    proc = sup.start("echo", config, service="echo_service:SERVICE")
    sup.wait_healthy(["echo"], 120)
    again = sup.start("echo-2", config, service="echo_service:SERVICE")
    sup.wait_healthy(["echo-2"], 120)
    out = {"types": [type(p.popen).__name__ for p in (proc, again)]}
finally:
    out["codes"] = sup.stop_all(5.0)
print(json.dumps(out))
"""


def test_a_failing_preload_interpreter_falls_back_to_fresh_processes(tmp_path: Path) -> None:
    # A module the preload interpreter imports fails (here: a broken transformers on the
    # path); the echo service does not need it, so fresh processes serve.
    broken = tmp_path / "broken"
    (broken / "transformers").mkdir(parents=True)
    (broken / "transformers" / "__init__.py").write_text("raise ImportError('broken on purpose')\n")
    config = tmp_path / "echo.yaml"
    config.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "metrics_port": -1}}))
    path = os.pathsep.join([str(broken), str(TESTS / "runtime")])
    done = subprocess.run(
        [sys.executable, "-c", FALLBACK, str(tmp_path), str(config), path],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["types"] == ["Popen", "Popen"] and set(out["codes"].values()) == {0}
    assert "broken on purpose" in (tmp_path / "logs" / "preload.log").read_text()
    assert "preloaded start failed, starting fresh processes" in done.stderr


def test_without_a_subreaper_services_start_as_fresh_processes(tmp_path: Path) -> None:
    from grpo.local.processes import ProcessSupervisor

    assert not is_subreaper()  # pytest is not one (the test above runs in a subprocess)
    config = tmp_path / "echo.yaml"
    config.write_text(yaml.safe_dump({"server": {"host": "127.0.0.1", "metrics_port": -1}}))
    sup = ProcessSupervisor(
        tmp_path / "logs", env={"PYTHONPATH": str(TESTS / "runtime")}, preload=True
    )
    try:
        proc = sup.start("echo", config, service="echo_service:SERVICE")
        sup.wait_healthy(["echo"], 120)
        assert isinstance(proc.popen, subprocess.Popen)
        assert not isinstance(proc.popen, ForkedProcess)
    finally:
        sup.stop_all(5.0)
    assert not (tmp_path / "logs" / "preload.log").exists()


def test_forked_process_reports_exit_codes_like_popen() -> None:
    import signal

    for argv, want in (
        (["-c", "raise SystemExit(3)"], 3),
        (["-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"], -signal.SIGTERM),
    ):
        pid = os.spawnv(os.P_NOWAIT, sys.executable, [sys.executable, *argv])
        proc = ForkedProcess(pid)
        assert proc.wait(timeout=60) == want and proc.poll() == want
    nap = [sys.executable, "-c", "import time; time.sleep(30)"]
    sleeper = ForkedProcess(os.spawnv(os.P_NOWAIT, sys.executable, nap))
    with pytest.raises(subprocess.TimeoutExpired):
        sleeper.wait(timeout=0.2)
    assert sleeper.poll() is None
    os.kill(sleeper.pid, 9)
    assert sleeper.wait(timeout=30) == -9
