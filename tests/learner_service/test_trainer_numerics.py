"""Trainer numerics (issue 15 item 6): a far-off KL token stays finite, a non-finite gradient
skips the optimizer step without touching parameters or optimizer state, a NaN parameter is
never checkpointed, and under top-p sampling the importance weight of an unchanged policy is 1."""

from __future__ import annotations

import copy
import logging
import math
from dataclasses import replace
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.errors import FailedPreconditionError
from grpo.learner.checkpoint import CheckpointState, save_checkpoint
from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.trainer import Trainer, TrainerConfig
from grpo.model import load_tokenizer
from grpo.services.learner.batch import group_rows
from grpo.v1 import common_pb2


def _trainer(model_dir: Path, *, algo: LearnerAlgoConfig, ref=None, model=None, **cfg) -> Trainer:
    tok = load_tokenizer(model_dir)
    return Trainer(
        model if model is not None else AutoModelForCausalLM.from_pretrained(model_dir),
        algo,
        TrainerConfig(**{"lr": 1e-3, "warmup_steps": 0, **cfg}),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        ref_model=ref,
    )


def _state(trainer: Trainer) -> tuple[dict[str, torch.Tensor], dict]:
    params = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    return params, copy.deepcopy(trainer.optimizer.state_dict())


def test_far_off_kl_tokens_leave_parameters_finite(tiny_model_dir: Path, make_groups) -> None:
    # A policy 40× sharper than its reference (and than the sampler): sampled tokens get
    # log π_θ in the hundreds below log π_ref, so k3 = π_ref/π_θ − 1 − log(π_ref/π_θ) was e^{>88}
    # = inf in float32 and one step turned every parameter into NaN.
    groups = [group_rows(g) for g in make_groups(num_groups=2, group_size=4, seed=5)]
    policy = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    with torch.no_grad():
        policy.lm_head.weight.mul_(40.0)
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    trainer = _trainer(
        tiny_model_dir, algo=LearnerAlgoConfig(kl_coef=0.1), ref=ref, model=policy, ppo_epochs=2
    )
    metrics = trainer.step(groups)
    assert metrics["behavior/abs_logprob_diff_max"] > 60  # the mismatch is really that large
    assert metrics["optim/skipped_steps"] == 0.0
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_nonfinite_gradient_skips_the_step_and_leaves_state_unchanged(
    tiny_model_dir: Path, make_groups, caplog: pytest.LogCaptureFixture, tmp_path: Path
) -> None:
    groups = [group_rows(g) for g in make_groups(num_groups=2, group_size=4, seed=1)]
    trainer = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(), warmup_steps=3)
    trainer.step(groups)  # a normal step first, so AdamW has moments to protect
    params, opt_state = _state(trainer)
    lr_step = trainer.scheduler.last_epoch
    victim = trainer.model.lm_head.weight
    handle = victim.register_hook(lambda g: torch.full_like(g, float("nan")))
    with caplog.at_level(logging.WARNING, logger="grpo.learner.trainer"):
        metrics = trainer.step(groups)
    handle.remove()
    assert metrics["optim/skipped_steps"] == 1.0 and metrics["optim/skipped_steps_total"] == 1.0
    assert not math.isfinite(metrics["optim/grad_norm"])
    assert "optimizer step skipped" in caplog.text
    after, opt_after = _state(trainer)
    for k in params:
        assert torch.equal(after[k], params[k]), k
    assert opt_after["state"].keys() == opt_state["state"].keys()
    for idx, st in opt_state["state"].items():
        for key, value in st.items():
            assert torch.equal(opt_after["state"][idx][key], value), (idx, key)
    assert trainer.scheduler.last_epoch == lr_step  # the schedule did not advance either
    assert all(p.grad is None for p in trainer.model.parameters())
    # The next clean step trains again.
    metrics = trainer.step(groups)
    assert metrics["optim/skipped_steps"] == 0.0 and metrics["optim/skipped_steps_total"] == 1.0
    assert trainer.scheduler.last_epoch == lr_step + 1
    # And a NaN parameter (a bug elsewhere) is refused by the checkpoint writer.
    with torch.no_grad():
        victim[0, 0] = float("nan")
    with pytest.raises(FailedPreconditionError, match="not finite"):
        save_checkpoint(
            tmp_path / "ckpt",
            model=trainer.model,
            optimizer=trainer.optimizer,
            scheduler=trainer.scheduler,
            state=CheckpointState(step=3, policy_version=3),
        )
    assert not any((tmp_path / "ckpt").glob("step-*"))


def _top_p_groups(model_dir: Path, top_p: float) -> list:
    from grpo.services.generation.backend import BackendConfig, SamplingConfig
    from grpo.services.generation.transformers_backend import TransformersBackend

    backend = TransformersBackend(BackendConfig(model_path=str(model_dir), device="cpu"))
    sampling = SamplingConfig(temperature=1.0, top_p=top_p, max_new_tokens=12, seed=7)
    results = backend.generate(["12+34=", "56+7="], 4, sampling)
    groups = []
    for p, res in enumerate(results):
        members = []
        for i, comp in enumerate(res.completions):
            rollout = common_pb2.Rollout(
                group_id=f"g{p}",
                index=i,
                group_size=4,
                prompt_id=f"p{p}",
                task=common_pb2.Task(id=f"p{p}", type="arith", prompt="x"),
                prompt_token_ids=res.prompt_token_ids,
                completion=comp.to_proto(),
            )
            score = common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, reward=float(i % 2))
            members.append(common_pb2.ScoredRollout(rollout=rollout, outcome=score))
        groups.append(
            group_rows(
                common_pb2.Group(group_id=f"g{p}", prompt_id=f"p{p}", group_size=4, members=members)
            )
        )
    return groups


@pytest.mark.parametrize("epochs", [1, 2])
def test_top_p_sampling_gives_importance_weight_one_for_an_unchanged_policy(
    tiny_model_dir: Path, epochs: int
) -> None:
    groups = _top_p_groups(tiny_model_dir, top_p=0.7)
    assert groups[0].rows[0].top_p == pytest.approx(0.7)  # the rollout records the truncation
    trainer = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(tis_cap=2.0), ppo_epochs=epochs)
    metrics = trainer.step(groups)
    # π_old under the sampler's top-p equals μ: before, the weight was the kept mass (< 1).
    assert metrics["behavior/abs_logprob_diff_max"] < 1e-5
    assert metrics["tis/weight_mean"] == pytest.approx(1.0, abs=1e-5)
    assert metrics["tis/mismatch_kl"] == pytest.approx(0.0, abs=1e-6)
    if epochs == 1:
        assert metrics["loss/ratio_mean"] == 1.0  # π_θ and π_old: the same truncated forward
    # The old definition (full-vocabulary π_old) on the same rollouts: weight = kept mass.
    full = [replace(g, rows=[replace(r, top_p=1.0) for r in g.rows]) for g in groups]
    metrics_full = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(tis_cap=2.0)).step(full)
    assert metrics_full["tis/weight_mean"] < 0.95
