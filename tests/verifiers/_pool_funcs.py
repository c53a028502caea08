"""Module-level functions run inside WorkerPool workers by the SDK tests."""

from __future__ import annotations

import os
import time


def add(a: int, b: int) -> int:
    """Return a + b."""
    return a + b


def sleep_then(seconds: float, value: int) -> int:
    """Sleep ``seconds`` then return ``value``."""
    time.sleep(seconds)
    return value


def allocate(mebibytes: int) -> int:
    """Allocate ``mebibytes`` MiB and return its length."""
    return len(bytearray(mebibytes * 1024 * 1024))


def die() -> None:
    """Kill the worker process abruptly."""
    os._exit(3)


def fail(message: str) -> None:
    """Raise ValueError(message)."""
    raise ValueError(message)


def pid() -> int:
    """Return the worker's process id."""
    return os.getpid()


def act(action: str, value: int) -> int | tuple[int, int]:
    """One function for mixed batches: ``"ok"`` returns ``(value, pid)``; ``"sleep"`` sleeps
    ``value`` s; ``"die"`` kills the worker; ``"fail"`` raises ValueError; ``"allocate"``
    allocates ``value`` MiB."""
    if action == "sleep":
        return sleep_then(value, value)
    if action == "die":
        die()
    if action == "fail":
        fail(f"item {value}")
    if action == "allocate":
        return allocate(value)
    return value, os.getpid()
