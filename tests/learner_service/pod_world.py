"""Learner ranks as separate ``grpo serve learner`` processes over loopback (the tests of the
learner that spans pods): a free rendezvous port, a process per rank, its log."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import yaml

__all__ = ["free_port", "serve_learner"]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def serve_learner(config: dict, path: Path, env: dict[str, str]) -> subprocess.Popen:
    """Write ``config`` to ``path`` (YAML) and run ``grpo serve learner`` on it.

    The process gets one torch thread, ``env`` on top of this one's environment, and appends
    its output to ``path`` with the suffix ``.log`` (a restarted rank keeps one log).
    """
    path.write_text(yaml.safe_dump(config))
    log = path.with_suffix(".log").open("a")
    return subprocess.Popen(
        [sys.executable, "-m", "grpo.cli", "serve", "learner", "--config", str(path), "--log-text"],
        env={**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", **env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )
