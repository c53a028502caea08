"""Golden values of the group-relative advantage estimators (issue 3, DESIGN.md)."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.advantages import (
    ESTIMATORS,
    group_advantages,
    group_stats,
    grouped_advantages,
)

T = torch.tensor


def test_population_and_sample_std_on_the_seed_group():
    rewards = T([[1.0, 1.0, 0.0, 0.0]])
    assert torch.equal(group_advantages(rewards), T([[1.0, 1.0, -1.0, -1.0]]))
    s = 0.5 / math.sqrt(1 / 3)
    torch.testing.assert_close(group_advantages(rewards, std="sample"), T([[s, s, -s, -s]]))
    assert s == pytest.approx(0.8660254)


def test_rloo_is_leave_one_out_and_scaled_centering():
    rewards = T([[1.0, 1.0, 0.0, 0.0]])
    rloo = group_advantages(rewards, "rloo")
    assert rloo[0, 0].item() == pytest.approx(2 / 3)
    centered = group_advantages(rewards, "dr_grpo")
    g = rewards.shape[1]
    torch.testing.assert_close(centered, (g - 1) / g * rloo)


def test_mixed_and_uniform_prompts_without_gradient():
    rewards = T([[0.0, 1.0, 1.0], [1.0, 1.0, 1.0]], requires_grad=True)
    rloo = group_advantages(rewards, "rloo")
    mean0 = 2 / 3
    torch.testing.assert_close(rloo[0], 1.5 * (rewards[0].detach() - mean0))
    grpo = group_advantages(rewards)
    assert grpo[0].sum().item() == pytest.approx(0.0, abs=1e-7)
    for estimator in ESTIMATORS:
        adv = group_advantages(rewards, estimator)
        assert torch.equal(adv[1], torch.zeros(3))  # exactly, not approximately
        assert not adv.requires_grad and adv.grad_fn is None


def test_constant_float32_group_is_exactly_zero_and_counted():
    rewards = T([[0.3] * 6], dtype=torch.float32)
    # the trap this guards against: a float32 mean one ulp off the constant
    assert rewards.mean().item() != rewards[0, 0].item()
    for estimator in ESTIMATORS:
        assert torch.equal(group_advantages(rewards, estimator), torch.zeros(1, 6))
    stats = group_stats(rewards)
    assert stats.zero_variance.tolist() == [True] and int(stats.zero_variance.sum()) == 1


def test_one_outlier_group():
    rewards = T([[0.35] * 7 + [0.0]])
    pop = group_advantages(rewards)
    torch.testing.assert_close(pop, T([[0.37796447] * 7 + [-2.6457513]]))
    sample = group_advantages(rewards, std="sample")
    torch.testing.assert_close(sample, T([[0.35355339] * 7 + [-2.4748737]]))
    torch.testing.assert_close(group_advantages(rewards, "rloo"), T([[0.05] * 7 + [-0.35]]))


def test_centering_never_crosses_prompts():
    flat = T([1.0, 0, 0, 0, 1, 1, 1, 0])
    adv = group_advantages(flat.reshape(2, 4)).reshape(-1)
    a, b = 1.7320508, 0.57735027
    torch.testing.assert_close(adv, T([a, -b, -b, -b, b, b, b, -a]))
    batch_wide = T([1.0, -1, -1, -1, 1, 1, 1, -1])
    assert not torch.allclose(adv, batch_wide, atol=0.1)


def test_group_split_over_micro_batches_by_index():
    rewards = T([1.0, 0, 1, 1, 0, 0, 1, 0])
    want = T([1.0, -1, 1, 1, -1, -1, 1, -1])
    # members of the group arrive interleaved with another group's, in two micro-batches
    other = T([0.0, 1, 0, 1, 1, 1, 0, 0])
    mixed = torch.stack([rewards, other], 1).reshape(-1)
    index = T([0, 1] * 8)
    adv = grouped_advantages(mixed, index, 2)
    torch.testing.assert_close(adv[index == 0], want)
    assert torch.equal(group_advantages(rewards.reshape(1, 8))[0], want)


def test_missing_rewards_are_masked_not_zero_filled():
    rewards = T([[1.0, 0.0, float("nan"), 1.0]])
    valid = T([[True, True, False, True]])
    adv = group_advantages(rewards, valid=valid)
    want = group_advantages(T([[1.0, 0.0, 1.0]]))
    torch.testing.assert_close(adv[0, [0, 1, 3]], want[0])
    assert adv[0, 2].item() == 0.0
    # NaN alone is also treated as invalid
    torch.testing.assert_close(group_advantages(rewards), adv)
    # filling with 0 would give a different answer
    assert not torch.allclose(adv, group_advantages(T([[1.0, 0.0, 0.0, 1.0]])))


def test_invalid_finite_reward_is_excluded():
    rewards = T([[1.0, 0.0, 5.0, 1.0]])
    adv = group_advantages(rewards, valid=T([[True, True, False, True]]), estimator="rloo")
    torch.testing.assert_close(adv[0, [0, 1, 3]], group_advantages(T([[1.0, 0.0, 1.0]]), "rloo")[0])


def test_group_with_fewer_than_two_valid_is_zero_and_counted():
    rewards = T([[1.0, float("nan"), float("nan")], [1.0, 0.0, 1.0]])
    adv = group_advantages(rewards)
    assert torch.equal(adv[0], torch.zeros(3))
    stats = group_stats(rewards)
    assert stats.too_few_valid.tolist() == [True, False]
    assert stats.count.tolist() == [1, 3]


def test_group_size_below_two_raises():
    with pytest.raises(ValueError, match="G = 1 < 2"):
        group_advantages(T([[1.0], [0.0]]))
    with pytest.raises(ValueError, match="group size < 2"):
        grouped_advantages(T([1.0, 0.0, 1.0]), T([0, 0, 1]), 2)


def test_bad_arguments_name_what_is_wrong():
    with pytest.raises(ValueError, match="valid: dr_grpo, grpo, rloo"):
        group_advantages(T([[1.0, 0.0]]), "ppo")
    with pytest.raises(ValueError, match="std convention"):
        group_advantages(T([[1.0, 0.0]]), std="bessel")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="valid has shape"):
        group_advantages(T([[1.0, 0.0]]), valid=T([True, False]))
    with pytest.raises(ValueError, match=r"\[P, G\]"):
        group_advantages(T([1.0, 0.0]))


def test_eps_is_a_threshold_not_added():
    rewards = T([[0.0, 0.0, 0.0, 1e-9]], dtype=torch.float64)
    assert torch.equal(group_advantages(rewards, eps=1e-6), torch.zeros(1, 4, dtype=torch.float64))
    assert group_advantages(rewards, eps=1e-12)[0, 3].item() == pytest.approx(math.sqrt(3))
    assert group_stats(rewards, eps=1e-6).zero_variance.tolist() == [True]


def test_permuting_prompts_permutes_the_output():
    g = torch.Generator().manual_seed(0)
    rewards = torch.randint(0, 2, (6, 5), generator=g).float()
    rewards[2, 1] = float("nan")
    perm = torch.randperm(6, generator=g)
    for estimator in ESTIMATORS:
        adv = group_advantages(rewards, estimator)
        assert torch.equal(group_advantages(rewards[perm], estimator), adv[perm])
