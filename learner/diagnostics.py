"""Per-step learner diagnostics: a flat dict of floats with documented names, and per-group
records for the run log (DESIGN.md "Learner math", diagnostics list).

Names returned by :func:`batch_diagnostics` (all floats; "valid" = a reward that exists):

groups/ — outcome rewards [P, G]
    ``groups/count`` P; ``groups/rollouts`` members P·G; ``groups/reward_mean`` mean valid
    reward; ``groups/reward_std_mean`` mean over groups of the group std (chosen convention);
    ``groups/correct_frac`` share of valid rewards ≥ ``correct_threshold``;
    ``groups/missing`` count and ``groups/missing_frac`` share of members without a valid
    reward; ``groups/undecided`` count and ``groups/undecided_frac`` share of members whose
    verifier answered UNDECIDED (a subset of missing; :func:`undecided_diagnostics`, added
    by the learner loop); ``groups/all_correct_frac``, ``groups/all_wrong_frac``,
    ``groups/mixed_frac`` shares of groups (with ≥ 1 valid reward) whose valid rewards are
    all correct, none correct, or both; ``groups/no_valid`` groups without any valid reward.
adv/ — outcome advantages
    ``adv/std_convention`` 0 = population, 1 = sample; ``adv/zero_variance_groups`` groups
    whose advantages were zeroed by the zero-variance rule; ``adv/too_few_valid_groups``
    groups with < 2 valid rewards; ``adv/centered_abs_mean`` mean |R − group mean| (raw
    centered reward); ``adv/abs_mean`` mean |A| (scaled advantage), both over valid members;
    ``adv/scale`` their ratio (what the std division did); ``adv/pos_frac``,
    ``adv/neg_frac``, ``adv/zero_frac`` shares of valid members; ``adv/token_abs_mean``
    mean |A_t| over loss tokens (outcome + process, when token advantages are given).
len/ — response lengths in tokens
    ``len/mean``, ``len/max``; ``len/mean_pos_adv``, ``len/mean_neg_adv``,
    ``len/mean_zero_adv`` mean length of responses by the sign of their advantage;
    ``len/truncated_frac`` share of responses cut at the length limit.
denom/ — the loss denominators of the batch
    ``denom/prompts``, ``denom/responses`` (responses with ≥ 1 loss token),
    ``denom/tokens`` (loss tokens).
dynsamp/ — ``dynsamp/dropped_groups``, ``dynsamp/dropped_tokens`` removed by dynamic sampling.
weight/ — ``weight/<slice>/<label>``: share of the batch's effective gradient weight
    Σ_t w_t·|A_t| (w_t the reduction's per-token weight) carried by each slice label; slices
    are given per response (e.g. ``task``, ``difficulty``) plus ``length`` in quarters of
    L_max (``q1``..``q4``).
entropy/mean, loss/*, kl/*, tis/* — passed through from the trainer (see
    :func:`grpo.learner.losses.policy_loss`); ``time/<name>`` from ``timings`` (seconds,
    e.g. ``time/straggler_wait_s``, ``time/step_s``).

A mean, share or ratio over a set that is empty at this step is absent from the dict, never
0 (a 0 would read as a real value on a plot): ``len/mean_pos_adv`` in a batch without a
positive advantage, the ``groups/`` reward means and shares and the ``adv/`` means and sign
shares without a valid reward, the group-level shares without a group that has one,
``adv/scale`` when every group is tied (|R − mean| = 0), ``adv/token_abs_mean`` without a loss
token, ``weight/*`` when no response carries gradient weight, the ``len/`` means of an empty
batch. TensorBoard then has no point at that step and ``grpo report`` draws a gap. Counts
(``groups/missing``, ``denom/*``, ...) are always written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from grpo.learner import metric_names as mn
from grpo.learner.advantages import StdConvention, group_stats

__all__ = ["GroupRecord", "batch_diagnostics", "group_records", "undecided_diagnostics"]


@dataclass(frozen=True)
class GroupRecord:
    """One group's outcome for the run log.

    Attributes:
        group_id: the group's id (or its index as a string).
        size: members (valid or not).
        mean: mean valid reward (NaN when none is valid).
        std: std of the valid rewards under the chosen convention.
        correct: valid rewards ≥ the correctness threshold.
        missing: members without a valid reward.
        zero_variance: the zero-variance rule zeroed this group's advantages.
    """

    group_id: str
    size: int
    mean: float
    std: float
    correct: int
    missing: int
    zero_variance: bool


def undecided_diagnostics(undecided: Sequence[int], members: Sequence[int]) -> dict[str, float]:
    """Members of this step's groups whose verifier could not decide (status UNDECIDED).

    Such a reward is missing (masked, never 0; ``grpo.services.runtime.score_status``); the
    assembler drops groups with more than ``dynamic_sampling.max_undecided_frac`` of them, so these
    are the ones it let through.

    Args:
        undecided: per group, members whose outcome status is UNDECIDED.
        members: per group, members present (same length).

    Returns:
        ``groups/undecided`` (count) and ``groups/undecided_frac`` (share of members).

    Raises:
        ValueError: the two sequences differ in length, or a group has more undecided members
            than members.
    """
    if len(undecided) != len(members):
        raise ValueError(f"{len(undecided)} undecided counts for {len(members)} groups")
    if any(u < 0 or u > m for u, m in zip(undecided, members, strict=True)):
        raise ValueError("a group has more undecided members than members")
    total = sum(members)
    out = {"groups/undecided": float(sum(undecided))}
    if total:  # a share of no member is not written
        out["groups/undecided_frac"] = float(sum(undecided)) / total
    return out


def _valid(rewards: torch.Tensor, valid: torch.Tensor | None) -> torch.Tensor:
    ok = torch.isfinite(rewards)
    return ok if valid is None else ok & valid.bool()


def group_records(
    rewards: torch.Tensor,
    *,
    valid: torch.Tensor | None = None,
    group_ids: Sequence[str] | None = None,
    std: StdConvention = "population",
    eps: float = 1e-6,
    correct_threshold: float = 1.0,
    correct_rewards: torch.Tensor | None = None,
) -> list[GroupRecord]:
    """Per-group records (id, mean, std, correct, missing) of rewards [P, G].

    Args:
        rewards: float Tensor[P, G]; NaN counts as missing.
        valid: bool Tensor[P, G] or None.
        group_ids: P ids; default the row index.
        std, eps: the advantage conventions (see :mod:`grpo.learner.advantages`).
        correct_threshold: a valid reward ≥ this counts as correct.
        correct_rewards: Tensor[P, G] the correct counts read instead of ``rewards`` (the
            primary reward when ``rewards`` combines several weighted ones); None =
            ``rewards``.

    Returns:
        P :class:`GroupRecord` in row order.

    Raises:
        ValueError: bad shapes, G < 2, or ``group_ids`` of the wrong length.
    """
    stats = group_stats(rewards, std=std, eps=eps, valid=valid)
    ok = _valid(rewards, valid)
    graded = rewards if correct_rewards is None else correct_rewards
    correct = (ok & (torch.where(ok, graded, 0) >= correct_threshold)).sum(1)
    ids = [str(i) for i in range(rewards.shape[0])] if group_ids is None else list(group_ids)
    if len(ids) != rewards.shape[0]:
        raise ValueError(f"group_ids has {len(ids)} entries for {rewards.shape[0]} groups")
    out = []
    for p, gid in enumerate(ids):
        count = int(stats.count[p])
        out.append(
            GroupRecord(
                group_id=gid,
                size=int(stats.size[p]),
                mean=float(stats.mean[p]) if count else float("nan"),
                std=float(stats.std[p]),
                correct=int(correct[p]),
                missing=int(stats.size[p]) - count,
                zero_variance=bool(stats.zero_variance[p]),
            )
        )
    return out


def _effective_weights(
    token_advantages: torch.Tensor,
    mask: torch.Tensor,
    reduction: str,
    max_response_length: int | None,
) -> torch.Tensor:
    """Σ_t w_t·|A_t| per response, [N], w_t the reduction's per-token weight at ratio 1."""
    m = mask.to(torch.float64)
    a = torch.where(mask, token_advantages.to(torch.float64), 0).abs()
    tokens = m.sum().clamp(min=1)
    responses = mask.any(1).sum().clamp(min=1).to(torch.float64)
    lengths = m.sum(1).clamp(min=1)
    if reduction == "token_mean":
        per = a.sum(1) / tokens
    elif reduction == "response_mean":
        per = a.sum(1) / lengths / responses
    elif reduction == "fixed_budget":
        width = max_response_length or mask.shape[1]
        per = a.sum(1) / (responses * width)
    else:
        raise ValueError(
            f"unknown reduction {reduction!r}; valid: fixed_budget, response_mean, token_mean"
        )
    return per


