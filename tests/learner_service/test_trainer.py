"""Trainer steps on the tiny model: parameters move, losses stay finite with a NaN reward,
micro-batching does not change the update, π_old matches the sampler's μ."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM

from grpo.learner.config import LearnerAlgoConfig
from grpo.learner.trainer import Trainer, TrainerConfig
from grpo.model import load_tokenizer
from grpo.services.learner.batch import group_rows
from grpo.v1 import common_pb2


def _rows(groups):
    """The learner's rows of proto groups (what the learner service hands the trainer)."""
    return [group_rows(g) for g in groups]


def _trainer(model_dir: Path, *, algo=None, dtype=torch.float32, ref=False, **cfg) -> Trainer:
    tok = load_tokenizer(model_dir)
    algo = algo or LearnerAlgoConfig(clip_high=0.28, tis_cap=2.0)
    ref_model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype) if ref else None
    return Trainer(
        AutoModelForCausalLM.from_pretrained(model_dir, dtype=dtype),
        algo,
        TrainerConfig(**{"lr": 1e-3, "warmup_steps": 0, **cfg}),
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        ref_model=ref_model,
    )


def _params(trainer: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}


def test_step_moves_parameters_with_a_nan_reward(tiny_model_dir: Path, make_groups) -> None:
    groups = make_groups(num_groups=3, group_size=4, seed=1)
    groups[0].members[2].outcome.reward = float("nan")  # a broken verifier value
    groups[1].members[1].missing = True
    trainer = _trainer(tiny_model_dir, ref=True, algo=LearnerAlgoConfig(kl_coef=0.05, tis_cap=2.0))
    before = _params(trainer)
    metrics = trainer.step(_rows(groups))
    after = _params(trainer)
    assert all(math.isfinite(v) for v in metrics.values()), metrics
    assert metrics["groups/missing"] == 2.0
    assert metrics["loss/responses"] == 10.0  # the 2 members without a reward are not trained
    assert metrics["loss/ratio_mean"] == pytest.approx(1.0, abs=1e-6)  # π_θ = π_old at start
    assert metrics["kl/ref_mean"] == pytest.approx(0.0, abs=1e-6)  # π_ref = initial policy
    # μ was sampled by the same weights: the teacher-forced π_old matches it to float error.
    assert metrics["behavior/abs_logprob_diff_max"] < 1e-5
    assert metrics["optim/grad_norm"] > 0 and metrics["optim/lr"] == pytest.approx(1e-3)
    moved = max(float((after[k] - before[k]).abs().max()) for k in before)
    assert moved > 1e-4
    for k in after:
        assert torch.isfinite(after[k]).all(), k
    assert trainer.step_count == 1


def test_micro_batch_split_does_not_change_the_update(tiny_model_dir: Path, make_groups) -> None:
    groups = make_groups(num_groups=3, group_size=4, seed=1)
    results = []
    for micro in (12, 5, 1):
        trainer = _trainer(tiny_model_dir, dtype=torch.float64, micro_batch_size=micro)
        metrics = trainer.step(
            [group_rows(common_pb2.Group.FromString(g.SerializeToString())) for g in groups]
        )
        results.append((_params(trainer), metrics["loss/total"]))
    ref_params, ref_loss = results[0]
    for params, loss in results[1:]:
        assert loss == pytest.approx(ref_loss, rel=1e-9)
        for k in ref_params:
            torch.testing.assert_close(params[k], ref_params[k], rtol=0, atol=1e-9, msg=k)


def test_several_epochs_and_minibatches_clip(tiny_model_dir: Path, make_groups) -> None:
    groups = make_groups(num_groups=3, group_size=4, seed=1)
    trainer = _trainer(
        tiny_model_dir, lr=2e-2, ppo_epochs=2, minibatches=2, warmup_steps=2, max_grad_norm=0.5
    )
    metrics = trainer.step(_rows(groups))
    # The second epoch sees a moved policy: ratios leave 1 and the band clips some tokens.
    assert metrics["loss/ratio_max"] > 1.0 or metrics["loss/ratio_min"] < 1.0
    assert metrics["loss/clip_frac_low"] + metrics["loss/clip_frac_high"] > 0
    assert metrics["optim/grad_norm"] > 0
    assert trainer.scheduler.last_epoch == 4  # 2 epochs x 2 minibatches optimizer steps
    assert metrics["optim/lr"] == pytest.approx(2e-2)


