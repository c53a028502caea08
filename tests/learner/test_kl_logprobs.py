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
