"""``grpo score`` never loses results: SIGTERM mid-run, a verifier killed mid-run, a verifier
briefly away; ``--resume`` completes the output with no duplicate and no gap."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_for_port_file, wait_until

from grpo.cli_score import EXIT_INTERRUPTED, ScoreJob, score_file
from grpo.errors import UnavailableError

HERE = Path(__file__).resolve().parent
N = 60


def _input(tmp_path: Path) -> Path:
    src = tmp_path / "in.jsonl"
    rows = [{"id": f"q{i}", "response": str(i % 7), "gold": str(i % 5)} for i in range(N)]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return src


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(HERE), "OMP_NUM_THREADS": "1", "COLUMNS": "200"}


def _complete_rows(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines(keepends=True)
            if line.endswith("\n")]  # fmt: skip


def _check_rows(rows: list[dict[str, Any]], *, complete: bool) -> None:
    ids = [r["id"] for r in rows]
    assert len(ids) == len(set(ids)), "duplicate rows"
    for r in rows:
        i = int(r["id"][1:])
        assert r["line"] == i + 1 and r["status"] == "ok"
        assert r["reward"] == float(i % 7 == i % 5), r  # each row is the real verdict
    if complete:
        assert [r["line"] for r in rows] == list(range(1, N + 1))  # no gap, input order


def _score_cmd(src: Path, out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "grpo.cli", "score", "custom", "--service",
            "_paced_verifier:SERVICE", "--task-type", "paced", "-i", str(src), "-o", str(out),
            "--batch-size", "2", "--workers", "1", *extra]  # fmt: skip


def test_sigterm_mid_run_keeps_every_finished_row_and_resume_completes(tmp_path: Path) -> None:
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    proc = subprocess.Popen(_score_cmd(src, out), env=_env(), stderr=subprocess.PIPE, text=True)
    try:
        wait_until(lambda: len(_complete_rows(out)) >= 10, timeout_s=60, what="10 rows")
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == EXIT_INTERRUPTED, err
    assert "rerun with --resume" in err
    kept = _complete_rows(out)
    assert 10 <= len(kept) < N
    _check_rows(kept, complete=False)
    done = subprocess.run(
        _score_cmd(src, out, "--resume"), env=_env(), capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    _check_rows(_complete_rows(out), complete=True)


@pytest.fixture
def paced_server(tmp_path: Path) -> Iterator[Any]:
    """``start(port=0) -> (process, address)``: ``grpo serve _paced_verifier:SERVICE``."""
    procs: list[subprocess.Popen[bytes]] = []

    def start(port: int = 0) -> tuple[subprocess.Popen[bytes], str]:
        port_file = tmp_path / f"port-{len(procs)}.json"
        proc = subprocess.Popen(
            [sys.executable, "-m", "grpo.cli", "serve", "_paced_verifier:SERVICE", "--port",
             str(port), "--metrics-port", "-1", "--port-file", str(port_file), "--log-text"],
            env=_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        procs.append(proc)
        info = wait_for_port_file(port_file, proc, timeout_s=60)
        assert info is not None, f"the paced verifier exited with {proc.returncode}"
        return proc, f"127.0.0.1:{info['port']}"

    yield start
    for proc in procs:
        proc.kill()
        proc.wait()


def _kill_when(out: Path, rows: int, proc: subprocess.Popen[bytes]) -> threading.Thread:
    def run() -> None:
        wait_until(lambda: len(_complete_rows(out)) >= rows, timeout_s=60, what="rows")
        proc.kill()
        proc.wait()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_verifier_killed_mid_run_keeps_finished_rows_and_says_so(
    tmp_path: Path, paced_server: Any
) -> None:
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    proc, address = paced_server()
    killer = _kill_when(out, 10, proc)
    with pytest.raises(UnavailableError, match=rf"verifier at {address} failed 2 attempts"):
        score_file(ScoreJob("custom", src, out, task_type="paced", endpoint=address, batch_size=2,
                   workers=1, max_attempts=2))  # fmt: skip
    killer.join()
    kept = _complete_rows(out)
    assert 10 <= len(kept) < N
    _check_rows(kept, complete=False)
    _, address = paced_server()
    run = score_file(ScoreJob("custom", src, out, task_type="paced", endpoint=address, batch_size=8,
                     resume=True))  # fmt: skip
    assert run.resumed == len(kept) and run.summary.rows == N
    _check_rows(_complete_rows(out), complete=True)


def test_verifier_briefly_away_is_retried_with_backoff(tmp_path: Path, paced_server: Any) -> None:
    """Killed after 10 rows and back on the same port a moment later: the run rides it out."""
    src, out = _input(tmp_path), tmp_path / "out.jsonl"
    proc, address = paced_server()
    port = int(address.rsplit(":", 1)[1])

    def restart() -> None:
        _kill_when(out, 10, proc).join()
        paced_server(port)

    thread = threading.Thread(target=restart, daemon=True)
    thread.start()
    run = score_file(ScoreJob("custom", src, out, task_type="paced", endpoint=address, batch_size=2,
                     workers=1, max_attempts=8))  # fmt: skip
    thread.join()
    assert proc.returncode is not None  # it really was killed
    assert run.summary.rows == N and run.resumed == 0
    _check_rows(_complete_rows(out), complete=True)
