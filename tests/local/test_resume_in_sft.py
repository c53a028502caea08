"""``grpo run`` stopped (SIGTERM) during SFT: ``grpo run --resume`` continues SFT from its
newest checkpoint, ends with the weights of an uninterrupted SFT (bitwise, on CPU), then
starts GRPO; a finished SFT is never run again (``grpo.local.policy``, ``resume_policy``)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

from grpo.local.policy import SFT_DONE, init_policy, warm_start
from grpo.local.run import resume_policy
from grpo.services.settings.run import load_run_config
from grpo.services.tasks.run_tasks import load_run_tasks

REPO = Path(__file__).resolve().parents[2]
TINY = REPO / "configs" / "e2e-tiny.yaml"
ENV = {**{k: v for k, v in os.environ.items() if k != "REDIS_URL"}, "OMP_NUM_THREADS": "1"}


def _grpo(*args: str) -> list[str]:
    return [sys.executable, "-m", "grpo.cli", "run", *args]


def test_a_run_stopped_in_sft_resumes_it_bitwise_and_starts_grpo(tmp_path: Path) -> None:
    run_dir, ckpt = tmp_path / "run", tmp_path / "run" / "model" / "sft-checkpoints"
    sets = ["model.sft.steps=60", "model.sft.checkpoint_every_s=0.3", "budget.steps=1"]
    cmd = _grpo(str(TINY), "--run-dir", str(run_dir), *(a for s in sets for a in ("--set", s)))
    proc = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 60
        while not list(ckpt.glob("step-*")):
            assert proc.poll() is None and time.monotonic() < deadline, "no SFT checkpoint"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 130, out[-3000:]
    assert f"grpo run --resume {run_dir}" in " ".join(out.split()), out[-3000:]
    assert "cannot be resumed" not in out
    assert not (run_dir / "model" / SFT_DONE).exists()
    stopped_at = max(int(p.name[5:]) for p in ckpt.glob("step-*"))
    assert 0 < stopped_at < 60
    config = load_run_config(run_dir / "config.yaml")
    assert resume_policy(config, run_dir) is None  # SFT to continue, no GRPO state yet

    done = subprocess.run(_grpo("--resume", str(run_dir)), cwd=REPO, env=ENV,
                          capture_output=True, text=True, timeout=240)  # fmt: skip
    text = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 0, text[-3000:]
    assert "stopped before GRPO started" in text and f"resumed from step {stopped_at}" in text
    summary = json.loads((run_dir / "summary.json").read_text())
    assert (summary["resumed"], summary["steps"], summary["stop_reason"]) == (True, 1, "steps")
    assert json.loads((run_dir / "model" / SFT_DONE).read_text())["steps"] == 60
    assert not ckpt.exists()  # a finished SFT drops its checkpoints
    assert resume_policy(config, run_dir) == run_dir / "model" / "sft"  # never redone

    # The same SFT, uninterrupted, by the same code in this process.
    ref = tmp_path / "ref"
    tasks = load_run_tasks(config)
    torch.set_num_threads(1)
    warm_start(config, init_policy(config, ref, print), tasks, ref, print)
    want = load_file(str(ref / "model" / "sft" / "model.safetensors"))
    got = load_file(str(run_dir / "model" / "sft" / "model.safetensors"))
    assert want.keys() == got.keys() and all(torch.equal(want[k], got[k]) for k in want)


def test_where_a_resume_starts_from_the_folder_it_finds(tmp_path: Path) -> None:
    """``resume_policy``: None (prepare the policy: continue SFT, or start GRPO after a
    finished one) until GRPO state exists; a finished SFT is the policy folder then."""
    from grpo.local.run import write_run_config

    config = load_run_config(TINY, environ={})
    run_dir = tmp_path / "run"
    write_run_config(config, run_dir)
    assert resume_policy(config, run_dir) is None  # stopped before SFT began
    (run_dir / "model" / "sft-checkpoints").mkdir(parents=True)
    (run_dir / "redis" / "appendonlydir").mkdir(parents=True)  # Redis started early: no GRPO
    assert resume_policy(config, run_dir) is None  # SFT began and did not finish
    (run_dir / "model" / "sft").mkdir()
    (run_dir / "model" / "sft" / "config.json").write_text("{}")
    (run_dir / "model" / SFT_DONE).write_text('{"steps": 25}')
    assert resume_policy(config, run_dir) == run_dir / "model" / "sft"
    said: list[str] = []
    tasks = load_run_tasks(config)
    assert warm_start(config, "unused", tasks, run_dir, said.append) == run_dir / "model" / "sft"
    assert said == [f"SFT finished earlier ({run_dir / 'model' / SFT_DONE}): not run again"]
