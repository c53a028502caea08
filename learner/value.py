"""PPO with a learned critic: token rewards, GAE, advantage whitening, clipped value loss.

The ``gae`` estimator replaces the group baseline by a value model V (``grpo.learner.critic``)
trained on the same rollouts. All tensors are [N, T] (response, token), masked by the same
loss mask as the policy loss; V_t is the value of the state *before* response token t (the
prompt and tokens < t), read at the position whose logits predict token t.

* Token rewards (:func:`token_rewards`): the outcome reward R_i sits on the last loss token of
  response i (an EOS, or the last token of a response cut at the length limit); optional
  process step rewards sit on the token that ends each step. Everything else is 0.
* GAE (Schulman et al. 2016, "High-dimensional continuous control using generalized advantage
  estimation"), :func:`gae_advantages`: δ_t = r_t + γ V_{t+1} − V_t,
  A_t = δ_t + γλ A_{t+1}, with V and A after the last loss token equal to 0 (the response is
  terminal there, also when it was cut at the length limit: the verifier scored it as it is,
  so nothing is bootstrapped). Returns G_t = A_t + V_t are the critic's targets. Tokens
  outside the mask are *skipped*, as in verl's ``compute_gae_advantage_return``: the
  recursion carries V_{t+1} and A_{t+1} across them, so a mask with holes (e.g. tool output
  inside a response) behaves as if those tokens were absent. γ = λ = 1 (the default, as the
  anchors use for outcome rewards) gives A_t = Σ_{s≥t} r_s − V_t: the return-to-go minus the
  baseline.
* Whitening (:func:`masked_whiten`, optional, verl's default for GAE): A ← (A − mean)/sqrt(var
  + 1e-8) over every loss token of the batch, all ranks included (var with Bessel's
  correction, as verl's ``masked_whiten``). Unlike the group estimators it crosses prompts.
* Value loss (:func:`value_loss`, PPO2's clipped value loss as in verl/TRL/OpenRLHF):
  ℓ_t = ½ max((V_t − G_t)², (clip(V_t, V^old_t − c, V^old_t + c) − G_t)²), reduced with the
  policy loss's reduction and global denominators (``grpo.learner.losses.REDUCTIONS``);
  ``value_clip`` None uses ½ (V_t − G_t)².
* Explained variance (:func:`explained_variance`): 1 − Var[G − V]/Var[G] over loss tokens,
  with scikit-learn's convention when Var[G] = 0 (1 when the residual is 0 too, else 0).

Departure from verl's PPO: the KL to π_ref stays a loss term (``kl_coef``, GRPO style, verl's
``use_kl_loss``), not a per-token reward penalty.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from grpo.learner.choices import CriticEstimatorName
from grpo.learner.collectives import all_reduce
from grpo.learner.registry import Registry

__all__ = [
    "CRITIC_ESTIMATORS",
    "explained_variance",
    "gae_advantages",
    "masked_whiten",
    "token_rewards",
    "value_loss",
]

CRITIC_ESTIMATORS: Registry[Any] = Registry("critic advantage estimator", CriticEstimatorName)
"""Advantage estimators that need a learned critic, ``fn(token_rewards, values, mask, *,
gamma, lam) -> (advantages, returns)``, all [N, T]; the group estimators are
``grpo.learner.advantages.ESTIMATORS``."""


def _check_2d(mask: torch.Tensor, **tensors: torch.Tensor) -> None:
    if mask.dim() != 2:
        raise ValueError(f"mask must be [N, T]; got {tuple(mask.shape)}")
    for name, t in tensors.items():
        if t.shape != mask.shape:
            raise ValueError(f"{name} has shape {tuple(t.shape)}; expected {tuple(mask.shape)}")


def token_rewards(
    outcome: torch.Tensor,
    mask: torch.Tensor,
    *,
    step_ends: Sequence[Sequence[int]] | None = None,
    step_rewards: Sequence[Sequence[float]] | None = None,
    outcome_weight: float = 1.0,
    process_weight: float = 0.0,
) -> torch.Tensor:
    """Per-token rewards [N, T]: outcome on each response's last loss token, steps on their ends.

    Args:
        outcome: float Tensor[N], R_i per response; NaN/inf where missing (those rows must
            have no loss token: their reward is not placed).
        mask: bool Tensor[N, T], the loss tokens (a prefix of each response, or with holes).
        step_ends, step_rewards: per response, the token index ending each process step and
            its reward (``TrainingBatch.step_ends``/``step_rewards``); steps ending outside
            the mask are dropped. None = no process rewards.
        outcome_weight, process_weight: r_t = outcome_weight·R_i·[t = last] +
            process_weight·Σ_{k: end_k = t} r_k.

    Returns:
        float64 Tensor[N, T], 0 outside the mask.

    Raises:
        ValueError: shapes disagree; a missing outcome on a row that has loss tokens; step
            lists of the wrong length.
    """
    if outcome.shape != mask.shape[:1] or mask.dim() != 2:
        raise ValueError(
            f"outcome must be [N] and mask [N, T]; got {tuple(outcome.shape)}, {tuple(mask.shape)}"
        )
    mask = mask.bool()
    n, t = mask.shape
    has = mask.any(1)
    finite = torch.isfinite(outcome)
    if bool((has & ~finite).any()):
        bad = (has & ~finite).nonzero().flatten().tolist()
        raise ValueError(f"rows {bad} have loss tokens but no finite outcome reward; mask them")
    rewards = torch.zeros(n, t, dtype=torch.float64, device=mask.device)
    positions = torch.arange(t, device=mask.device).expand(n, t)
    last = torch.where(mask, positions, -1).amax(1)  # (N,) last loss token, −1 when none
    rows = has.nonzero().flatten()
    r = torch.where(finite, outcome.to(torch.float64), 0.0)
    rewards[rows, last[rows]] = outcome_weight * r[rows]
    if step_ends is not None and process_weight != 0:
        if step_rewards is None or len(step_ends) != n or len(step_rewards) != n:
            raise ValueError("step_ends and step_rewards need one list per response (N)")
        for i, (ends, values) in enumerate(zip(step_ends, step_rewards, strict=True)):
            if len(ends) != len(values):
                raise ValueError(f"row {i}: {len(ends)} step ends for {len(values)} rewards")
            for end, value in zip(ends, values, strict=True):
                if 0 <= end < t and bool(mask[i, end]) and torch.isfinite(torch.tensor(value)):
                    rewards[i, end] += process_weight * float(value)
    return rewards


@CRITIC_ESTIMATORS.register("gae")
def gae_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    mask: torch.Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates and returns of token rewards (Schulman et al. 2016).

    δ_t = r_t + γ V_{t+1} − V_t;  A_t = δ_t + γλ A_{t+1};  G_t = A_t + V_t, over the loss
    tokens of each response, with V and A beyond the last loss token equal to 0; tokens
    outside the mask are skipped (module docstring).

    Args:
        rewards: float Tensor[N, T], per-token rewards (:func:`token_rewards`); values
            outside the mask are ignored (even NaN).
        values: float Tensor[N, T], V_t from the critic (detached); ignored outside the mask.
        mask: bool Tensor[N, T], the loss tokens.
        gamma: discount γ in [0, 1].
        lam: GAE λ in [0, 1].

    Returns:
        ``(advantages, returns)``, float64 Tensor[N, T] each, detached, 0 outside the mask.

    Raises:
        ValueError: shapes disagree, γ or λ outside [0, 1].
    """
    _check_2d(mask, rewards=rewards, values=values)
    if not (0.0 <= gamma <= 1.0 and 0.0 <= lam <= 1.0):
        raise ValueError(f"gamma and lam must lie in [0, 1]; got {gamma}, {lam}")
    with torch.no_grad():
        m = mask.bool()
        r = torch.where(m, rewards.detach().to(torch.float64), 0.0)
        v = torch.where(m, values.detach().to(torch.float64), 0.0)
        n, t = m.shape
        adv = torch.zeros(n, t, dtype=torch.float64, device=m.device)
        next_value = torch.zeros(n, dtype=torch.float64, device=m.device)
        next_adv = torch.zeros(n, dtype=torch.float64, device=m.device)
        for col in range(t - 1, -1, -1):  # reverse recursion over tokens
            delta = r[:, col] + gamma * next_value - v[:, col]
            a = delta + gamma * lam * next_adv
            here = m[:, col]
            adv[:, col] = torch.where(here, a, 0.0)
            next_value = torch.where(here, v[:, col], next_value)
            next_adv = torch.where(here, a, next_adv)
        returns = torch.where(m, adv + v, 0.0)
    return adv, returns


