"""Ports for a local run's processes: outside the kernel's ephemeral range, never twice."""

from __future__ import annotations

import socket
from pathlib import Path

from grpo.services.runtime.ports import ephemeral_range, free_port


def test_ports_are_free_distinct_and_below_the_ephemeral_range() -> None:
    low, high = ephemeral_range()
    assert 1024 < low <= high
    ports = [free_port() for _ in range(50)]
    assert len(set(ports)) == 50  # none handed out twice, though none was bound meanwhile
    for port in ports:
        assert 10_000 <= port < low, port
    with socket.socket() as sock:  # free: this process can bind it
        sock.bind(("127.0.0.1", ports[0]))


def test_a_port_in_use_is_never_chosen(monkeypatch) -> None:
    from grpo.services.runtime import ports

    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    busy = taken.getsockname()[1]
    with socket.socket() as probe:  # a port free a moment ago, for the pick after the busy ones
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    picks = iter([busy, busy, free])
    monkeypatch.setattr(ports, "ephemeral_range", lambda: (65535, 65535))
    monkeypatch.setattr(ports._random, "randint", lambda a, b: next(picks))
    try:
        assert free_port() not in (busy,)
    finally:
        taken.close()


def test_the_range_file_is_read_and_a_missing_one_gives_linux_defaults(tmp_path: Path) -> None:
    f = tmp_path / "ip_local_port_range"
    f.write_text("40000\t50000\n")
    assert ephemeral_range(f) == (40000, 50000)
    assert ephemeral_range(tmp_path / "missing") == (32768, 60999)
