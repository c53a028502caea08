"""Numerics that cannot blow up: clamped KL and ratios, and the sampler's top-k/top-p
truncation reproduced by the learner's log-probs (issue 15 item 6 a, b)."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.learner.kl import K3_CLAMP, KL_ESTIMATORS, LOG_RATIO_CLAMP, kl_penalty
from grpo.learner.logprobs import TRUNCATED_LOGPROB_FLOOR, token_logprobs
from grpo.learner.losses import policy_loss
from grpo.services.generation.backend import SamplingConfig
from grpo.services.generation.transformers_backend import sample_next_tokens


def test_kl_of_a_far_token_is_clamped_finite_with_zero_gradient():
    # The issue's token: log π_θ = −60, log π_ref = −2 → k3 = e^58 − 59 overflowed to inf.
    lp = torch.tensor([[-60.0, -1.0]], requires_grad=True)
    ref = torch.tensor([[-2.0, -1.5]])
    k3 = kl_penalty(lp, ref, "k3")
    assert k3[0, 0].item() == K3_CLAMP == 10.0
    assert k3[0, 1].item() == pytest.approx(math.expm1(-0.5) + 0.5, abs=1e-7)  # inside: exact
    k3.sum().backward()
    assert lp.grad is not None and lp.grad[0, 0].item() == 0.0  # the clamp is active
    assert lp.grad[0, 1].item() == pytest.approx(1 - math.exp(-0.5), abs=1e-6)  # 1 − π_ref/π_θ
    values = {k: kl_penalty(lp.detach(), ref, k)[0, 0].item() for k in KL_ESTIMATORS}
    assert values == {"k1": -LOG_RATIO_CLAMP, "k2": 0.5 * LOG_RATIO_CLAMP**2, "k3": K3_CLAMP}
    # The other side: a token the policy made far *more* likely (log r = +58 → 20 → k3 19).
    far = kl_penalty(torch.tensor([[-2.0]]), torch.tensor([[-60.0]]), "k3").item()
    assert far == K3_CLAMP


def test_policy_loss_with_the_issue_token_has_finite_loss_and_gradient():
    # One token with log π_θ = −60 against π_ref −2 and π_old −2 (several epochs, stale μ).
    lp = torch.tensor([[-60.0, -1.0, -0.5]], requires_grad=True)
    other = torch.tensor([[-2.0, -1.0, -0.5]])
    mask = torch.ones(1, 3, dtype=torch.bool)
    loss, stats = policy_loss(
        lp,
        other,
        torch.tensor([1.0]),
        mask,
        behavior_logprobs=torch.tensor([[-61.0, -1.0, -0.5]]),
        tis_cap=2.0,
        ref_logprobs=other,
        kl_coef=0.1,
    )
    loss.backward()
    assert math.isfinite(loss.item()) and all(math.isfinite(v) for v in stats.values()), stats
    assert lp.grad is not None and torch.isfinite(lp.grad).all()
    assert stats["loss/ratio_min"] == pytest.approx(math.exp(-LOG_RATIO_CLAMP))
    assert stats["kl/ref_mean"] == pytest.approx(K3_CLAMP / 3)


def _sampler_case(top_k: int, top_p: float, temperature: float = 0.7):
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(64, 40, generator=g) * 2
    sampling = SamplingConfig(temperature=temperature, top_k=top_k, top_p=top_p)
    tokens, mu = sample_next_tokens(logits, sampling, torch.Generator().manual_seed(4))
    return logits, tokens, mu


@pytest.mark.parametrize(("top_k", "top_p"), [(0, 0.7), (5, 1.0), (10, 0.8), (0, 1.0)])
def test_truncated_logprobs_equal_the_samplers_behavior_logprobs(top_k: int, top_p: float):
    logits, tokens, mu = _sampler_case(top_k, top_p)
    lp = token_logprobs(logits[:, None], tokens[:, None], 0.7, top_k=top_k, top_p=top_p)[:, 0]
    assert torch.equal(lp, mu)  # bit for bit: the same rule on the same logits
    full = token_logprobs(logits[:, None], tokens[:, None], 0.7)[:, 0]
    kept_mass = (full - mu).exp()  # what π_old/μ was before: the kept mass, < 1 when truncated
    if top_k or top_p < 1:
        assert float(kept_mass.mean()) < 0.95
    else:
        assert torch.equal(full, mu)


def test_truncation_is_per_row_and_outside_tokens_get_the_floor():
    logits = torch.tensor([[[3.0, 2.0, 1.0, 0.0]], [[3.0, 2.0, 1.0, 0.0]]], requires_grad=True)
    ids = torch.tensor([[3], [3]])
    lp = token_logprobs(logits, ids, 1.0, top_k=torch.tensor([2, 0]), top_p=torch.tensor([1.0, 1]))
    assert lp[0, 0].item() == TRUNCATED_LOGPROB_FLOOR  # token 3 is outside row 0's top-2
    want = float(torch.log_softmax(logits.detach()[1, 0], -1)[3])
    assert lp[1, 0].item() == pytest.approx(want)
    lp.sum().backward()
    assert logits.grad is not None and torch.isfinite(logits.grad).all()
    assert torch.equal(logits.grad[0], torch.zeros(1, 4))  # the floor carries no gradient
    kept = token_logprobs(logits, torch.tensor([[0], [0]]), 1.0, top_k=2)
    assert kept[0, 0].item() == pytest.approx(-math.log1p(math.exp(-1.0)))  # over {3, 2}
    with pytest.raises(ValueError, match="top_p must lie in"):
        token_logprobs(logits, ids, 1.0, top_p=0.0)
    with pytest.raises(ValueError, match="top_k must be >= 0"):
        token_logprobs(logits, ids, 1.0, top_k=-1)


def test_tis_weight_is_one_for_an_unchanged_policy_under_truncation():
    # π_old computed under the sampler's truncation: π_old/μ = 1 exactly, nothing shrinks;
    # over the full vocabulary the weight would be the kept mass (≈ 0.7 at top-p 0.7).
    logits, tokens, mu = _sampler_case(0, 0.7)
    old = token_logprobs(logits[:, None], tokens[:, None], 0.7, top_p=0.7)
    lp = old.clone().requires_grad_(True)
    mask = torch.ones_like(old, dtype=torch.bool)
    _, stats = policy_loss(
        lp, old, torch.ones(64), mask, behavior_logprobs=mu[:, None], tis_cap=2.0
    )
    assert stats["tis/weight_mean"] == 1.0 and stats["tis/mismatch_kl"] == 0.0
    full = token_logprobs(logits[:, None], tokens[:, None], 0.7)
    _, before = policy_loss(
        full.clone().requires_grad_(True),
        full,
        torch.ones(64),
        mask,
        behavior_logprobs=mu[:, None],
        tis_cap=2.0,
    )
    assert 0.6 < before["tis/weight_mean"] < 0.8