def masked_whiten(
    x: torch.Tensor, mask: torch.Tensor, *, distributed: bool | None = None
) -> torch.Tensor:
    """(x − mean)/sqrt(var + 1e-8) over the masked entries of the whole batch (all ranks).

    Args:
        x: float Tensor[N, T].
        mask: bool Tensor[N, T].
        distributed: None all-reduces the sums over ``torch.distributed`` ranks when it is
            initialised; False keeps the statistics local.

    Returns:
        Tensor[N, T] in ``x``'s dtype, 0 outside the mask; var uses Bessel's correction
        (verl's ``masked_whiten``); with fewer than 2 masked entries x is only centered.

    Raises:
        ValueError: shapes disagree.
    """
    _check_2d(mask, x=x)
    with torch.no_grad():
        m = mask.bool()
        x64 = torch.where(m, x.detach().to(torch.float64), 0.0)
        sums = torch.stack([m.sum().to(torch.float64), x64.sum()])
        all_reduce(sums, "sum", distributed=distributed)
        count, total = float(sums[0]), sums[1]
        mean = total / max(count, 1.0)
        sq = torch.where(m, (x64 - mean) ** 2, 0.0).sum().reshape(1)
        all_reduce(sq, "sum", distributed=distributed)
        centered = x64 - mean
        if count >= 2:
            centered = centered * torch.rsqrt(sq[0] / (count - 1) + 1e-8)
        out = torch.where(m, centered, 0.0)
    return out.to(x.dtype)


