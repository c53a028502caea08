"""PPO with a learned critic (``estimator: gae``) on the tiny model: a step trains both models,
the critic learns a constant reward, and a checkpoint round trip restores it (issue 18)."""

from __future__ import annotations

import copy
import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import FailedPreconditionError
from grpo.learner.checkpoint import CheckpointState, load_checkpoint, save_checkpoint
from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.trainer import Trainer, TrainerConfig
from grpo.model import load_tokenizer
from grpo.services.learner.batch import group_rows

GAE = LearnerAlgoConfig(estimator="gae", process_weight=0.0)


def _trainer(model_dir: Path, algo: LearnerAlgoConfig = GAE, **cfg) -> Trainer:
    tok = load_tokenizer(model_dir)
    return Trainer(
        AutoModelForCausalLM.from_pretrained(model_dir),
        algo,
        TrainerConfig(**{"lr": 1e-3, "warmup_steps": 0, "critic_lr": 1e-2, **cfg}),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
    )


def _tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_gae_step_trains_policy_and_critic(tiny_model_dir: Path, make_groups) -> None:
    groups = [group_rows(g) for g in make_groups(num_groups=3, group_size=4, seed=1)]
    trainer = _trainer(tiny_model_dir, ppo_epochs=2, minibatches=2)
    assert trainer.critic is not None
    policy0, critic0 = _tensors(trainer.model), _tensors(trainer.critic.model)
    metrics = trainer.step(groups)
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    for key in ("value_loss", "value_clip_frac", "value_mean", "return_mean", "grad_norm"):
        assert f"critic/{key}" in metrics, key
    # V starts at 0 (zero head) and the rewards are 0/1: the first explained variance is ~0
    assert metrics["critic/explained_variance"] == pytest.approx(0.0, abs=1e-6)
    assert metrics["critic/grad_norm"] > 0 and metrics["critic/lr"] == pytest.approx(1e-2)
    assert metrics["adv/zero_variance_groups"] == 0.0  # no group baseline to zero
    moved = lambda a, b: max(float((a[k] - b[k]).abs().max()) for k in a)  # noqa: E731
    assert moved(policy0, _tensors(trainer.model)) > 1e-5
    assert moved(critic0, _tensors(trainer.critic.model)) > 1e-4
    assert trainer.critic.scheduler.last_epoch == 4  # the policy's 2 epochs x 2 minibatches
    # The critic is its own copy: the policy's backbone did not change through the value loss.
    assert trainer.critic.model.backbone is not trainer.model.base_model


def test_critic_learns_a_constant_reward(tiny_model_dir: Path, make_groups) -> None:
    protos = make_groups(num_groups=2, group_size=4, seed=3)
    for g in protos:
        for m in g.members:
            m.outcome.reward = 0.7  # every response: reward 0.7, so every return is 0.7
    groups = [group_rows(g) for g in protos]
    trainer = _trainer(
        tiny_model_dir,
        lr=1e-8,  # keep the policy (and so the sampled states' meaning) nearly fixed
        critic_lr=1e-2,
        schedule="cosine",
        total_steps=200,
        min_lr_ratio=1e-3,
        algo=LearnerAlgoConfig(estimator="gae", process_weight=0.0, value_clip=None),
    )
    for _ in range(200):
        metrics = trainer.step(groups)
    assert metrics["critic/return_mean"] == pytest.approx(0.7, abs=1e-6)
    from grpo.learner.batch import pad_batch

    tok = load_tokenizer(tiny_model_dir)
    batch = pad_batch(groups, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    values = trainer.critic.values_at_start(
        batch, trainer._micro_slices(batch, torch.arange(batch.num_rows))
    )
    err = (values - 0.7).abs()[batch.response_mask]
    assert float(err.max()) < 1e-3, float(err.max())  # measured 7.6e-4 here (mean 2e-4)


def test_critic_checkpoint_round_trip(tiny_model_dir: Path, make_groups, tmp_path: Path) -> None:
    groups = [group_rows(g) for g in make_groups(num_groups=2, group_size=4, seed=1)]
    trainer = _trainer(tiny_model_dir)
    trainer.step(groups)
    path = save_checkpoint(
        tmp_path,
        model=trainer.model,
        optimizer=trainer.optimizer,
        scheduler=trainer.scheduler,
        state=CheckpointState(step=1, policy_version=1),
        critic=trainer.critic,
    )
    assert (path / "critic" / "model.safetensors").is_file()
    fresh = _trainer(tiny_model_dir)
    load_checkpoint(
        path,
        model=fresh.model,
        optimizer=fresh.optimizer,
        scheduler=fresh.scheduler,
        critic=fresh.critic,
    )
    want, got = _tensors(trainer.critic.model), _tensors(fresh.critic.model)
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k
    a, b = trainer.critic.optimizer.state_dict(), fresh.critic.optimizer.state_dict()
    for idx, st in a["state"].items():
        for key, value in st.items():
            assert torch.equal(b["state"][idx][key], value), (idx, key)
    assert fresh.critic.scheduler.last_epoch == trainer.critic.scheduler.last_epoch == 1
    # Training on from either gives the same next step.
    m1, m2 = trainer.step(copy.deepcopy(groups)), fresh.step(copy.deepcopy(groups))
    assert m1["critic/value_loss"] == pytest.approx(m2["critic/value_loss"], rel=1e-6)
    # A gae run cannot resume from a checkpoint without a critic.
    grpo = _trainer(tiny_model_dir, algo=LearnerAlgoConfig())
    plain = save_checkpoint(
        tmp_path / "plain",
        model=grpo.model,
        optimizer=grpo.optimizer,
        scheduler=grpo.scheduler,
        state=CheckpointState(step=1, policy_version=1),
    )
    with pytest.raises(FailedPreconditionError, match="no critic"):
        load_checkpoint(plain, model=fresh.model, critic=fresh.critic)


def test_service_settings_select_gae(tiny_model_dir: Path, tmp_path: Path) -> None:
    from grpo.services.learner.service import build_trainer
    from grpo.services.learner.settings import LearnerServiceSettings

    settings = LearnerServiceSettings.model_validate(
        {
            "model_path": str(tiny_model_dir),
            "run_dir": str(tmp_path),
            "algo": {"estimator": "gae", "gamma": 0.99, "gae_lambda": 0.95},
            "trainer": {"critic_lr": 1e-4},
        }
    )
    trainer, _ = build_trainer(settings)
    assert trainer.critic is not None
    assert trainer.critic.optimizer.param_groups[0]["initial_lr"] == pytest.approx(1e-4)  # peak
    definition = settings.algo.resolved_definition()["advantage"]
    assert definition["gamma"] == 0.99 and definition["gae_lambda"] == 0.95