def _slice_shares(weights: torch.Tensor, labels: Sequence[str], name: str) -> dict[str, float]:
    if len(labels) != weights.shape[0]:
        raise ValueError(f"slice {name!r} has {len(labels)} labels for {weights.shape[0]} rows")
    total = float(weights.sum())
    out: dict[str, float] = {}
    if total <= 0:  # no gradient weight at all (every advantage 0): no share to report
        return out
    for label in sorted(set(labels)):
        picked = torch.tensor(
            [lab == label for lab in labels], dtype=torch.bool, device=weights.device
        )
        share = float(weights[picked].sum()) / total
        out[f"{mn.weight_prefix(name)}{label}"] = share
    return out


def _valid_reward_means(
    r64: torch.Tensor,
    a64: torch.Tensor,
    ok: torch.Tensor,
    correct: torch.Tensor,
    group_mean: torch.Tensor,
) -> dict[str, float]:
    """Means and shares over the valid rewards (none when there is no valid reward):
    reward mean, correct share, |R − mean|, |A|, their ratio (none when every group is tied)
    and the advantage sign shares. Tensors are [P, G] (``group_mean`` [P])."""
    n_valid = int(ok.sum())
    if not n_valid:
        return {}
    centered = float(torch.where(ok, (r64 - group_mean.unsqueeze(1)).abs(), 0).sum()) / n_valid
    adv_abs = float(torch.where(ok, a64.abs(), 0).sum()) / n_valid
    out = {
        mn.GROUPS_REWARD_MEAN: float(r64.sum()) / n_valid,
        mn.GROUPS_CORRECT_FRAC: float(correct.sum()) / n_valid,
        mn.ADV_CENTERED_ABS_MEAN: centered,
        mn.ADV_ABS_MEAN: adv_abs,
        mn.ADV_POS_FRAC: float((ok & (a64 > 0)).sum()) / n_valid,
        mn.ADV_NEG_FRAC: float((ok & (a64 < 0)).sum()) / n_valid,
        mn.ADV_ZERO_FRAC: float((ok & (a64 == 0)).sum()) / n_valid,
    }
    if centered > 0:  # |A| / |R − mean|: undefined when every group is tied
        out["adv/scale"] = adv_abs / centered
    return out


