"""PPO's critic math: GAE on hand-computed cases, token rewards, whitening, clipped value loss,
explained variance (issue 18 item 1)."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.value import (
    CRITIC_ESTIMATORS,
    explained_variance,
    gae_advantages,
    masked_whiten,
    token_rewards,
    value_loss,
)


def T(data: list) -> torch.Tensor:  # a short float64 constructor
    return torch.tensor(data, dtype=torch.float64)


V4 = [0.1, 0.2, 0.3, 0.4]  # values of the 4 states of a 4-token response
R_END = [0.0, 0.0, 0.0, 1.0]  # outcome reward 1 on the last token only

# (gamma, lam) -> advantages, worked by hand from δ_t = r_t + γV_{t+1} − V_t, A_t = δ_t + γλA_{t+1}
HAND = {
    # γ = λ = 1: A_t = Σ r − V_t
    (1.0, 1.0): [0.9, 0.8, 0.7, 0.6],
    # γ = 0.9, λ = 1: A_t = 0.9^(3−t) − V_t
    (0.9, 1.0): [0.729 - 0.1, 0.81 - 0.2, 0.9 - 0.3, 0.6],
    # γ = 1, λ = 0.95: δ = [0.1, 0.1, 0.1, 0.6]; A3 = 0.6, A2 = 0.1 + 0.95·0.6 = 0.67, ...
    (1.0, 0.95): [0.799675, 0.7365, 0.67, 0.6],
    # γ = 0.9, λ = 0.95: δ = [0.08, 0.07, 0.06, 0.6], γλ = 0.855
    (0.9, 0.95): [0.08 + 0.855 * 0.559915, 0.07 + 0.855 * 0.573, 0.06 + 0.855 * 0.6, 0.6],
}


@pytest.mark.parametrize(("gamma", "lam"), list(HAND))
def test_gae_four_token_response_reward_at_the_end(gamma: float, lam: float):
    mask = torch.ones(1, 4, dtype=torch.bool)
    adv, ret = gae_advantages(T([R_END]), T([V4]), mask, gamma=gamma, lam=lam)
    assert adv.dtype == torch.float64
    assert adv[0].tolist() == pytest.approx(HAND[(gamma, lam)], abs=1e-12)
    assert ret[0].tolist() == pytest.approx(
        [a + v for a, v in zip(HAND[(gamma, lam)], V4, strict=True)]
    )
    if lam == 1.0:  # λ = 1: the return is the discounted reward-to-go, whatever V is
        assert ret[0].tolist() == pytest.approx([gamma ** (3 - t) for t in range(4)])


def test_gae_masked_padding_and_holes_are_skipped():
    nan = float("nan")
    rewards = T([[0.0, 0.0, 0.0, 1.0], [0.0, 1.0, nan, nan], [0.0, nan, 0.0, 1.0]])
    values = T([V4, [0.1, 0.2, nan, nan], [0.1, nan, 0.3, 0.4]])
    mask = T([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 1, 1]]).bool()
    adv, ret = gae_advantages(rewards, values, mask, gamma=0.9, lam=0.95)
    assert torch.isfinite(adv).all() and torch.isfinite(ret).all()
    # Row 1 ends at token 1 (EOS): A1 = 1 − 0.2, A0 = (0.9·0.2 − 0.1) + 0.855·0.8.
    assert adv[1].tolist() == pytest.approx([0.08 + 0.855 * 0.8, 0.8, 0.0, 0.0])
    assert ret[1, 2:].tolist() == [0.0, 0.0]
    # Row 2 skips token 1: token 0's next state is token 2's (V = 0.3).
    a3, a2 = 0.6, 0.06 + 0.855 * 0.6
    assert adv[2].tolist() == pytest.approx([(0.9 * 0.3 - 0.1) + 0.855 * a2, 0.0, a2, a3])


def test_gae_of_a_response_cut_at_the_length_limit_is_terminal():
    # A response with no EOS filling all 4 columns (finish reason LENGTH): the verifier scored
    # it, its reward sits on token 3, and nothing is bootstrapped past the limit.
    mask = torch.ones(2, 4, dtype=torch.bool)  # row 0 truncated, row 1 ends with EOS at 3
    rewards = token_rewards(T([0.0, 1.0]), mask)
    assert rewards.tolist() == [[0.0] * 4, [0.0, 0.0, 0.0, 1.0]]
    values = T([[0.5, 0.5, 0.5, 0.5], V4])
    adv, ret = gae_advantages(rewards, values, mask, gamma=1.0, lam=1.0)
    assert adv[0].tolist() == pytest.approx([-0.5] * 4)  # 0 − V: no γ·V_4 term
    assert ret[0].tolist() == [0.0] * 4
    # Masked out by mask_truncated: the row takes no part at all.
    dropped = T([[0, 0, 0, 0], [1, 1, 1, 1]]).bool()
    adv, _ = gae_advantages(token_rewards(T([0.0, 1.0]), dropped), values, dropped)
    assert adv[0].tolist() == [0.0] * 4 and adv[1].tolist() == pytest.approx(HAND[(1.0, 1.0)])


def test_token_rewards_places_outcome_and_steps_and_rejects_missing_rewards():
    mask = T([[1, 1, 1, 0], [1, 1, 0, 0], [0, 0, 0, 0]]).bool()
    r = token_rewards(
        T([1.0, 0.0, float("nan")]),
        mask,
        step_ends=[[0, 2], [1, 3], []],
        step_rewards=[[0.5, 1.0], [1.0, 1.0], []],
        outcome_weight=2.0,
        process_weight=0.5,
    )
    # row 0: steps at 0 and 2, outcome 2·1 on token 2; row 1: step at 3 lies outside the mask
    assert r.tolist() == [[0.25, 0.0, 2.5, 0.0], [0.0, 0.5, 0.0, 0.0], [0.0] * 4]
    with pytest.raises(ValueError, match=r"rows \[0\] have loss tokens but no finite outcome"):
        token_rewards(T([float("nan")]), torch.ones(1, 2, dtype=torch.bool))
    assert CRITIC_ESTIMATORS.get("gae") is gae_advantages
    with pytest.raises(ValueError, match="gamma and lam must lie in"):
        gae_advantages(r, r, mask, gamma=1.5)


def test_masked_whiten_is_over_loss_tokens_only():
    x = T([[1.0, 2.0, 99.0], [3.0, float("nan"), 4.0]])
    mask = T([[1, 1, 0], [1, 0, 1]]).bool()
    w = masked_whiten(x, mask, distributed=False)
    vals = torch.tensor([1.0, 2.0, 3.0, 4.0])
    want = (vals - vals.mean()) / torch.sqrt(vals.var() + 1e-8)  # Bessel, as verl
    assert w[mask].tolist() == pytest.approx(want.tolist(), abs=1e-6)
    assert w[~mask].tolist() == [0.0, 0.0]


def test_value_clipping_picks_the_larger_loss_and_stops_the_gradient():
    old = T([[0.5, 0.5, 0.5]])
    returns = T([[1.0, 1.0, 1.0]])
    new = T([[0.9, 0.6, 0.2]]).requires_grad_(True)
    mask = torch.ones(1, 3, dtype=torch.bool)
    loss, stats = value_loss(new, old, returns, mask, value_clip=0.2)
    # token 0: clipped to 0.7 → ½·0.09 (clipped branch larger, no gradient)
    # token 1: inside the band → ½·0.16, gradient −0.4
    # token 2: clipped to 0.3 → ½·0.49 < ½·0.64 → the unclipped term, gradient −0.8
    assert loss.item() == pytest.approx((0.045 + 0.08 + 0.32) / 3)
    assert stats["critic/value_clip_frac"] == pytest.approx(1 / 3)
    loss.backward()
    assert new.grad is not None
    assert new.grad[0].tolist() == pytest.approx([0.0, -0.4 / 3, -0.8 / 3])
    unclipped, _ = value_loss(new.detach(), old, returns, mask, value_clip=None)
    assert unclipped.item() == pytest.approx((0.005 + 0.08 + 0.32) / 3)
    # Same reductions and global denominators as the policy loss.
    half, _ = value_loss(new.detach(), old, returns, mask, value_clip=None, num_tokens=6.0)
    assert half.item() == pytest.approx(unclipped.item() / 2)
    fixed, _ = value_loss(
        new.detach(),
        old,
        returns,
        mask,
        value_clip=0.2,
        reduction="fixed_budget",
        max_response_length=6,
    )
    assert fixed.item() == pytest.approx((0.045 + 0.08 + 0.32) / 6)
    with pytest.raises(ValueError, match="value_clip must be > 0"):
        value_loss(new, old, returns, mask, value_clip=0.0)


def test_explained_variance_values_and_the_constant_return_convention():
    mask = torch.ones(1, 4, dtype=torch.bool)
    g = T([[0.0, 1.0, 2.0, 3.0]])
    assert explained_variance(g, g, mask, distributed=False) == 1.0
    assert explained_variance(torch.zeros(1, 4) + 1.5, g, mask, distributed=False) == 0.0
    half = g * 0.5  # residual g/2: Var = 1.25/4 of Var(g)·4 → 1 − 0.25
    assert explained_variance(half, g, mask, distributed=False) == pytest.approx(0.75)
    const = torch.full((1, 4), 0.7)
    assert explained_variance(const, const, mask, distributed=False) == 1.0
    # Var[G] = 0 and Var[G − V] > 0 → 0 (scikit-learn's force_finite convention) ...
    assert explained_variance(T([[0.0, 0.1, 0.0, 0.1]]), const, mask, distributed=False) == 0.0
    # ... while a constant offset leaves no residual variance: the definition ignores bias.
    assert explained_variance(torch.zeros(1, 4), const, mask, distributed=False) == 1.0
    assert not math.isnan(explained_variance(g, g, torch.zeros(1, 4, dtype=torch.bool)))
