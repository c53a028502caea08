"""Resumable SFT (``grpo.learner.sft``): an interrupted and resumed run ends with the weights of
an uninterrupted one, bit for bit, on CPU; a SIGKILL mid-write never leaves a trusted
checkpoint; a damaged newest checkpoint is moved aside and the one before it is used."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from grpo.errors import FailedPreconditionError
from grpo.learner.sft import SftResult, run_sft

# 7 examples in batches of 3: batches run on across passes, so the data position includes
# the indices left of the current pass; log_every 4 leaves a partial loss window at the end.
EXAMPLES = [(f"{i}+{i}=", str(2 * i)) for i in range(7)]
SETTINGS = {"steps": 40, "batch_size": 3, "lr": 1e-2, "warmup_steps": 3, "seed": 3, "log_every": 4}


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def _assert_same_run(a: SftResult, a_dir: Path, b: SftResult, b_dir: Path) -> None:
    wa, wb = _weights(a_dir), _weights(b_dir)
    assert wa.keys() == wb.keys()
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # bitwise, not allclose
    assert (b.steps, b.completion_tokens, b.loss_history) == (
        a.steps,
        a.completion_tokens,
        a.loss_history,
    )
    assert b.final_loss == a.final_loss


@pytest.fixture(scope="module")
def uninterrupted(
    tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory
) -> tuple[SftResult, Path]:
    out = tmp_path_factory.mktemp("whole") / "sft"
    return run_sft(tiny_model_dir, EXAMPLES, out_dir=out, **SETTINGS), out  # type: ignore[arg-type]


def test_a_signal_mid_step_is_held_and_the_resume_ends_bitwise_equal(
    tiny_model_dir: Path, tmp_path: Path, uninterrupted: tuple[SftResult, Path]
) -> None:
    """A real SIGINT from another thread lands during a step (the step is most of the time):
    it is held until the step ends, the state after it is checkpointed, then it raises."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "sft"
    timer: list[threading.Timer] = []

    def on_log(step: int, loss: float) -> None:
        if not timer:  # first report (step 4): the signal comes a few steps later
            timer.append(threading.Timer(0.05, os.kill, (os.getpid(), signal.SIGINT)))
            timer[0].start()

    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            run_sft(tiny_model_dir, EXAMPLES, out_dir=out, checkpoint_dir=ckpt,
                    checkpoint_every_s=0, on_log=on_log, **SETTINGS)  # type: ignore[arg-type]  # fmt: skip
    finally:
        signal.signal(signal.SIGINT, previous)
    saved = sorted(p.name for p in ckpt.glob("step-*"))
    assert len(saved) == 1 and 4 <= int(saved[0][5:]) < SETTINGS["steps"], saved
    resumed = run_sft(tiny_model_dir, EXAMPLES, out_dir=out, checkpoint_dir=ckpt,
                      checkpoint_every_s=0, **SETTINGS)  # type: ignore[arg-type]  # fmt: skip
    assert resumed.resumed_from == int(saved[0][5:])
    _assert_same_run(*uninterrupted, resumed, out)


_CHILD = """
import sys, torch
from grpo.learner.sft import run_sft
from tests.generation.test_sft_resume import EXAMPLES, SETTINGS
torch.set_num_threads(1)
run_sft(sys.argv[1], EXAMPLES, out_dir=sys.argv[2], checkpoint_dir=sys.argv[3],
        checkpoint_every_s=1e-9, **SETTINGS)
"""


def test_sigkill_leaves_only_trusted_checkpoints_and_a_damaged_one_is_skipped(
    tiny_model_dir: Path, tmp_path: Path, uninterrupted: tuple[SftResult, Path]
) -> None:
    """SFT checkpointing after every step is SIGKILLed at an arbitrary moment (often mid-write:
    a checkpoint is most of a step's time here); the newest checkpoint is then damaged at rest.
    The resume moves it aside, continues from the one before, and ends bitwise equal."""
    ckpt, out = tmp_path / "ckpt", tmp_path / "sft"
    child = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(tiny_model_dir), str(out), str(ckpt)],
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    try:
        deadline = time.monotonic() + 45
        while len(list(ckpt.glob("step-*"))) < 2 or not (ckpt / "DIGESTS.index.json").is_file():
            assert child.poll() is None and time.monotonic() < deadline
            time.sleep(0.01)
        time.sleep(0.15)
        child.kill()
    finally:
        child.kill()
        child.wait()
    steps = sorted(int(p.name[5:]) for p in ckpt.glob("step-*"))
    # keep_last 2; 3 when killed between a checkpoint's rename and the pruning of the oldest
    assert len(steps) in (2, 3) and steps[-1] < SETTINGS["steps"], steps
    newest = ckpt / f"step-{steps[-1]:08d}" / "model" / "model.safetensors"
    data = bytearray(newest.read_bytes())
    data[-1] ^= 0xFF  # same size, other bytes: altered at rest
    newest.write_bytes(bytes(data))
    resumed = run_sft(tiny_model_dir, EXAMPLES, out_dir=out, checkpoint_dir=ckpt,
                      checkpoint_every_s=0, **SETTINGS)  # type: ignore[arg-type]  # fmt: skip
    assert resumed.resumed_from == steps[-2]
    assert len(list(ckpt.glob(f"damaged-step-{steps[-1]:08d}-*"))) == 1
    _assert_same_run(*uninterrupted, resumed, out)


def test_a_resume_with_other_settings_is_refused(tiny_model_dir: Path, tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    with pytest.raises(KeyboardInterrupt):
        run_sft(tiny_model_dir, EXAMPLES, out_dir=tmp_path / "sft", checkpoint_dir=ckpt,
                on_log=lambda s, v: (_ for _ in ()).throw(KeyboardInterrupt()), **SETTINGS)  # type: ignore[arg-type]  # fmt: skip
    assert [p.name for p in ckpt.glob("step-*")] == ["step-00000004"]
    with pytest.raises(FailedPreconditionError, match=r"other batch_size, lr .*restore"):
        run_sft(tiny_model_dir, EXAMPLES, out_dir=tmp_path / "sft", checkpoint_dir=ckpt,
                **{**SETTINGS, "batch_size": 2, "lr": 1e-3})  # type: ignore[arg-type]  # fmt: skip
