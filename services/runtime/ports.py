"""Loopback ports for the processes a local run starts (services, the embedded Redis).

A port is chosen here, handed to a process on its command line, and bound by that process a
moment later. A port the kernel picks (``bind(("127.0.0.1", 0))``) comes from the ephemeral
range (``/proc/sys/net/ipv4/ip_local_port_range``, 32768–60999 by default), the range every
outgoing connection on the machine also draws its local port from: in that moment a gRPC or
Redis client of another process can take it, and the service then fails to bind ("Address
already in use"; seen on this machine while a test session ran beside a run). So
:func:`free_port` picks below the ephemeral range, where the kernel never hands out a port by
itself, checks that nothing listens there, and never returns a port twice in one process.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

__all__ = ["ephemeral_range", "free_port"]

_LOWEST = 10_000
"""The lowest port chosen (below: well-known and registered services)."""
_RANGE_FILE = Path("/proc/sys/net/ipv4/ip_local_port_range")
_handed_out: set[int] = set()
_lock = threading.Lock()
_random = random.SystemRandom()


def ephemeral_range(path: Path = _RANGE_FILE) -> tuple[int, int]:
    """The kernel's ephemeral port range ``(low, high)``, inclusive; ``(32768, 60999)``
    (Linux's default) when ``path`` cannot be read."""
    try:
        low, high = (int(x) for x in path.read_text().split())
    except (OSError, ValueError):
        return 32768, 60999
    return low, high


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        try:
            sock.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_port(attempts: int = 200) -> int:
    """A TCP port on 127.0.0.1 that nothing was bound to a moment ago, outside the kernel's
    ephemeral range (module docstring) and not returned before by this process.

    Falls back to a kernel-chosen port when the range below the ephemeral one is empty or
    ``attempts`` random picks in it were all taken.
    """
    low, _ = ephemeral_range()
    with _lock:
        if low - 1 > _LOWEST:
            for _ in range(attempts):
                port = _random.randint(_LOWEST, low - 1)
                if port not in _handed_out and _bindable(port):
                    _handed_out.add(port)
                    return port
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            port = int(sock.getsockname()[1])
        _handed_out.add(port)
        return port
