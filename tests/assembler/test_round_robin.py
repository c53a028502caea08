"""Verifier load spread per call: 3 verifier processes behind one DNS name (issue 13, item 5).

The three servers listen on 127.0.0.1, 127.0.0.2 and 127.0.0.3 (all loopback) at one port; the
client runs under bubblewrap with a private /etc/hosts in which ``verifiers.test`` has those
three addresses, as a headless Service's DNS name has one address per ready pod. Through the
target ``dns:///verifiers.test:PORT`` (round_robin) every server must get calls; after one
server is SIGKILLed every call still succeeds, on the two left.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
HOSTS = ("127.0.0.1", "127.0.0.2", "127.0.0.3")
CALLS = 30


def _port_free_on_all() -> int:
    for _ in range(50):
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            port = int(probe.getsockname()[1])
        try:
            for host in HOSTS[1:]:
                with socket.socket() as other:
                    other.bind((host, port))
        except OSError:
            continue
        return port
    raise AssertionError("no port free on all three loopback addresses")


def test_calls_spread_over_every_pod_of_one_name_and_survive_a_kill(tmp_path: Path) -> None:
    bwrap = shutil.which("bwrap")
    assert bwrap is not None, "bubblewrap is required (make install puts it there)"
    port = _port_free_on_all()
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    servers = [
        subprocess.Popen(
            [sys.executable, str(HERE / "_rr_parts.py"), "server", host, str(port), f"pod-{i}"],
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )
        for i, host in enumerate(HOSTS)
    ]
    hosts = tmp_path / "hosts"
    hosts.write_text("127.0.0.1 localhost\n" + "".join(f"{h} verifiers.test\n" for h in HOSTS))
    client = None
    try:
        for server in servers:
            assert server.stdout is not None and server.stdout.readline().strip() == "serving"
        client = subprocess.Popen(
            [bwrap, "--dev-bind", "/", "/", "--bind", str(hosts), "/etc/hosts", "--die-with-parent",
             sys.executable, str(HERE / "_rr_parts.py"), "client",
             f"dns:///verifiers.test:{port}", str(CALLS)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env, text=True,
        )  # fmt: skip
        assert client.stdout is not None and client.stdin is not None
        first = json.loads(client.stdout.readline())
        assert sorted(first) == ["pod-0", "pod-1", "pod-2"], first  # every pod got calls
        assert sum(first.values()) == CALLS and min(first.values()) >= CALLS // 6, first
        servers[1].send_signal(signal.SIGKILL)
        servers[1].wait(10)
        client.stdin.write("go\n")
        client.stdin.flush()
        second = json.loads(client.stdout.readline())
        assert second.get("failed", 0) == 0, second  # the kill cost no call
        assert sorted(second) == ["pod-0", "pod-2"], second
        assert client.wait(30) == 0
    finally:
        for proc in [*servers, *([client] if client else [])]:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