def test_first_minibatch_pi_old_is_its_gradient_pass(tiny_model_dir: Path, make_groups) -> None:
    """π_old of the first minibatch's rows is the detached π_θ of its epoch-0 gradient pass
    (nothing has moved yet), so the no-grad forward covers only the other rows; the update
    equals the one with π_old of every row from a no-grad forward at batch start."""
    groups = make_groups(num_groups=3, group_size=4, seed=1)
    cfg = {"lr": 2e-2, "ppo_epochs": 2, "minibatches": 2, "micro_batch_size": 4}
    fast = _trainer(tiny_model_dir, dtype=torch.float64, **cfg)
    seen: list[list[int]] = []
    no_grad = fast._logprobs_no_grad

    def counting(model, batch, *, truncate, rows=None):
        seen.append(rows.tolist())
        return no_grad(model, batch, truncate=truncate, rows=rows)

    fast._logprobs_no_grad = counting  # type: ignore[method-assign]
    m_fast = fast.step(_rows(groups))
    assert seen == [list(range(6, 12))]  # 12 rows: minibatch 0 is rows 0..5

    full = _trainer(tiny_model_dir, dtype=torch.float64, **cfg)  # π_old of all rows up front
    start: dict[str, torch.Tensor] = {}
    full_no_grad, micro_step = full._logprobs_no_grad, full._micro_step

    def every_row(model, batch, *, truncate, rows=None):
        start["old"] = full_no_grad(model, batch, truncate=truncate)
        return full_no_grad(model, batch, truncate=truncate, rows=rows)

    def with_start_old(plan, rows, denom, *, old):
        return micro_step(plan, rows, denom, old=start["old"] if old is None else old)

    full._logprobs_no_grad = every_row  # type: ignore[method-assign]
    full._micro_step = with_start_old  # type: ignore[method-assign]
    m_full = full.step(_rows(groups))
    assert m_fast["loss/total"] == pytest.approx(m_full["loss/total"], rel=1e-9)
    assert m_fast["loss/ratio_max"] > 1.0 or m_fast["loss/ratio_min"] < 1.0  # epoch 2 moved
    p_fast, p_full = _params(fast), _params(full)
    for k in p_fast:
        torch.testing.assert_close(p_fast[k], p_full[k], rtol=0, atol=1e-9, msg=k)


def test_process_credit_changes_the_update(tiny_model_dir: Path, make_groups) -> None:
    groups = make_groups(num_groups=2, group_size=4, seed=2)
    outcome_only = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(process_weight=0.0))
    with_process = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(process_weight=1.0))
    m0 = outcome_only.step(_rows(groups))
    m1 = with_process.step(_rows(groups))
    assert m1["adv/token_abs_mean"] != pytest.approx(m0["adv/token_abs_mean"])
    p0, p1 = _params(outcome_only), _params(with_process)
    assert max(float((p0[k] - p1[k]).abs().max()) for k in p0) > 1e-5


@pytest.mark.parametrize("tied_reward", [0.0, 1.0], ids=["all_wrong", "all_right"])
def test_gated_process_credit_leaves_tied_groups_at_zero(
    tiny_model_dir: Path, make_groups, tied_reward: float
) -> None:
    """``process_groups: mixed``: a group whose outcome rewards are tied (all wrong or all
    right) gets no process credit, so its rows skip the passes and a batch of such groups takes
    no optimizer step, while ungated credit trains on it (the weak-start collapse of
    docs/pipeline.md); a mixed group's advantages are the same either way."""
    from grpo.learner.batch import pad_batch

    groups = make_groups(num_groups=2, group_size=4, seed=2)
    for member in groups[0].members:
        member.outcome.reward = tied_reward  # group 0 tied; its step rewards still differ
    algo = {"process_weight": 1.0, "tis_cap": 2.0}
    gated = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(**algo, process_groups="mixed"))
    ungated = _trainer(tiny_model_dir, algo=LearnerAlgoConfig(**algo))
    assert gated.algo.resolved_definition()["process"]["groups"] == "mixed"
    tok = load_tokenizer(tiny_model_dir)
    batch = pad_batch(_rows(groups), pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    adv_gated, _ = gated.advantages(batch)
    adv_ungated, _ = ungated.advantages(batch)
    tied = batch.row_prompt == 0
    assert bool((adv_gated[tied] == 0).all()) and bool((adv_ungated[tied] != 0).any())
    torch.testing.assert_close(adv_gated[~tied], adv_ungated[~tied], rtol=0, atol=0)

    gated_metrics = gated.step(_rows(groups))
    ungated_metrics = ungated.step(_rows(groups))
    assert gated_metrics["optim/zero_advantage_rows_skipped"] == 4.0
    assert ungated_metrics["optim/zero_advantage_rows_skipped"] == 0.0

    gated, ungated = (
        _trainer(tiny_model_dir, algo=LearnerAlgoConfig(**algo, process_groups=mode))
        for mode in ("mixed", "all")
    )
    before = _params(gated)
    metrics = gated.step(_rows(groups[:1]))
    assert all(torch.equal(before[k], v) for k, v in _params(gated).items())
    assert metrics["optim/no_signal_steps"] == 1.0 and metrics["optim/skipped_steps"] == 0.0
    before = _params(ungated)
    ungated.step(_rows(groups[:1]))
    assert max(float((before[k] - v).abs().max()) for k, v in _params(ungated).items()) > 1e-5


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_step_matches_cpu(tiny_model_dir: Path, make_groups) -> None:
    groups = make_groups(num_groups=3, group_size=4, seed=1)
    for member in groups[0].members:
        member.outcome.reward = 0.0  # a tied group through the process gate on both devices
    algo = LearnerAlgoConfig(clip_high=0.28, tis_cap=2.0, process_groups="mixed")
    cpu = _trainer(tiny_model_dir, algo=algo, dtype=torch.float64, device="cpu")
    gpu = _trainer(tiny_model_dir, algo=algo, dtype=torch.float64, device="auto")
    assert gpu.device.type == "cuda"
    m_cpu, m_gpu = cpu.step(_rows(groups)), gpu.step(_rows(groups))
    assert m_gpu["loss/total"] == pytest.approx(m_cpu["loss/total"], rel=1e-6)
    p_cpu, p_gpu = _params(cpu), _params(gpu)
    for k in p_cpu:
        torch.testing.assert_close(p_gpu[k].cpu(), p_cpu[k], rtol=0, atol=1e-6, msg=k)
