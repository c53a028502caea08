"""Policy-loss golden values: reductions, gradient weights, clipping, TIS, NaN safety, gradcheck."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.advantages import group_advantages
from grpo.learner.losses import (
    LOSS_TYPES,
    REDUCTIONS,
    loss_denominators,
    merge_loss_stats,
    policy_loss,
)

T = torch.tensor


def _mask(lengths: list[int], width: int) -> torch.Tensor:
    return torch.arange(width).unsqueeze(0) < T(lengths).unsqueeze(1)


@pytest.mark.parametrize(
    ("reduction", "want"), [("token_mean", 2.5), ("response_mean", 2.0), ("fixed_budget", 1.25)]
)
def test_reductions_golden_and_split_invariant(reduction: str, want: float):
    # two responses with 2 and 6 tokens, per-token loss 1 and 3 (ratio 1, loss = −A)
    mask = _mask([2, 6], 8)
    lp = torch.zeros(2, 8)
    adv = T([-1.0, -3.0])
    loss, _ = policy_loss(lp, lp, adv, mask, reduction=reduction, max_response_length=8)
    assert loss.item() == pytest.approx(want, abs=1e-7)
    denom = loss_denominators(mask)
    assert (denom.num_tokens, denom.num_responses) == (8.0, 2.0)
    parts = [
        policy_loss(
            lp[i : i + 1],
            lp[i : i + 1],
            adv[i : i + 1],
            mask[i : i + 1],
            reduction=reduction,
            max_response_length=8,
            num_tokens=denom.num_tokens,
            num_responses=denom.num_responses,
        )
        for i in range(2)
    ]
    assert sum(p[0].item() for p in parts) == pytest.approx(want, abs=1e-7)
    assert merge_loss_stats([p[1] for p in parts])["loss/total"] == pytest.approx(want)


@pytest.mark.parametrize(
    ("reduction", "weights"),
    [("response_mean", [0.25, 0.0625]), ("token_mean", [0.1, 0.1]), ("fixed_budget", [0.0625] * 2)],
)
def test_per_token_gradient_weights(reduction: str, weights: list[float]):
    mask = _mask([2, 8], 8)
    lp = torch.zeros(2, 8, requires_grad=True)
    adv = T([1.0, -1.0])
    loss, _ = policy_loss(lp, lp.detach(), adv, mask, reduction=reduction, max_response_length=8)
    loss.backward()
    assert lp.grad is not None
    # d loss / d logp = −A · ratio · weight, and 0 outside the mask
    torch.testing.assert_close(lp.grad[0, :2], T([-weights[0]] * 2))
    torch.testing.assert_close(lp.grad[1], T([weights[1]] * 8))
    assert torch.equal(lp.grad[0, 2:], torch.zeros(6))


def _one(ratio: float, adv: float, **kw):
    lp = torch.tensor([[float(torch.log(torch.tensor(ratio)))]], dtype=torch.float64)
    lp.requires_grad_(True)
    old = torch.zeros(1, 1, dtype=torch.float64)
    loss, stats = policy_loss(lp, old, T([adv], dtype=torch.float64), torch.ones(1, 1), **kw)
    loss.backward()
    assert lp.grad is not None
    return loss.item(), lp.grad.item(), stats


# (ratio, advantage, loss, d loss/d logp, low clipped, high clipped); band [0.8, 1.28]
CLIP_CASES = [
    (0.5, 1.0, -0.5, -0.5, 0, 0),  # below band, A > 0: unclipped (pessimistic min)
    (1.1, 1.0, -1.1, -1.1, 0, 0),  # inside
    (1.5, 1.0, -1.28, 0.0, 0, 1),  # above band, A > 0: clipped high, no gradient
    (0.5, -1.0, 0.8, 0.0, 1, 0),  # below band, A < 0: clipped low, no gradient
    (1.1, -1.0, 1.1, 1.1, 0, 0),  # inside
    (1.5, -1.0, 1.5, 1.5, 0, 0),  # above band, A < 0: unclipped
    (1.25, 2.0, -2.5, -2.5, 0, 0),  # inside the asymmetric band (1.25 < 1.28)
    (0.79, -2.0, 1.6, 0.0, 1, 0),
]


@pytest.mark.parametrize(("ratio", "adv", "loss", "grad", "low", "high"), CLIP_CASES)
def test_clipping_hand_cases(ratio, adv, loss, grad, low, high):
    got_loss, got_grad, stats = _one(ratio, adv, clip_low=0.2, clip_high=0.28)
    assert got_loss == pytest.approx(loss)
    assert got_grad == pytest.approx(grad)
    assert stats["loss/clip_frac_low"] == low
    assert stats["loss/clip_frac_high"] == high


def test_dual_clip_bounds_negative_advantage_loss():
    loss, grad, stats = _one(4.0, -1.0, dual_clip=3.0)
    assert (loss, grad, stats["loss/dual_clip_frac"]) == (pytest.approx(3.0), 0.0, 1.0)
    loss, grad, stats = _one(2.0, -1.0, dual_clip=3.0)  # below c: ordinary PPO
    assert (loss, grad, stats["loss/dual_clip_frac"]) == (pytest.approx(2.0), pytest.approx(2.0), 0)
    loss, _, _ = _one(4.0, 1.0, dual_clip=3.0)  # positive advantage untouched
    assert loss == pytest.approx(-1.2)
    with pytest.raises(ValueError, match="dual_clip"):
        _one(1.0, 1.0, dual_clip=0.5)


def test_clip_fractions_are_token_shares():
    ratio = T([[0.5, 0.5, 1.0, 1.5, 1.5, 1.0, 1.0, 1.0]], dtype=torch.float64)
    adv = T([[-1.0, 1.0, 1.0, 1.0, -1.0, 1.0, 1.0, 7.0]], dtype=torch.float64)
    mask = T([[1, 1, 1, 1, 1, 1, 1, 0]], dtype=torch.bool)  # last token is padding
    _, stats = policy_loss(ratio.log(), torch.zeros_like(ratio), adv, mask)
    assert stats["loss/clip_frac_low"] == pytest.approx(1 / 7)
    assert stats["loss/clip_frac_high"] == pytest.approx(1 / 7)
    assert stats["loss/ratio_max"] == pytest.approx(1.5)
    assert stats["loss/ratio_min"] == pytest.approx(0.5)
    assert stats["loss/ratio_mean"] == pytest.approx(7.0 / 7)


def test_cispo_keeps_gradient_through_clipped_weight():
    # ratio 1.5 above the band: PPO gives no gradient, CISPO gives −clip(r)·A per token
    loss, grad, stats = _one(1.5, 1.0, loss_type="cispo", clip_high=0.28)
    assert grad == pytest.approx(-1.28)
    # value: −A·w·(1 + log r − log w), equal to −A·r inside the band
    assert loss == pytest.approx(-1.28 * (1 + math.log(1.5) - math.log(1.28)))
    assert stats["loss/clip_frac_high"] == 1.0
    loss, grad, stats = _one(1.1, -2.0, loss_type="cispo", clip_high=0.28)
    assert (loss, grad) == (pytest.approx(2.2), pytest.approx(2.2))
    assert stats["loss/clip_frac_high"] == 0.0


def test_gspo_sequence_ratio_is_length_normalized():
    lp = T([[0.1, 0.3, 9.0]], dtype=torch.float64, requires_grad=True)
    mask = T([[True, True, False]])
    loss, stats = policy_loss(
        lp,
        torch.zeros(1, 3, dtype=torch.float64),
        T([1.0]),
        mask,
        ratio_level="sequence",
        clip_low=0.5,
        clip_high=0.5,
        reduction="response_mean",
    )
    s = torch.exp(torch.tensor(0.2, dtype=torch.float64)).item()
    assert stats["loss/ratio_mean"] == pytest.approx(s)
    assert loss.item() == pytest.approx(-s)
    loss.backward()
    assert lp.grad is not None
    torch.testing.assert_close(lp.grad[0], T([-s / 2, -s / 2, 0.0], dtype=torch.float64))
    # a small GSPO band clips the whole sequence
    _, stats = policy_loss(
        lp,
        torch.zeros(1, 3, dtype=torch.float64),
        T([1.0]),
        mask,
        ratio_level="sequence",
        clip_low=3e-4,
        clip_high=4e-4,
    )
    assert stats["loss/clip_frac_high"] == 1.0


def test_truncated_importance_weights():
    old = T([[-1.0, -1.0, -1.0]])
    behavior = T([[-1.0, -2.0, -0.5]])  # π_old/μ = 1, e, e^-0.5
    lp = old.clone().requires_grad_(True)
    adv = T([1.0])
    loss, stats = policy_loss(
        lp, old, adv, torch.ones(1, 3), behavior_logprobs=behavior, tis_cap=2.0
    )
    w = [1.0, 2.0, float(torch.exp(T(-0.5)))]
    assert loss.item() == pytest.approx(-sum(w) / 3, rel=1e-6)
    assert stats["tis/weight_mean"] == pytest.approx(sum(w) / 3, rel=1e-6)
    assert stats["tis/capped_frac"] == pytest.approx(1 / 3)
    assert stats["tis/mismatch_kl"] > 0
    loss.backward()
    assert lp.grad is not None
    torch.testing.assert_close(lp.grad[0], -T(w) / 3)
    with pytest.raises(ValueError, match="tis_cap needs behavior_logprobs"):
        policy_loss(lp, old, adv, torch.ones(1, 3), tis_cap=2.0)


def test_kl_term_added_with_weight():
    lp = T([[-1.0, -1.0]], requires_grad=True)
    ref = T([[-1.5, -0.5]])
    loss, stats = policy_loss(
        lp,
        lp.detach(),
        T([0.0]),
        torch.ones(1, 2),
        ref_logprobs=ref,
        kl_coef=0.1,
        kl_estimator="k1",
    )
    assert loss.item() == pytest.approx(0.0, abs=1e-7)  # k1: (0.5 − 0.5)/2
    assert stats["kl/ref_mean"] == pytest.approx(0.0, abs=1e-7)
    loss, stats = policy_loss(
        lp,
        lp.detach(),
        T([0.0]),
        torch.ones(1, 2),
        ref_logprobs=ref,
        kl_coef=0.1,
        kl_estimator="k2",
    )
    assert loss.item() == pytest.approx(0.1 * 0.125)
    with pytest.raises(ValueError, match="ref_logprobs"):
        policy_loss(lp, lp, T([0.0]), torch.ones(1, 2), kl_coef=0.1)


def test_nan_reward_or_padding_never_makes_loss_or_gradient_nan():
    rewards = T([[1.0, 0.0, float("nan"), 1.0]])
    adv = group_advantages(rewards).reshape(-1)
    mask = _mask([3, 2, 4, 1], 5)
    lp = torch.randn(4, 5).requires_grad_(True)
    old = lp.detach() + 0.1
    old[~mask] = float("nan")  # garbage in padding
    for reduction in REDUCTIONS:
        for loss_type in LOSS_TYPES:
            lp.grad = None
            padded_lp = torch.where(mask, lp, float("nan"))
            loss, stats = policy_loss(
                padded_lp,
                old,
                adv,
                mask,
                reduction=reduction,
                loss_type=loss_type,
                max_response_length=5,
            )
            loss.backward()
            assert lp.grad is not None
            assert torch.isfinite(loss) and torch.isfinite(lp.grad).all()
            assert all(v == v for v in stats.values())  # no NaN stats


def test_nan_advantage_on_a_loss_token_is_an_error():
    with pytest.raises(ValueError, match="NaN or inf"):
        policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), T([float("nan")]), torch.ones(1, 2))


def test_unknown_names_list_valid_ones():
    args = (torch.zeros(1, 2), torch.zeros(1, 2), T([1.0]), torch.ones(1, 2))
    with pytest.raises(ValueError, match="valid: fixed_budget, response_mean, token_mean"):
        policy_loss(*args, reduction="seq_mean")
    with pytest.raises(ValueError, match="valid: cispo, ppo"):
        policy_loss(*args, loss_type="grpo")
    with pytest.raises(ValueError, match="max_response_length"):
        policy_loss(*args, reduction="fixed_budget")
    with pytest.raises(ValueError, match="advantages must be"):
        policy_loss(torch.zeros(1, 2), torch.zeros(1, 2), T([1.0, 2.0, 3.0]), torch.ones(1, 2))


@pytest.mark.parametrize("reduction", ["token_mean", "response_mean", "fixed_budget"])
@pytest.mark.parametrize(
    ("loss_type", "ratio_level"), [("ppo", "token"), ("ppo", "sequence"), ("cispo", "token")]
)
def test_gradcheck(reduction: str, loss_type: str, ratio_level: str):
    g = torch.Generator().manual_seed(3)
    old = -torch.rand(3, 5, generator=g, dtype=torch.float64) - 0.5
    # stay clear of the clip kinks at 1 ± 0.2 so finite differences are valid
    shift = T([0.05, -0.05, 0.5, -0.5, 0.0], dtype=torch.float64)
    lp = (old + shift).requires_grad_(True)
    adv = T([[1.0, -0.5, 2.0, -1.0, 0.3]] * 3, dtype=torch.float64) * T([[1.0], [-1.0], [0.5]])
    mask = _mask([5, 3, 1], 5)
    ref = old - 0.1

    def fn(x: torch.Tensor) -> torch.Tensor:
        return policy_loss(
            x,
            old,
            adv,
            mask,
            reduction=reduction,
            loss_type=loss_type,
            ratio_level=ratio_level,
            max_response_length=6,
            ref_logprobs=ref,
            kl_coef=0.05,
            dual_clip=3.0 if loss_type == "ppo" else None,
        )[0]

    assert torch.autograd.gradcheck(fn, (lp,))


def test_merged_stats_without_a_loss_token_keep_only_the_sums():
    lp = torch.zeros(2, 4)
    empty = torch.zeros(2, 4, dtype=torch.bool)
    _, stats = policy_loss(lp, lp, T([1.0, -1.0]), empty)
    merged = merge_loss_stats([stats, stats])
    # a clip fraction, ratio or KL over no token is not a number: not written (was 0.0)
    assert set(merged) == {"loss/total", "loss/tokens", "loss/responses"}
    assert merged["loss/tokens"] == 0.0
    full = torch.ones(2, 4, dtype=torch.bool)
    _, live = policy_loss(lp, lp, T([1.0, -1.0]), full)
    merged = merge_loss_stats([stats, live])  # the empty part only adds to the sums
    assert merged["loss/clip_frac_low"] == live["loss/clip_frac_low"]
    assert merged["loss/ratio_min"] == 1.0 and merged["loss/tokens"] == 8.0