def value_loss(
    values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    value_clip: float | None = 0.5,
    reduction: str = "token_mean",
    num_tokens: float | None = None,
    num_responses: float | None = None,
    max_response_length: int | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """PPO's clipped value loss, reduced like the policy loss, with statistics.

    ℓ_t = ½ max((V_t − G_t)², (clip(V_t, V^old_t − c, V^old_t + c) − G_t)²) (verl's
    ``compute_value_loss``, TRL, OpenRLHF); with ``value_clip`` None, ℓ_t = ½ (V_t − G_t)².

    Args:
        values: Tensor[N, T], V_t of the critic being trained (with gradient).
        old_values: Tensor[N, T], the values at batch start (used for GAE; detached inside).
        returns: Tensor[N, T], the GAE returns G_t (targets; detached inside).
        mask: bool Tensor[N, T], loss tokens; values outside it never reach the loss.
        value_clip: c > 0, or None to disable clipping.
        reduction: a name of ``grpo.learner.losses.REDUCTIONS`` (the policy loss's).
        num_tokens, num_responses: global denominators (``loss_denominators``); default
            this call's counts.
        max_response_length: L_max, required by ``fixed_budget``.

    Returns:
        ``(loss, stats)``: the scalar loss and floats over this call's loss tokens:
        ``critic/value_loss`` (token mean of ℓ_t), ``critic/value_clip_frac`` (share of
        tokens where the clipped term is the larger), ``critic/value_mean``,
        ``critic/return_mean``, and ``loss/tokens`` (for merging).

    Raises:
        ValueError: shapes disagree, ``value_clip`` ≤ 0, an unknown reduction.
    """
    from grpo.learner.losses import REDUCTIONS

    _check_2d(mask, values=values, old_values=old_values, returns=returns)
    if value_clip is not None and not value_clip > 0:
        raise ValueError(f"value_clip must be > 0 or None (no clipping); got {value_clip}")
    reduce_fn = REDUCTIONS.get(reduction)
    m = mask.bool()
    maskf = m.to(values.dtype)
    v = torch.where(m, values, 0)
    old = torch.where(m, old_values.detach().to(values.dtype), 0)
    target = torch.where(m, returns.detach().to(values.dtype), 0)
    unclipped = (v - target) ** 2
    if value_clip is None:
        per_token = 0.5 * unclipped
        clipped_more = torch.zeros_like(m)
    else:
        v_clipped = old + (v - old).clamp(-value_clip, value_clip)
        clipped = (v_clipped - target) ** 2
        per_token = 0.5 * torch.maximum(unclipped, clipped)
        clipped_more = clipped > unclipped
    per_token = torch.where(m, per_token, 0)
    local_tokens = float(m.sum())
    loss = reduce_fn(
        per_token,
        maskf,
        num_tokens=max(num_tokens if num_tokens is not None else local_tokens, 1.0),
        num_responses=max(
            num_responses if num_responses is not None else float(m.any(1).sum()), 1.0
        ),
        max_response_length=max_response_length,
    )
    with torch.no_grad():
        n = max(local_tokens, 1.0)

        def mean(x: torch.Tensor) -> float:
            return float(torch.where(m, x.detach().to(torch.float64), 0.0).sum()) / n

        stats = {
            "critic/value_loss": mean(per_token),
            "critic/value_clip_frac": mean(clipped_more),
            "critic/value_mean": mean(v),
            "critic/return_mean": mean(target),
            "loss/tokens": local_tokens,
        }
    return loss, stats


def explained_variance(
    values: torch.Tensor,
    returns: torch.Tensor,
    mask: torch.Tensor,
    *,
    distributed: bool | None = None,
) -> float:
    """1 − Var[G − V] / Var[G] over the loss tokens of the batch (all ranks).

    Args:
        values: Tensor[N, T], the critic's predictions V_t.
        returns: Tensor[N, T], the targets G_t.
        mask: bool Tensor[N, T].
        distributed: None all-reduces over ``torch.distributed`` when initialised.

    Returns:
        A float ≤ 1 (1 = perfect, 0 = no better than the mean). Population variances; when
        Var[G] = 0 the result is 1 if Var[G − V] = 0 too, else 0 (scikit-learn's
        ``explained_variance_score`` with ``force_finite=True``); 0 with no loss token.

    Raises:
        ValueError: shapes disagree.
    """
    _check_2d(mask, values=values, returns=returns)
    m = mask.bool()
    g = torch.where(m, returns.detach().to(torch.float64), 0.0)
    resid = torch.where(m, g - values.detach().to(torch.float64), 0.0)
    sums = torch.stack(
        [m.sum().to(torch.float64), g.sum(), (g * g).sum(), resid.sum(), (resid * resid).sum()]
    )
    all_reduce(sums, "sum", distributed=distributed)
    count = float(sums[0])
    if count == 0:
        return 0.0
    var_g = max(float(sums[2]) / count - (float(sums[1]) / count) ** 2, 0.0)
    var_r = max(float(sums[4]) / count - (float(sums[3]) / count) ** 2, 0.0)
    scale = max(float(sums[2]) / count, 1.0)
    if var_g <= 1e-12 * scale:
        return 1.0 if var_r <= 1e-12 * scale else 0.0
    return 1.0 - var_r / var_g
