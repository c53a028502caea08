"""Hypothesis properties: micro-batch splits reproduce the full-batch loss and gradient."""

from __future__ import annotations

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo.learner.advantages import group_advantages
from grpo.learner.losses import REDUCTIONS, loss_denominators, policy_loss


@st.composite
def batches(draw: st.DrawFn) -> dict[str, torch.Tensor]:
    prompts = draw(st.integers(1, 3))
    group = draw(st.integers(2, 4))
    n = prompts * group
    width = draw(st.integers(1, 9))
    seed = draw(st.integers(0, 2**31 - 1))
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(0, width + 1, (n,), generator=g)
    lengths[0] = max(int(lengths[0]), 1)  # at least one loss token in the batch
    rewards = torch.randint(0, 2, (prompts, group), generator=g).to(torch.float64)
    old = -torch.rand(n, width, generator=g, dtype=torch.float64) * 3
    return {
        "mask": torch.arange(width).unsqueeze(0) < lengths.unsqueeze(1),
        "old": old,
        "new": old + 0.4 * torch.randn(n, width, generator=g, dtype=torch.float64),
        "adv": group_advantages(rewards).reshape(-1),
    }


def _accumulate(batch: dict[str, torch.Tensor], chunks: int, **kw: object):
    lp = batch["new"].clone().requires_grad_(True)
    denom = loss_denominators(batch["mask"])
    total = torch.zeros((), dtype=torch.float64)
    for rows in torch.arange(lp.shape[0]).tensor_split(chunks):
        loss, _ = policy_loss(
            lp[rows],
            batch["old"][rows],
            batch["adv"][rows],
            batch["mask"][rows],
            num_tokens=denom.num_tokens,
            num_responses=denom.num_responses,
            max_response_length=lp.shape[1],
            **kw,  # type: ignore[arg-type]
        )
        loss.backward()
        total = total + loss.detach()
    assert lp.grad is not None
    return total, lp.grad


@settings(max_examples=25, deadline=None)
@given(batch=batches(), ratio_level=st.sampled_from(["token", "sequence"]))
def test_micro_batches_reproduce_full_batch(batch, ratio_level):
    for reduction in REDUCTIONS:
        for loss_type in ("ppo", "cispo"):
            kw = {"reduction": reduction, "loss_type": loss_type, "ratio_level": ratio_level}
            full_loss, full_grad = _accumulate(batch, 1, **kw)
            for chunks in (2, 4):
                loss, grad = _accumulate(batch, chunks, **kw)
                torch.testing.assert_close(loss, full_loss, rtol=0, atol=1e-6)
                torch.testing.assert_close(grad, full_grad, rtol=0, atol=1e-6)
