"""KL estimator golden values; temperature-scaled token log-probs and entropy."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.kl import KL_ESTIMATORS, kl_penalty
from grpo.learner.logprobs import entropy_from_logits, token_logprobs
from grpo.learner.losses import policy_loss

T = torch.tensor


@pytest.mark.parametrize(
    ("logp", "ref", "want"),
    [
        (-1.0, -1.5, {"k1": 0.5, "k2": 0.125, "k3": 0.10653066}),
        (-1.5, -1.0, {"k1": -0.5, "k2": 0.125, "k3": 0.14872127}),
    ],
)
def test_kl_golden_values(logp: float, ref: float, want: dict[str, float]):
    values = {k: kl_penalty(T([[logp]]), T([[ref]]), k).item() for k in KL_ESTIMATORS}
    assert values == pytest.approx(want, abs=1e-7)
    assert len(set(values.values())) == 3  # each estimator returns its own value


def test_kl_nonnegative_and_zero_at_equal_policies():
    g = torch.Generator().manual_seed(0)
    a, b = -torch.rand(4, 7, generator=g) * 5, -torch.rand(4, 7, generator=g) * 5
    for k in ("k2", "k3"):
        assert (kl_penalty(a, b, k) >= 0).all()
    for k in KL_ESTIMATORS:
        assert torch.equal(kl_penalty(a, a, k), torch.zeros(4, 7))
    with pytest.raises(ValueError, match="valid: k1, k2, k3"):
        kl_penalty(a, b, "k4")


def test_temperature_scaled_logprob_and_unit_ratio():
    logits = T([[[2.0, 1.0, 0.0]]])
    lp = token_logprobs(logits, T([[0]]), temperature=0.6)
    assert lp.item() == pytest.approx(-0.20257, abs=1e-5)
    assert token_logprobs(logits, T([[0]])).item() == pytest.approx(-0.40761, abs=1e-5)
    # π_θ and π_old from the same weights at the sampler's temperature: ratio exactly 1
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(3, 6, 11, generator=g)
    ids = torch.randint(0, 11, (3, 6), generator=g)
    new = token_logprobs(logits.clone().requires_grad_(True), ids, 0.6)
    old = token_logprobs(logits, ids, 0.6).detach()
    assert torch.equal(torch.exp(new - old), torch.ones(3, 6))
    _, stats = policy_loss(new, old, torch.randn(3, generator=g), torch.ones(3, 6))
    assert stats["loss/ratio_min"] == stats["loss/ratio_max"] == 1.0
    assert stats["loss/clip_frac_low"] == stats["loss/clip_frac_high"] == 0.0
    with pytest.raises(ValueError, match="temperature"):
        token_logprobs(logits, ids, 0.0)


def test_entropy_from_logits():
    logits = torch.zeros(2, 3, 4)
    torch.testing.assert_close(entropy_from_logits(logits), torch.full((2, 3), math.log(4)))
    peaked = T([[[100.0, 0.0, 0.0]]])
    assert entropy_from_logits(peaked).item() == pytest.approx(0.0, abs=1e-6)
    p = torch.softmax(T([2.0, 1.0, 0.0]) / 0.6, 0)
    want = -(p * p.log()).sum().item()
    assert entropy_from_logits(T([[[2.0, 1.0, 0.0]]]), 0.6).item() == pytest.approx(want)


def test_expected_loss_gradients_on_policy_match_the_documented_kl():
    # exact expectation over a 5-way categorical: Σ_y π_θ(y) ∇k(y) (docs/learner-math.md)
    g = torch.Generator().manual_seed(4)
    theta = torch.randn(5, generator=g, dtype=torch.float64).requires_grad_(True)
    ref = torch.log_softmax(torch.randn(5, generator=g, dtype=torch.float64), 0)

    def expected_grad(estimator: str) -> torch.Tensor:
        logp = torch.log_softmax(theta, 0)
        k = kl_penalty(logp.unsqueeze(0), ref.unsqueeze(0), estimator)[0]
        weights = logp.exp().detach()  # y ~ π_θ, not differentiated through the sampling
        (grad,) = torch.autograd.grad((weights * k).sum(), theta)
        return grad

    logp = torch.log_softmax(theta, 0)
    p, q = logp.exp(), ref.exp()
    (reverse,) = torch.autograd.grad((p * (logp - ref)).sum(), theta, retain_graph=True)
    (forward,) = torch.autograd.grad((q * (ref - logp)).sum(), theta)
    torch.testing.assert_close(expected_grad("k1"), torch.zeros(5, dtype=torch.float64))
    torch.testing.assert_close(expected_grad("k2"), reverse)
    torch.testing.assert_close(expected_grad("k3"), forward)
    # values: k1 and k3 are unbiased for KL(π_θ‖π_ref) on-policy, k2 is not
    lp0, p0 = logp.detach().unsqueeze(0), p.detach()
    kl = float((p0 * (lp0[0] - ref)).sum())
    for name, unbiased in (("k1", True), ("k2", False), ("k3", True)):
        value = float((p0 * kl_penalty(lp0, ref.unsqueeze(0), name)[0]).sum())
        assert (abs(value - kl) < 1e-12) is unbiased
