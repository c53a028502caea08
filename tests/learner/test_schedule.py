"""The one LR schedule of SFT and the trainer: lr is the peak, decay starts after warmup."""

from __future__ import annotations

import itertools
import math

import pytest
import torch

from grpo.learner.schedule import lr_multiplier
from grpo.learner.trainer import TrainerConfig, _lr_multiplier


def test_fifty_warmup_steps_of_a_hundred_reach_the_peak_at_step_fifty():
    # The case: before, the cosine counted from step 0 and the peak was 57% of lr.
    f = [lr_multiplier(s, warmup_steps=50, schedule="cosine", total_steps=100) for s in range(101)]
    assert f[0] == pytest.approx(1 / 50) and f[24] == pytest.approx(25 / 50)
    assert f[49] == 1.0 and f[50] == 1.0 and max(f) == 1.0
    assert f[75] == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))  # 0.55
    assert f[100] == pytest.approx(0.1) and lr_multiplier(
        500, warmup_steps=50, schedule="cosine", total_steps=100
    ) == pytest.approx(0.1)
    assert all(a >= b for a, b in itertools.pairwise(f[50:]))  # decays monotonically


def test_linear_constant_and_no_warmup():
    lin = [
        lr_multiplier(s, warmup_steps=2, schedule="linear", total_steps=6, min_lr_ratio=0.0)
        for s in range(7)
    ]
    assert lin == pytest.approx([0.5, 1.0, 1.0, 0.75, 0.5, 0.25, 0.0])
    assert lr_multiplier(0, warmup_steps=0, schedule="cosine", total_steps=10) == 1.0
    assert lr_multiplier(99, warmup_steps=3, schedule="constant") == 1.0
    assert lr_multiplier(99, warmup_steps=3, schedule="cosine", total_steps=None) == 1.0
    with pytest.raises(ValueError, match="valid: constant, linear, cosine"):
        lr_multiplier(0, warmup_steps=0, schedule="exp")
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        lr_multiplier(5, warmup_steps=5, schedule="cosine", total_steps=5)


def test_the_trainer_schedule_is_the_same_function():
    cfg = TrainerConfig(lr=1e-3, warmup_steps=50, schedule="cosine", total_steps=100)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: _lr_multiplier(cfg, s))
    lrs = []
    for _ in range(100):
        lrs.append(opt.param_groups[0]["lr"])  # the lr of this update
        opt.step()
        sched.step()
    assert lrs[49] == pytest.approx(1e-3) and lrs[50] == pytest.approx(1e-3)
    assert max(lrs) == pytest.approx(1e-3)
    with pytest.raises(ValueError, match="must exceed warmup_steps"):
        TrainerConfig(warmup_steps=10, schedule="cosine", total_steps=10)
