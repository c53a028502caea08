"""Test helpers every test folder may import (``from helpers import wait_until``).

``tests/conftest.py`` puts this folder on ``sys.path`` (pytest runs with
``--import-mode=importlib``, so test folders are not packages).
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["process_alive", "wait_for_port_file", "wait_until"]

T = TypeVar("T")


def wait_until(
    condition: Callable[[], T],
    *,
    timeout_s: float = 10.0,
    interval_s: float = 0.05,
    what: str = "",
    retry_on: tuple[type[BaseException], ...] = (),
) -> T:
    """Poll ``condition()`` until it returns a truthy value, and return that value.

    The one way tests wait for something to happen (never a bare ``sleep`` as
    synchronisation): the condition is checked at once, then every ``interval_s`` seconds.

    Args:
        condition: called with no argument; any truthy result ends the wait.
        timeout_s: give up after this many seconds (wall clock, monotonic).
        interval_s: seconds between checks.
        what: what is being waited for, quoted in the failure message.
        retry_on: exception types that count as "not yet" (e.g. ``grpc.RpcError`` while a
            server starts); any other exception propagates at once.

    Returns:
        The first truthy value ``condition()`` returned.

    Raises:
        AssertionError: the condition stayed falsy for ``timeout_s`` seconds (the message
            names ``what``, the last value and the last retried exception).
    """
    deadline = time.monotonic() + timeout_s
    last: object = None
    error: BaseException | None = None
    while True:
        try:
            value = condition()
        except retry_on as exc:
            error = exc
        else:
            if value:
                return value
            last, error = value, None
        if time.monotonic() >= deadline:
            detail = f"; last error {error!r}" if error is not None else f"; last value {last!r}"
            raise AssertionError(
                f"timed out after {timeout_s} s waiting for {what or repr(condition)}{detail}"
            )
        time.sleep(interval_s)


def process_alive(pid: int) -> bool:
    """True while process ``pid`` runs; False once it has exited (a zombie counts as exited:
    it runs nothing, and its parent may be the one that has not reaped it yet).

    Reads ``/proc/<pid>/stat`` (Linux), so it works for any process, not only a child.
    """
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_for_port_file(
    path: Path, process: subprocess.Popen[Any], *, timeout_s: float = 60.0
) -> dict[str, Any] | None:
    """What ``grpo serve ... --port-file PATH`` writes once it is SERVING: ``{"port",
    "metrics_port", "pid"}`` (``registry.serve`` writes it atomically, so it is whole once
    it exists); None when ``process`` exits before writing it.

    Raises:
        AssertionError: neither happened within ``timeout_s`` seconds.
    """
    wait_until(
        lambda: path.exists() or process.poll() is not None,
        timeout_s=timeout_s,
        what=f"the port file {path}",
    )
    if not path.exists():
        return None
    info: dict[str, Any] = json.loads(path.read_text())
    return info
