"""Zero-advantage groups (all wrong or all right, kept when dynamic sampling is off) must not
move the policy (issue 15 item 3): AdamW applied its momentum on an all-zero gradient, so a
stream of such groups kept pushing the parameters along a stale direction."""

from __future__ import annotations

import copy
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM

from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.trainer import Trainer, TrainerConfig
from grpo.model import load_tokenizer
from grpo.services.learner.batch import group_rows
from grpo.v1 import common_pb2


def _trainer(model_dir: Path, algo: LearnerAlgoConfig, ref=None, **cfg) -> Trainer:
    tok = load_tokenizer(model_dir)
    return Trainer(
        AutoModelForCausalLM.from_pretrained(model_dir),
        algo,
        TrainerConfig(**{"lr": 1e-3, "warmup_steps": 0, **cfg}),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        ref_model=ref,
    )


def _flat(groups: list[common_pb2.Group], reward: float) -> list[common_pb2.Group]:
    for g in groups:
        for m in g.members:
            m.outcome.reward = reward
    return groups


def _snapshot(t: Trainer) -> tuple[dict[str, torch.Tensor], dict, int]:
    params = {k: v.detach().clone() for k, v in t.model.state_dict().items()}
    return params, copy.deepcopy(t.optimizer.state_dict()), t.scheduler.last_epoch


def test_zero_advantage_batches_leave_parameters_moments_and_schedule_unchanged(
    tiny_model_dir: Path, make_groups
) -> None:
    mixed = [group_rows(g) for g in make_groups(num_groups=2, group_size=4, seed=1)]
    wrong = [group_rows(g) for g in _flat(make_groups(num_groups=2, group_size=4, seed=2), 0.0)]
    right = [group_rows(g) for g in _flat(make_groups(num_groups=2, group_size=4, seed=3), 1.0)]
    t = _trainer(tiny_model_dir, LearnerAlgoConfig(process_weight=0.0), ppo_epochs=2, minibatches=2)
    t.step(mixed)  # real updates first: AdamW now has momentum it would keep applying
    params, opt_state, lr_step = _snapshot(t)
    for batch in (wrong, right, wrong + right):
        metrics = t.step(batch)
        assert metrics["optim/no_signal_steps"] == 4.0  # 2 epochs x 2 minibatches
        assert metrics["optim/skipped_steps"] == 0.0  # not counted as a non-finite skip
    after, opt_after, lr_after = _snapshot(t)
    for k in params:
        assert torch.equal(after[k], params[k]), k  # before the fix: moved by ~3 lr
    assert lr_after == lr_step
    for state, state_after in zip(
        opt_state["state"].values(), opt_after["state"].values(), strict=True
    ):
        assert all(torch.equal(state[n], state_after[n]) for n in state)
    # A batch with one mixed group still trains, and only its minibatch with signal steps.
    metrics = t.step(mixed[:1] + wrong[:1])
    assert metrics["optim/no_signal_steps"] < 4.0 and t.scheduler.last_epoch > lr_step
    assert any(not torch.equal(t.model.state_dict()[k], params[k]) for k in params)


def test_a_kl_term_keeps_zero_advantage_steps(tiny_model_dir: Path, make_groups) -> None:
    # With beta > 0 the KL to the reference has a gradient of its own: the step is taken.
    wrong = [group_rows(g) for g in _flat(make_groups(num_groups=2, group_size=4, seed=2), 0.0)]
    ref = AutoModelForCausalLM.from_pretrained(tiny_model_dir)
    t = _trainer(tiny_model_dir, LearnerAlgoConfig(process_weight=0.0, kl_coef=0.1), ref=ref)
    metrics = t.step(wrong)
    assert metrics["optim/no_signal_steps"] == 0.0 and t.scheduler.last_epoch == 1


def test_skipping_zero_advantage_rows_moves_parameters_exactly_as_running_them(
    tiny_model_dir: Path, make_groups, monkeypatch
) -> None:
    # Dynamic sampling off: all-wrong and all-right groups share minibatches with mixed ones.
    # Their rows' loss and gradient are exactly 0, so skipping their passes (denominators kept)
    # must leave the same parameters, in float64, after several epochs and minibatches.
    def batch() -> list:
        mixed = make_groups(num_groups=2, group_size=4, seed=1)
        wrong = _flat(make_groups(num_groups=1, group_size=4, seed=2), 0.0)
        right = _flat(make_groups(num_groups=1, group_size=4, seed=3), 1.0)
        return [group_rows(g) for g in (mixed[0], wrong[0], mixed[1], right[0])]

    algo = LearnerAlgoConfig(process_weight=0.0, tis_cap=2.0)
    cfg = {"ppo_epochs": 2, "minibatches": 2, "micro_batch_size": 3}

    def trained(run_all: bool) -> tuple[Trainer, list[dict[str, float]]]:
        tok = load_tokenizer(tiny_model_dir)
        model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float64)
        t = Trainer(
            model,
            algo,
            TrainerConfig(lr=1e-3, warmup_steps=0, **cfg),
            pad_token_id=tok.pad_token_id,
            eos_token_id=tok.eos_token_id,
        )
        if run_all:
            monkeypatch.setattr(
                t, "_rows_with_signal", lambda adv, mask: torch.ones(adv.shape[0], dtype=torch.bool)
            )
        return t, [t.step(batch()) for _ in range(3)]

    skipping, m_skip = trained(run_all=False)
    running, m_run = trained(run_all=True)
    assert all(m["optim/zero_advantage_rows_skipped"] == 8.0 for m in m_skip)
    assert all(m["optim/zero_advantage_rows_skipped"] == 0.0 for m in m_run)
    a, b = skipping.model.state_dict(), running.model.state_dict()
    start = AutoModelForCausalLM.from_pretrained(tiny_model_dir, torch_dtype=torch.float64)
    assert any(not torch.equal(a[k], v) for k, v in start.state_dict().items())  # it trained
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=0, atol=1e-12, msg=k)
    for key in ("loss/total", "optim/grad_norm"):
        assert abs(m_skip[-1][key] - m_run[-1][key]) < 1e-9, key


def test_an_all_zero_batch_still_reports_its_diagnostics(tiny_model_dir: Path, make_groups) -> None:
    wrong = [group_rows(g) for g in _flat(make_groups(num_groups=2, group_size=4, seed=2), 0.0)]
    t = _trainer(tiny_model_dir, LearnerAlgoConfig(process_weight=0.0), minibatches=2)
    params, _, _ = _snapshot(t)
    metrics = t.step(wrong)
    assert metrics["optim/no_signal_steps"] == 2.0
    assert metrics["entropy/mean"] > 0 and metrics["loss/ratio_mean"] == 1.0
    assert metrics["loss/total"] == 0.0
    assert all(torch.equal(t.model.state_dict()[k], v) for k, v in params.items())
