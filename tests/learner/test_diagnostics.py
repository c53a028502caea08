"""Diagnostics: golden values of the documented names and per-group records."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.advantages import group_advantages
from grpo.learner.diagnostics import batch_diagnostics, group_records
from grpo.learner.losses import policy_loss

T = torch.tensor
NAN = float("nan")


def _batch():
    # group 0 all correct, group 1 mixed (one missing), group 2 all wrong
    rewards = T([[1.0, 1.0, 1.0, 1.0], [1.0, 0.0, NAN, 0.0], [0.0, 0.0, 0.0, 0.0]])
    lengths = T([2, 2, 2, 2, 4, 8, 1, 6, 3, 3, 3, 3])
    mask = torch.arange(8).unsqueeze(0) < lengths.unsqueeze(1)
    return rewards, mask, lengths


def test_batch_diagnostics_golden_values():
    rewards, mask, _ = _batch()
    adv = group_advantages(rewards)
    lp = torch.zeros(12, 8)
    _, loss_stats = policy_loss(lp, lp, adv.reshape(-1), mask)
    truncated = T([False] * 5 + [True] + [False] * 6)
    d = batch_diagnostics(
        rewards,
        adv,
        mask,
        truncated=truncated,
        slices={"task": ["a"] * 4 + ["b"] * 8},
        loss_stats=loss_stats,
        entropy_mean=0.7,
        dropped_groups=2,
        dropped_tokens=40,
        timings={"straggler_wait_s": 1.5},
    )
    assert d["groups/count"] == 3 and d["groups/missing"] == 1
    assert d["groups/missing_frac"] == pytest.approx(1 / 12)
    assert d["groups/all_correct_frac"] == pytest.approx(1 / 3)
    assert d["groups/all_wrong_frac"] == pytest.approx(1 / 3)
    assert d["groups/mixed_frac"] == pytest.approx(1 / 3)
    assert d["groups/correct_frac"] == pytest.approx(5 / 11)
    assert d["groups/reward_mean"] == pytest.approx(5 / 11)
    assert d["groups/reward_std_mean"] == pytest.approx(math.sqrt(2 / 9) / 3)
    assert d["adv/zero_variance_groups"] == 2 and d["adv/too_few_valid_groups"] == 0
    assert d["adv/std_convention"] == 0.0
    # group 1: rewards [1, 0, 0], mean 1/3, |centered| = [2/3, 1/3, 1/3]
    assert d["adv/centered_abs_mean"] == pytest.approx((4 / 3) / 11)
    scaled = (2 / 3 + 2 / 3) / math.sqrt(2 / 9)
    assert d["adv/abs_mean"] == pytest.approx(scaled / 11)
    assert d["adv/scale"] == pytest.approx(1 / math.sqrt(2 / 9))
    assert (d["adv/pos_frac"], d["adv/neg_frac"]) == (pytest.approx(1 / 11), pytest.approx(2 / 11))
    assert d["len/mean_pos_adv"] == 4.0 and d["len/mean_neg_adv"] == 7.0
    assert d["len/truncated_frac"] == pytest.approx(1 / 12)
    assert (d["denom/prompts"], d["denom/responses"], d["denom/tokens"]) == (3.0, 12.0, 39.0)
    # token_mean weight: only group 1 has nonzero advantages → task b carries everything
    assert d["weight/task/a"] == 0.0 and d["weight/task/b"] == 1.0
    # response 4 (4 tokens: q2) and 5 (8 tokens: q4), 7 (6 tokens: q3) weighted by |A|·len
    a_pos, a_neg = (2 / 3) / math.sqrt(2 / 9), (1 / 3) / math.sqrt(2 / 9)
    total = 4 * a_pos + 8 * a_neg + 6 * a_neg
    assert d["weight/length/q2"] == pytest.approx(4 * a_pos / total)
    assert d["weight/length/q4"] == pytest.approx(8 * a_neg / total)
    assert d["loss/clip_frac_low"] == 0.0 and d["loss/clip_frac_high"] == 0.0
    assert d["entropy/mean"] == 0.7 and d["time/straggler_wait_s"] == 1.5
    assert (d["dynsamp/dropped_groups"], d["dynsamp/dropped_tokens"]) == (2.0, 40.0)
    assert all(isinstance(v, float) for v in d.values())


def test_response_mean_weights_and_sample_std_flag():
    rewards = T([[1.0, 0.0]])
    adv = group_advantages(rewards, std="sample")
    mask = torch.arange(8).unsqueeze(0) < T([[2], [8]])
    d = batch_diagnostics(
        rewards,
        adv,
        mask,
        std="sample",
        reduction="response_mean",
        slices={"difficulty": ["easy", "hard"]},
    )
    assert d["adv/std_convention"] == 1.0
    # response_mean gives each response the same weight whatever its length
    assert d["weight/difficulty/easy"] == pytest.approx(0.5)
    fixed = batch_diagnostics(
        rewards,
        adv,
        mask,
        reduction="fixed_budget",
        max_response_length=8,
        slices={"difficulty": ["easy", "hard"]},
    )
    assert fixed["weight/difficulty/easy"] == pytest.approx(0.2)


def test_rows_mapped_by_prompt_and_slot():
    rewards = T([[1.0, 0.0, NAN]])
    adv = group_advantages(rewards)
    mask = torch.ones(2, 3, dtype=torch.bool)
    d = batch_diagnostics(
        rewards, adv, mask, row_prompt=T([0, 0]), row_slot=T([1, 0]), lengths=T([3, 1])
    )
    assert d["len/mean_pos_adv"] == 1.0 and d["len/mean_neg_adv"] == 3.0
    with pytest.raises(ValueError, match="row_prompt"):
        batch_diagnostics(rewards, adv, mask)


def test_group_records():
    rewards, _, _ = _batch()
    recs = group_records(rewards, group_ids=["g0", "g1", "g2"])
    assert [r.group_id for r in recs] == ["g0", "g1", "g2"]
    assert (recs[1].correct, recs[1].missing, recs[1].size) == (1, 1, 4)
    assert recs[1].mean == pytest.approx(1 / 3)
    assert recs[1].std == pytest.approx(math.sqrt(2 / 9))
    assert recs[0].zero_variance and not recs[1].zero_variance


def test_constant_float32_group_counts_one_zero_variance_group():
    rewards = T([[0.3] * 6, [1.0, 0.0, 1.0, 0.0, 1.0, 0.0]], dtype=torch.float32)
    adv = group_advantages(rewards)
    d = batch_diagnostics(rewards, adv, torch.ones(12, 4, dtype=torch.bool))
    assert d["adv/zero_variance_groups"] == 1.0
    assert d["adv/zero_frac"] == 0.5
    assert d["groups/all_wrong_frac"] == 0.5  # 0.3 < correct_threshold 1.0


def test_undecided_members_are_counted_per_step() -> None:
    from grpo.learner.diagnostics import undecided_diagnostics

    out = undecided_diagnostics([0, 2, 1], [4, 4, 4])
    assert out == {"groups/undecided": 3.0, "groups/undecided_frac": 0.25}
    # a share of no member is not written (not 0)
    assert undecided_diagnostics([], []) == {"groups/undecided": 0.0}
    with pytest.raises(ValueError, match="more undecided"):
        undecided_diagnostics([5], [4])


def test_a_mean_over_an_empty_set_is_not_written():
    # Every group all wrong except one mixed group whose advantages are only >= 0 on the
    # responses that have loss tokens: no negative-advantage row, so no len/mean_neg_adv.
    rewards = T([[0.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
    adv = group_advantages(rewards)  # all tied: every advantage 0
    mask = torch.ones(8, 4, dtype=torch.bool)
    d = batch_diagnostics(rewards, adv, mask, slices={"task": ["a"] * 8})
    for name in ("len/mean_pos_adv", "len/mean_neg_adv", "adv/scale"):
        assert name not in d, name  # was 0.0: a false zero on every plot
    assert d["len/mean_zero_adv"] == 4.0 and d["len/mean"] == 4.0
    assert not [k for k in d if k.startswith("weight/")]  # no gradient weight to share
    assert d["adv/zero_frac"] == 1.0 and d["adv/pos_frac"] == 0.0  # shares of 8 valid

    # Only positive advantages on the rows with a sign
    mixed = T([[1.0, 0.0, 0.0, 0.0]])
    a = group_advantages(mixed)
    a = torch.where(a < 0, torch.zeros_like(a), a)
    d = batch_diagnostics(mixed, a, torch.ones(4, 3, dtype=torch.bool))
    assert d["len/mean_pos_adv"] == 3.0 and "len/mean_neg_adv" not in d

    # No valid reward at all: no reward mean, no correct share, no advantage means or shares
    missing = T([[NAN, NAN, NAN, NAN]])
    d = batch_diagnostics(missing, torch.zeros(1, 4), torch.ones(4, 3, dtype=torch.bool))
    for name in (
        "groups/reward_mean", "groups/correct_frac", "groups/reward_std_mean",
        "groups/all_correct_frac", "groups/all_wrong_frac", "groups/mixed_frac",
        "adv/centered_abs_mean", "adv/abs_mean", "adv/pos_frac", "adv/neg_frac",
        "adv/zero_frac",
    ):  # fmt: skip
        assert name not in d, name
    assert d["groups/missing"] == 4 and d["groups/missing_frac"] == 1.0
    assert d["groups/no_valid"] == 1

    # No loss token: no token mean
    d = batch_diagnostics(rewards, adv, torch.zeros(8, 4, dtype=torch.bool))
    assert "adv/token_abs_mean" not in d and d["denom/tokens"] == 0
