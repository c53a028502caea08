"""Checkpoint round trip: model, optimizer, LR schedule, RNG and consumed ids come back exactly."""

from __future__ import annotations

import copy
import os
import random
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.learner.checkpoint import (
    CheckpointState,
    latest_checkpoint,
    load_checkpoint,
    save_checkpoint,
)


def _train_a_bit(model: torch.nn.Module, opt: torch.optim.Optimizer, sched) -> None:
    ids = torch.randint(3, 90, (2, 10))
    for _ in range(2):
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        opt.step()
        sched.step()
        opt.zero_grad()


def _parts(model_dir: Path):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
    return model, opt, sched


def test_round_trip_restores_everything(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, opt, sched = _parts(tiny_model_dir)
    _train_a_bit(model, opt, sched)
    consumed = [f"g{i}" for i in range(7)]
    state = CheckpointState(
        step=2,
        policy_version=5,
        consumed_group_ids=consumed,
        resolved_config={"algo": {"std": "population"}},
        extra={"generated_tokens": 123},
    )
    random.seed(11)
    torch.manual_seed(12)
    path = save_checkpoint(tmp_path, model=model, optimizer=opt, scheduler=sched, state=state)
    assert path == tmp_path / "step-00000002" and latest_checkpoint(tmp_path) == path
    expected_rng = (random.random(), torch.rand(3))

    saved_params = {k: v.clone() for k, v in model.state_dict().items()}
    saved_opt = copy.deepcopy(opt.state_dict())
    # Continue training so that everything differs, then restore into fresh objects.
    _train_a_bit(model, opt, sched)
    model2, opt2, sched2 = _parts(tiny_model_dir)
    got = load_checkpoint(path, model=model2, optimizer=opt2, scheduler=sched2)

    assert got == state
    for name, value in model2.state_dict().items():
        assert torch.equal(value, saved_params[name]), name
    for pid, st in saved_opt["state"].items():
        for key, value in st.items():
            assert torch.equal(opt2.state_dict()["state"][pid][key], value), (pid, key)
    assert sched2.last_epoch == 2 and sched2.get_last_lr() == pytest.approx([3e-4])
    # The RNG streams continue exactly where they were at save time.
    assert random.random() == expected_rng[0]
    assert torch.equal(torch.rand(3), expected_rng[1])


def test_keep_last_and_atomic_leftovers(tiny_model_dir: Path, tmp_path: Path) -> None:
    model, opt, sched = _parts(tiny_model_dir)
    # A crash mid-save leaves a temp folder; it is ignored and removed by the next save.
    (tmp_path / ".tmp-step-00000009-1").mkdir(parents=True)
    assert latest_checkpoint(tmp_path) is None
    for step in (1, 2, 3, 4):
        save_checkpoint(
            tmp_path,
            model=model,
            optimizer=opt,
            scheduler=sched,
            state=CheckpointState(step=step, policy_version=step),
            keep_last=2,
        )
    assert sorted(os.listdir(tmp_path)) == ["step-00000003", "step-00000004"]
    assert latest_checkpoint(tmp_path) == tmp_path / "step-00000004"
    with pytest.raises(InvalidArgumentError, match="already exists"):
        save_checkpoint(
            tmp_path,
            model=model,
            optimizer=opt,
            scheduler=sched,
            state=CheckpointState(step=4, policy_version=4),
        )
    with pytest.raises(NotFoundError, match="not a complete checkpoint"):
        load_checkpoint(tmp_path / "missing", model=model)
