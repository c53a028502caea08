"""Ctrl-C / SIGTERM on ``grpo score code`` (in-process verifier, batches of infinite loops)
exits at once with 130 and keeps the output file; with no result finished, it says so instead
of hinting at --resume."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grpo.cli_score import EXIT_INTERRUPTED


def _terminal_sigint() -> None:
    """In the child before exec: SIGINT as in a terminal. A test run started in the background
    (``cmd &`` in a script) ignores SIGINT, the child would inherit that, and Python then never
    turns Ctrl-C into KeyboardInterrupt (a CI run went on to score all 6 rows and exit 0)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_interrupt_with_looping_code_exits_at_once_and_keeps_output(
    tmp_path: Path, sig: signal.Signals
) -> None:
    src, out = tmp_path / "loops.jsonl", tmp_path / "out.jsonl"
    rows = [{"id": f"l{i}", "response": "while True: pass", "io_pairs": [["", "1"]]}
            for i in range(6)]  # fmt: skip
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cmd = [sys.executable, "-m", "grpo.cli", "score", "code", "-i", str(src), "-o", str(out),
           "--workers", "2", "--deadline", "300"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "COLUMNS": "200"}
    proc = subprocess.Popen(
        cmd, env=env, stderr=subprocess.PIPE, text=True, preexec_fn=_terminal_sigint
    )
    try:
        deadline = time.monotonic() + 60
        while not out.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.exists(), "the output file exists once scoring starts"
        time.sleep(0.5)
        proc.send_signal(sig)
        sent = time.monotonic()
        _, err = proc.communicate(timeout=30)
        took = time.monotonic() - sent
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert took < 10, f"exited {took:.1f} s after the signal"
    # every item loops until its deadline: nothing finished, so there is nothing to resume
    assert f"interrupted before any result was written to {out}" in err, err
    assert "--resume" not in err
    assert not out.exists() or out.read_text() == ""  # nothing finished: nothing kept
