"""What a run that fails leaves behind, the same from ``grpo run`` and the Python API
(``grpo.run`` -> ``grpo.local.run.run_local``): a refusal before the run started (its data,
verifiers or folder) leaves nothing (no folder); a failure after its folder was written
leaves the folder with a ``summary.json`` that names the failure."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from grpo import load_run_config, run
from grpo.errors import GrpoError
from grpo.local.rundir import RunRefusedError

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "e2e-tiny.yaml"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _cli(run_dir: Path, overrides: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "grpo.cli", "run", str(TINY), "--run-dir", str(run_dir)]
    for key, value in overrides.items():
        cmd += ["--set", f"{key}={json.dumps(value) if isinstance(value, dict) else value}"]
    env = {k: v for k, v in os.environ.items() if k != "REDIS_URL"}
    return subprocess.run(cmd, cwd=REPO, env={**env, "OMP_NUM_THREADS": "1"},
                          capture_output=True, text=True, timeout=180)  # fmt: skip


BEFORE_START = {
    "a dead verifier": {"verifiers.outcome": f"127.0.0.1:{_closed_port()}"},
    "a dead Redis": {"redis_url": f"redis://127.0.0.1:{_closed_port()}/0"},
    "a missing dataset": {
        "data.source": "jsonl",
        "data.dataset": {
            "path": "/nonexistent/train.jsonl",
            "prompt_field": "q",
            "gold_field": "a",
            "task_type": "math",
        },
    },
}


@pytest.mark.parametrize("why", sorted(BEFORE_START))
def test_a_refusal_before_start_leaves_nothing_from_the_api_as_from_the_cli(
    tmp_path: Path, why: str
) -> None:
    overrides = BEFORE_START[why]
    config = load_run_config(TINY, overrides)
    with pytest.raises(GrpoError):
        run(config, tmp_path / "api")
    assert not (tmp_path / "api").exists()  # was: the folder with run.lock
    done = _cli(tmp_path / "cli", overrides)
    assert done.returncode == 2, done.stderr
    assert not (tmp_path / "cli").exists()


def test_the_api_refuses_a_folder_that_holds_a_run_as_the_cli_does(tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "config.yaml").write_text("name: earlier\n")
    with pytest.raises(RunRefusedError, match="already holds a run"):
        run(load_run_config(TINY), used)
    assert (used / "config.yaml").read_text() == "name: earlier\n"  # untouched
    assert sorted(p.name for p in used.iterdir()) == ["config.yaml", "run.lock"]


def test_a_failure_after_start_leaves_the_folder_with_its_summary(tmp_path: Path) -> None:
    """A policy whose weights are damaged passes the checks (its tokenizer reads) and fails
    in preparing the policy (SFT loads it), after the run's folder was written."""
    from grpo.model import init_tiny_model

    damaged = init_tiny_model(tmp_path / "damaged", seed=0, hidden=32, layers=1)
    (Path(damaged) / "model.safetensors").write_bytes(b"garbage")
    overrides = {"model.path": str(damaged)}
    with pytest.raises(GrpoError, match="preparing the policy"):
        run(load_run_config(TINY, overrides), tmp_path / "api")
    done = _cli(tmp_path / "cli", overrides)
    assert done.returncode == 1, done.stdout[-2000:] + done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    for folder in (tmp_path / "api", tmp_path / "cli"):
        summary = json.loads((folder / "summary.json").read_text())
        assert summary["stop_reason"] == "error", folder
        assert "preparing the policy (model, SFT) failed: SafetensorError" in summary["failure"]
        assert (folder / "config.yaml").is_file() and (folder / "run.json").is_file()
