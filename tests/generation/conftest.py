"""Fixtures of the generation tests: a tiny random model, an SFT-tuned copy, a backend."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from grpo.learner.sft import run_sft
from grpo.model import init_tiny_model
from grpo.services.generation.backend import BackendConfig
from grpo.services.generation.transformers_backend import TransformersBackend

torch.set_num_threads(1)

# The tuned model answers "hi=" with "ok" then EOS (memorised in a few SFT steps).
TUNED_PROMPT = "hi="
TUNED_COMPLETION = "ok"


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A random tiny Qwen2 checkpoint with the char tokenizer (seed 0)."""
    return init_tiny_model(tmp_path_factory.mktemp("tiny") / "model", seed=0, hidden=64, layers=2)


@pytest.fixture(scope="session")
def tuned_model_dir(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``tiny_model_dir`` after SFT on one (prompt, completion) pair."""
    out = tmp_path_factory.mktemp("tuned") / "model"
    run_sft(
        tiny_model_dir,
        [(TUNED_PROMPT, TUNED_COMPLETION)] * 8,
        out_dir=out,
        steps=60,
        lr=1e-2,
        batch_size=8,
        warmup_steps=5,
    )
    return out


@pytest.fixture
def backend(tiny_model_dir: Path) -> TransformersBackend:
    """A fresh transformers backend on the random tiny model (policy version 0)."""
    return TransformersBackend(BackendConfig(model_path=str(tiny_model_dir)))
