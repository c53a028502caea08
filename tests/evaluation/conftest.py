"""Evaluation tests: ``_paced_verifier`` importable (also by ``grpo serve`` in a child)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # _paced_verifier, also for `grpo serve _paced_verifier:SERVICE`


@pytest.fixture(scope="session")
def tuned_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen2 (seed 0, 2 layers) tuned by a short SFT to answer ``hi=`` with ``ok``."""
    import torch

    from grpo.learner.sft import run_sft
    from grpo.model import init_tiny_model

    torch.set_num_threads(1)
    base = init_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0, hidden=64, layers=2)
    out = tmp_path_factory.mktemp("tuned") / "model"
    run_sft(base, [("hi=", "ok")] * 8, out_dir=out, steps=60, lr=1e-2, batch_size=8,
            warmup_steps=5)  # fmt: skip
    return out
