"""Group-relative outcome advantages: GRPO, RLOO and Dr. GRPO estimators.

Implements the advantage of each rollout relative to the other rollouts of the same prompt
(its *group*); centering never crosses prompts (DESIGN.md "Learner math"):

* ``grpo`` — (R − mean) / std  (Shao et al. 2024, DeepSeekMath, eq. for outcome supervision).
* ``rloo`` — R − mean of the *other* valid rewards = n/(n−1)·(R − mean)  (Ahmadian et al. 2024).
* ``dr_grpo`` — R − mean, no std division  (Liu et al. 2025, "Dr. GRPO").

Conventions pinned here (and recorded by :class:`grpo.learner.config.LearnerAlgoConfig`):

* ``std="population"`` (divide by n, the default) or ``"sample"`` (Bessel, n − 1).
* Statistics are computed in float64 and cast back to the rewards' dtype.
* Invalid rewards (``valid`` False, or NaN/inf) take no part in any statistic and get
  advantage 0; they are never filled with reward 0.
* A group with fewer than 2 valid rewards gets 0 everywhere (and is reported in
  :class:`GroupStats`). A rollout group with fewer than 2 members is an error.
* Zero-variance rule: when max == min over a group's valid rewards the group's advantages are
  exactly 0 for every estimator (decided by comparison, not by a float std against eps, so
  a constant float32 group such as [0.3]*6 cannot produce ±0.7 from a one-ulp mean error).
  For ``grpo`` a group whose std is ≤ ``eps`` is also set to 0.

Departure from the paper: DeepSeekMath (and TRL) divide by ``std + eps``; here ``eps`` is a
threshold only, so advantages of a non-degenerate group are exactly (R − mean)/std
(e.g. [1, 1, 0, 0] gives exactly [1, 1, −1, −1]).

Groups split over micro-batches or ranks: :func:`grouped_advantages` takes flat rewards with
a group index and all-reduces the per-group sums, minima and maxima when
``torch.distributed`` is initialised, so every rank sees the statistics of whole groups.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from grpo.learner.choices import GroupEstimatorName, StdConvention, names
from grpo.learner.collectives import all_reduce
from grpo.learner.registry import Registry

__all__ = [
    "ESTIMATORS",
    "STD_CONVENTIONS",
    "GroupStats",
    "StdConvention",
    "group_advantages",
    "group_stats",
    "grouped_advantages",
    "grouped_stats",
]

STD_CONVENTIONS: tuple[str, ...] = names(StdConvention)

Estimator = Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]
ESTIMATORS: Registry[Estimator] = Registry("advantage estimator", GroupEstimatorName)
"""Advantage estimators ``fn(rewards, mean, std, count) -> advantages``, all float64 [N],
with ``mean``, ``std`` and ``count`` (valid rewards) gathered from each rollout's group;
``std`` and ``count`` are already made safe (never 0, count ≥ 2) by the caller."""


@ESTIMATORS.register("grpo")
def _grpo(rewards: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, count: torch.Tensor):
    return (rewards - mean) / std


@ESTIMATORS.register("rloo")
def _rloo(rewards: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, count: torch.Tensor):
    # R_i − (Σ_j R_j − R_i)/(n − 1) = n/(n − 1)·(R_i − mean)
    return (rewards - mean) * count / (count - 1)


@ESTIMATORS.register("dr_grpo")
def _dr_grpo(rewards: torch.Tensor, mean: torch.Tensor, std: torch.Tensor, count: torch.Tensor):
    return rewards - mean


@dataclass(frozen=True)
class GroupStats:
    """Statistics of each group over its valid rewards. Every field has shape [P] (groups).

    Attributes:
        mean: float64 mean of the valid rewards (0 when none is valid).
        std: float64 std of the valid rewards under the chosen convention (0 when < 2 valid).
        count: int64 number of valid rewards.
        size: int64 number of members (valid or not).
        minimum: float64 smallest valid reward (+inf when none is valid).
        maximum: float64 largest valid reward (−inf when none is valid).
        too_few_valid: bool, fewer than 2 valid rewards (advantages are 0).
        tied: bool, ≥ 2 valid rewards and max == min (advantages are exactly 0).
        zero_variance: bool, ≥ 2 valid rewards and (tied or std ≤ eps).
    """

    mean: torch.Tensor
    std: torch.Tensor
    count: torch.Tensor
    size: torch.Tensor
    minimum: torch.Tensor
    maximum: torch.Tensor
    too_few_valid: torch.Tensor
    tied: torch.Tensor
    zero_variance: torch.Tensor


def _check_std(std: str) -> None:
    if std not in STD_CONVENTIONS:
        raise ValueError(f"unknown std convention {std!r}; valid: {', '.join(STD_CONVENTIONS)}")


def _valid_mask(rewards: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    finite = torch.isfinite(rewards)
    if valid is None:
        return finite
    if valid.shape != rewards.shape:
        raise ValueError(
            f"valid has shape {tuple(valid.shape)} but rewards has {tuple(rewards.shape)}"
        )
    if valid.dtype != torch.bool:
        raise ValueError(f"valid must be a bool tensor, got {valid.dtype}")
    return valid & finite


def grouped_stats(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    num_groups: int,
    *,
    std: StdConvention = "population",
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
    process_group: Any = None,
    distributed: bool | None = None,
) -> GroupStats:
    """Per-group statistics of flat rewards whose group is given by an index.

    Args:
        rewards: float Tensor[N], one reward per rollout (NaN/inf count as invalid).
        group_index: int Tensor[N] in [0, num_groups): the group of each rollout. Under
            ``torch.distributed`` every rank must use the same group numbering.
        num_groups: P, the number of groups (the same on every rank).
        std: ``"population"`` (÷n) or ``"sample"`` (÷(n−1)).
        eps: groups with std ≤ eps are flagged ``zero_variance``.
        valid: bool Tensor[N] or None; False marks a missing reward.
        process_group: ``torch.distributed`` group to reduce over (default world).
        distributed: None reduces over ranks when ``torch.distributed`` is initialised;
            False keeps statistics local.

    Returns:
        :class:`GroupStats` with fields of shape [P].

    Raises:
        ValueError: shapes disagree, ``group_index`` is out of range, an unknown ``std``, or a
            group with exactly one member (group size < 2).
    """
    _check_std(std)
    if rewards.dim() != 1 or group_index.shape != rewards.shape:
        raise ValueError(
            f"rewards and group_index must both be [N]; got {tuple(rewards.shape)} and "
            f"{tuple(group_index.shape)}"
        )
    if not rewards.is_floating_point():
        raise ValueError(f"rewards must be a float tensor, got {rewards.dtype}")
    ok = _valid_mask(rewards, valid)
    index = group_index.to(torch.long)
    if index.numel() and (int(index.min()) < 0 or int(index.max()) >= num_groups):
        raise ValueError(f"group_index must lie in [0, {num_groups}); got {index.tolist()}")
    with torch.no_grad():
        r = torch.where(ok, rewards.detach(), 0).to(torch.float64)
        okf = ok.to(torch.float64)
        # (3, P): members, valid count, valid sum — one collective for all three
        sums = torch.zeros(3, num_groups, dtype=torch.float64, device=rewards.device)
        sums[0].index_add_(0, index, torch.ones_like(okf))
        sums[1].index_add_(0, index, okf)
        sums[2].index_add_(0, index, r)
        all_reduce(sums, "sum", process_group=process_group, distributed=distributed)
        size, count, total = sums[0], sums[1], sums[2]
        mean = total / count.clamp(min=1)
        sq = torch.zeros(num_groups, dtype=torch.float64, device=rewards.device)
        sq.index_add_(0, index, torch.where(ok, (r - mean[index]) ** 2, 0))
        all_reduce(sq, "sum", process_group=process_group, distributed=distributed)
        inf = torch.tensor(float("inf"), dtype=torch.float64, device=rewards.device)
        lo = torch.full((num_groups,), float("inf"), dtype=torch.float64, device=rewards.device)
        hi = torch.full((num_groups,), -float("inf"), dtype=torch.float64, device=rewards.device)
        lo.scatter_reduce_(0, index, torch.where(ok, r, inf), "amin")
        hi.scatter_reduce_(0, index, torch.where(ok, r, -inf), "amax")
        all_reduce(lo, "min", process_group=process_group, distributed=distributed)
        all_reduce(hi, "max", process_group=process_group, distributed=distributed)
    singletons = (size == 1).nonzero().flatten().tolist()
    if singletons:
        raise ValueError(
            f"group size < 2 for groups {singletons}: group-relative advantages need at least "
            "2 rollouts per prompt (set group_size >= 2)"
        )
    too_few = count < 2
    dof = count if std == "population" else count - 1
    sd = torch.where(too_few, 0, (sq / dof.clamp(min=1)).sqrt())
    tied = ~too_few & (hi == lo)
    return GroupStats(
        mean=mean,
        std=sd,
        count=count.to(torch.int64),
        size=size.to(torch.int64),
        minimum=lo,
        maximum=hi,
        too_few_valid=too_few,
        tied=tied,
        zero_variance=tied | (~too_few & (sd <= eps)),
    )


def grouped_advantages(
    rewards: torch.Tensor,
    group_index: torch.Tensor,
    num_groups: int,
    estimator: str = "grpo",
    *,
    std: StdConvention = "population",
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
    process_group: Any = None,
    distributed: bool | None = None,
) -> torch.Tensor:
    """Group-relative advantages of flat rewards, groups given by index (may span ranks).

    Same definitions as :func:`group_advantages`; use this form when a group's rollouts are
    not laid out as one row, e.g. split over micro-batches or over ``torch.distributed``
    ranks (statistics are all-reduced, so each rank gets the whole-group answer).

    Args:
        rewards: float Tensor[N].
        group_index: int Tensor[N] in [0, num_groups).
        num_groups: P.
        estimator: ``"grpo"``, ``"rloo"`` or ``"dr_grpo"``.
        std, eps, valid, process_group, distributed: see :func:`grouped_stats`.

    Returns:
        Detached Tensor[N] in the rewards' dtype; 0 for invalid rewards, groups with < 2
        valid rewards and zero-variance groups.

    Raises:
        ValueError: unknown estimator or std convention, bad shapes, group size < 2.
    """
    fn = ESTIMATORS.get(estimator)
    stats = grouped_stats(
        rewards,
        group_index,
        num_groups,
        std=std,
        eps=eps,
        valid=valid,
        process_group=process_group,
        distributed=distributed,
    )
    ok = _valid_mask(rewards, valid)
    index = group_index.to(torch.long)
    drop = stats.too_few_valid | (stats.zero_variance if estimator == "grpo" else stats.tied)
    with torch.no_grad():
        r = torch.where(ok, rewards.detach(), 0).to(torch.float64)
        safe_std = torch.where(drop, 1.0, stats.std)[index]
        safe_count = stats.count.to(torch.float64).clamp(min=2)[index]
        adv = fn(r, stats.mean[index], safe_std, safe_count)
        adv = torch.where(ok & ~drop[index], adv, 0)
    return adv.to(rewards.dtype)


def _row_index(rewards: torch.Tensor) -> torch.Tensor:
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [P, G] (prompt, rollout); got {tuple(rewards.shape)}")
    p, g = rewards.shape
    if g < 2:
        raise ValueError(
            f"group size G = {g} < 2: group-relative advantages need at least 2 rollouts "
            "per prompt (set group_size >= 2)"
        )
    return torch.arange(p, device=rewards.device).repeat_interleave(g)


def group_stats(
    rewards: torch.Tensor,
    *,
    std: StdConvention = "population",
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
) -> GroupStats:
    """Per-group statistics of rewards laid out [P, G]; see :func:`grouped_stats`.

    Raises:
        ValueError: rewards not 2-D, G < 2, ``valid`` shape or dtype wrong, unknown ``std``.
    """
    index = _row_index(rewards)
    flat_valid = None if valid is None else _valid_mask(rewards, valid).reshape(-1)
    return grouped_stats(
        rewards.reshape(-1),
        index,
        rewards.shape[0],
        std=std,
        eps=eps,
        valid=flat_valid,
        distributed=False,
    )


def group_advantages(
    rewards: torch.Tensor,
    estimator: str = "grpo",
    *,
    std: StdConvention = "population",
    eps: float = 1e-6,
    valid: torch.Tensor | None = None,
) -> torch.Tensor:
    """Group-relative advantages of rewards shaped [P, G] (prompt, rollout).

    ``grpo``: (R − mean)/std (DeepSeekMath); ``rloo``: R − mean of the other valid rewards
    (Ahmadian et al. 2024); ``dr_grpo``: R − mean (Liu et al. 2025). Statistics are per row
    (prompt) over valid entries only; see the module docstring for the pinned conventions.

    Args:
        rewards: float Tensor[P, G]; NaN/inf entries are treated as invalid.
        estimator: ``"grpo"``, ``"rloo"`` or ``"dr_grpo"``.
        std: ``"population"`` (default) or ``"sample"``; only ``grpo`` divides by it.
        eps: a ``grpo`` group with std ≤ eps gets advantage 0 (eps is not added to std).
        valid: bool Tensor[P, G] or None; False marks a missing reward (verifier failure,
            group deadline): excluded from mean and std, advantage 0.

    Returns:
        Detached Tensor[P, G] in the rewards' dtype.

    Raises:
        ValueError: rewards not [P, G], G < 2, ``valid`` wrong shape or dtype, unknown
            estimator (the message lists the valid ones) or std convention.
    """
    index = _row_index(rewards)
    flat_valid = None if valid is None else _valid_mask(rewards, valid).reshape(-1)
    adv = grouped_advantages(
        rewards.reshape(-1),
        index,
        rewards.shape[0],
        estimator,
        std=std,
        eps=eps,
        valid=flat_valid,
        distributed=False,
    )
    return adv.reshape(rewards.shape)