def _group_shares(
    group_std: torch.Tensor, count: torch.Tensor, n_correct: torch.Tensor
) -> dict[str, float]:
    """Mean std and all-correct / all-wrong / mixed shares over the groups with a valid
    reward (none without such a group); tensors are [P]: std, valid and correct counts."""
    has = count > 0
    n = int(has.sum())
    if not n:
        return {}
    all_correct = has & (n_correct == count)
    all_wrong = has & (n_correct == 0)
    return {
        mn.GROUPS_REWARD_STD_MEAN: float(group_std[has].mean()),
        mn.GROUPS_ALL_CORRECT_FRAC: float(all_correct.sum()) / n,
        mn.GROUPS_ALL_WRONG_FRAC: float(all_wrong.sum()) / n,
        mn.GROUPS_MIXED_FRAC: float((has & ~all_correct & ~all_wrong).sum()) / n,
    }


def batch_diagnostics(
    rewards: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    valid: torch.Tensor | None = None,
    row_prompt: torch.Tensor | None = None,
    row_slot: torch.Tensor | None = None,
    token_advantages: torch.Tensor | None = None,
    lengths: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
    std: StdConvention = "population",
    eps: float = 1e-6,
    estimator: str = "grpo",
    reduction: str = "token_mean",
    max_response_length: int | None = None,
    correct_threshold: float = 1.0,
    correct_rewards: torch.Tensor | None = None,
    slices: Mapping[str, Sequence[str]] | None = None,
    loss_stats: Mapping[str, float] | None = None,
    entropy_mean: float | None = None,
    dropped_groups: int = 0,
    dropped_tokens: int = 0,
    timings: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """Flat dict of the step's diagnostics (names in the module docstring).

    Args:
        rewards: float Tensor[P, G] outcome rewards (NaN = missing).
        advantages: Tensor[P, G] outcome advantages as computed for the loss.
        response_mask: bool Tensor[N, T] loss tokens of the N responses (rows).
        valid: bool Tensor[P, G] or None.
        row_prompt, row_slot: int Tensor[N], the (prompt, rollout) cell of each row; default
            rows are the P·G cells in row-major order.
        token_advantages: Tensor[N, T] the per-token advantages fed to the loss (default the
            outcome advantage broadcast).
        lengths: int Tensor[N] real response lengths in tokens (default mask row sums).
        truncated: bool Tensor[N] responses cut at the length limit.
        std, eps, estimator: the advantage conventions used (for the zero-variance count).
        reduction, max_response_length: the loss reduction (for effective weights).
        correct_threshold: a valid reward ≥ this counts as correct.
        correct_rewards: float Tensor[P, G] the correct counts (``groups/correct_frac``, the
            all-correct/all-wrong/mixed shares) read instead of ``rewards``: the primary
            reward when ``rewards`` combines several weighted ones; None = ``rewards``.
        slices: per-response labels by slice name, e.g. ``{"task": [...N...]}``.
        loss_stats: merged ``policy_loss`` stats, copied in.
        entropy_mean: mean entropy over loss tokens (nats), copied to ``entropy/mean``.
        dropped_groups, dropped_tokens: removed by dynamic sampling before this batch.
        timings: seconds by name, copied to ``time/<name>``.

    Returns:
        dict[str, float]; a mean over an empty set is absent (module docstring).

    Raises:
        ValueError: shapes disagree, G < 2, unknown reduction, slice label lists of the wrong
            length.
    """
    p, g = rewards.shape if rewards.dim() == 2 else (0, 0)
    if advantages.shape != rewards.shape:
        raise ValueError(
            f"advantages {tuple(advantages.shape)} must match rewards {tuple(rewards.shape)}"
        )
    stats = group_stats(rewards, std=std, eps=eps, valid=valid)
    ok = _valid(rewards, valid)
    n = response_mask.shape[0]
    if row_prompt is None or row_slot is None:
        if n != p * g:
            raise ValueError(f"{n} responses but P·G = {p * g}: pass row_prompt and row_slot")
        row_prompt = torch.arange(p, device=rewards.device).repeat_interleave(g)
        row_slot = torch.arange(g, device=rewards.device).repeat(p)
    mask = response_mask.bool()
    r64 = torch.where(ok, rewards, 0).to(torch.float64)
    a64 = advantages.detach().to(torch.float64)
    graded = r64 if correct_rewards is None else torch.where(ok, correct_rewards, 0).double()
    correct = ok & (graded >= correct_threshold)
    has = stats.count > 0
    dropped = stats.too_few_valid | (stats.zero_variance if estimator == "grpo" else stats.tied)
    if estimator == "gae":  # the critic's baseline never zeroes a whole group
        dropped = torch.zeros_like(dropped)

    out: dict[str, float] = {
        "groups/count": float(p),
        "groups/rollouts": float(p * g),
        "groups/missing": float((~ok).sum()),
        "groups/no_valid": float((~has).sum()),
        "adv/std_convention": 0.0 if std == "population" else 1.0,
        mn.ADV_ZERO_VARIANCE_GROUPS: float((dropped & ~stats.too_few_valid).sum()),
        mn.ADV_TOO_FEW_VALID_GROUPS: float(stats.too_few_valid.sum()),
    }
    if p * g:
        out[mn.GROUPS_MISSING_FRAC] = float((~ok).sum()) / (p * g)
    out.update(_valid_reward_means(r64, a64, ok, correct, stats.mean))
    out.update(_group_shares(stats.std, stats.count, correct.sum(1)))
    out.update(
        _length_and_weights(
            a64[row_prompt, row_slot],
            mask,
            token_advantages,
            lengths,
            truncated,
            reduction,
            max_response_length,
            slices,
        )
    )
    out[mn.DENOM_PROMPTS] = float(p)
    out["dynsamp/dropped_groups"] = float(dropped_groups)
    out["dynsamp/dropped_tokens"] = float(dropped_tokens)
    if entropy_mean is not None:
        out[mn.ENTROPY_MEAN] = float(entropy_mean)
    for key, value in (loss_stats or {}).items():
        out[key] = float(value)
    for key, value in (timings or {}).items():
        out[mn.time_metric(key)] = float(value)
    return out


def _length_and_weights(
    row_adv: torch.Tensor,
    mask: torch.Tensor,
    token_advantages: torch.Tensor | None,
    lengths: torch.Tensor | None,
    truncated: torch.Tensor | None,
    reduction: str,
    max_response_length: int | None,
    slices: Mapping[str, Sequence[str]] | None,
) -> dict[str, float]:
    """len/*, denom/responses, denom/tokens, adv/token_abs_mean and weight/* entries."""
    n, width = mask.shape
    lens = (mask.sum(1) if lengths is None else lengths).to(torch.float64)
    if lens.shape != (n,):
        raise ValueError(f"lengths must be [N] = [{n}]; got {tuple(lens.shape)}")

    tok_adv = (
        row_adv.unsqueeze(1).expand(n, width)
        if token_advantages is None
        else _token_adv(token_advantages, mask)
    )
    tokens = int(mask.sum())
    out = {
        mn.DENOM_RESPONSES: float(mask.any(1).sum()),
        mn.DENOM_TOKENS: float(tokens),
    }
    if n:
        out[mn.LEN_MEAN] = float(lens.mean())
        out["len/max"] = float(lens.max())
        if truncated is not None:
            out[mn.LEN_TRUNCATED_FRAC] = float(truncated.float().mean())
    for name, rows in (
        (mn.LEN_MEAN_POS_ADV, row_adv > 0),
        (mn.LEN_MEAN_NEG_ADV, row_adv < 0),
        (mn.LEN_MEAN_ZERO_ADV, row_adv == 0),
    ):
        if bool(rows.any()):  # a mean over no response is not written (not 0)
            out[name] = float(lens[rows].mean())
    if tokens:
        out["adv/token_abs_mean"] = float(torch.where(mask, tok_adv.abs(), 0).sum()) / tokens
    weights = _effective_weights(tok_adv, mask, reduction, max_response_length)
    limit = max_response_length or width
    quarter = torch.clamp(torch.ceil(lens * 4 / max(limit, 1)), 1, 4).long()
    labelled = dict(slices or {})
    labelled["length"] = [f"q{int(q)}" for q in quarter]
    for name, labels in labelled.items():
        out.update(_slice_shares(weights, list(labels), name))
    return out


def _token_adv(token_advantages: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Check and return token advantages [N, T] as float64."""
    if token_advantages.shape != mask.shape:
        raise ValueError(
            f"token_advantages {tuple(token_advantages.shape)} must match response_mask "
            f"{tuple(mask.shape)}"
        )
    return token_advantages.detach().to(torch.float64)
