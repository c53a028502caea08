"""The shared test helpers behave as their docstrings say."""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import process_alive, wait_for_port_file, wait_until


def test_wait_until_returns_the_first_truthy_value() -> None:
    counter = itertools.count()
    assert wait_until(lambda: next(counter) >= 3 and "done", interval_s=0.001) == "done"


def test_wait_until_fails_with_what_and_the_last_value() -> None:
    with pytest.raises(AssertionError, match=r"the answer; last value 0"):
        wait_until(lambda: 0, timeout_s=0.05, interval_s=0.01, what="the answer")


def test_wait_until_retries_only_the_named_exceptions() -> None:
    calls = itertools.count()

    def flaky() -> bool:
        if next(calls) < 2:
            raise ConnectionError("not yet")
        return True

    assert wait_until(flaky, interval_s=0.001, retry_on=(ConnectionError,))
    with pytest.raises(ValueError):
        wait_until(lambda: int("x"), retry_on=(ConnectionError,))

    def down() -> bool:
        raise ConnectionError("refused")

    with pytest.raises(AssertionError, match="ConnectionError"):
        wait_until(down, timeout_s=0.05, interval_s=0.01, retry_on=(ConnectionError,))


def test_process_alive_until_it_exits_zombie_included() -> None:
    assert process_alive(os.getpid())
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                             stdin=subprocess.PIPE)  # fmt: skip
    assert process_alive(child.pid)
    assert child.stdin is not None
    child.stdin.close()  # it exits; unreaped it is a zombie, which is not alive
    wait_until(lambda: not process_alive(child.pid), what="the child to exit")
    assert child.wait(10) == 0


def test_wait_for_port_file_reads_it_or_sees_the_process_exit(tmp_path: Path) -> None:
    path = tmp_path / "port.json"
    writer = (
        "import json, pathlib, sys; pathlib.Path(sys.argv[1]).write_text("
        "json.dumps({'port': 5, 'metrics_port': 6, 'pid': 0})); sys.stdin.read()"
    )
    proc = subprocess.Popen([sys.executable, "-c", writer, str(path)], stdin=subprocess.PIPE)
    try:
        assert wait_for_port_file(path, proc) == {"port": 5, "metrics_port": 6, "pid": 0}
    finally:
        proc.kill()
        proc.wait()
    quitter = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    assert wait_for_port_file(tmp_path / "never.json", quitter) is None
    assert quitter.returncode == 3
    sleeper = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"],
                               stdin=subprocess.PIPE)  # fmt: skip
    try:
        with pytest.raises(AssertionError, match=r"never\.json"):
            wait_for_port_file(tmp_path / "never.json", sleeper, timeout_s=0.2)
    finally:
        sleeper.kill()
        sleeper.wait()
    assert json.loads(path.read_text())["port"] == 5
