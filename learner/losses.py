"""Clipped policy-gradient losses (PPO clip, dual clip, GSPO, CISPO), TIS and reductions.

Per-token loss types (``loss_type``), with r = π_θ/π_old and advantage A:

* ``ppo`` — max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high)): the PPO clipped surrogate (Schulman
  et al. 2017) with an asymmetric band ("clip-higher", DAPO, Yu et al. 2025). Optional
  ``dual_clip`` = c > 1 (Ye et al. 2020): for A < 0 the loss is further bounded by c·|A|.
* ``cispo`` — gradient −sg(w)·A·∇log π_θ with w = clip(r, 1−ε_low, 1+ε_high) (MiniMax-M1
  2025): the clipped importance weight is detached, so every token keeps a gradient.
  Departure (value only): the per-token value is −A·w·(1 + log r − log w), which has exactly
  CISPO's gradient, equals the PPO surrogate −A·r inside the band and does not depend on the
  absolute log-prob (the paper's −sg(w)·A·log π_θ differs by a term with zero gradient), so
  the loss is comparable across loss types and passes gradcheck.

Ratio level (``ratio_level``):

* ``token`` — r_t = exp(log π_θ(y_t) − log π_old(y_t)).
* ``sequence`` — GSPO (Zheng et al. 2025): s_i = exp(mean over the response's loss tokens of
  (log π_θ − log π_old)), used for every token of response i and clipped at the sequence level
  with the band as given (GSPO's own band is small, e.g. 3e-4/4e-4). Departure: the gradient is
  the exact derivative of the objective as written (s_i is not detached per token); with a
  per-response advantage this equals both GSPO and GSPO-token, with token-varying (process)
  advantages it differs from GSPO-token.

Truncated importance sampling (TIS): when the sampler μ differs from π_old, the per-token
policy-gradient term is multiplied by w = min(π_old/μ, cap), detached (Yao et al. 2025,
"Your efficient RL framework secretly brings you off-policy RL training"). The KL term is not
reweighted.

Numerical guard: the policy log-ratio log π_θ − log π_old (token or sequence level) and the TIS
log-weight log π_old − log μ are clamped to ±:data:`~grpo.learner.kl.LOG_RATIO_CLAMP` = ±20
before ``exp``, as verl's ``compute_policy_loss`` does, so a token whose log-probs have drifted
far apart gives a finite ratio (e^±20) instead of inf/0 and NaN gradients. Inside the band
nothing changes; a ratio that large is far outside any clip band, so the clamp only replaces
an overflow by a clipped (zero-gradient) term.

Reductions (``reduction``, registry :data:`REDUCTIONS`), with mask m and global denominators:

* ``token_mean`` — Σ_{i,t} m·ℓ / num_tokens (DAPO).
* ``response_mean`` — Σ_i (Σ_t m·ℓ / |y_i|) / num_responses (original GRPO).
* ``fixed_budget`` — Σ_{i,t} m·ℓ / (num_responses · L_max) (Dr. GRPO's G·L_max per group,
  averaged over groups).

``num_tokens`` and ``num_responses`` default to this call's counts; pass the counts of the
whole batch (:func:`loss_denominators`, all-reduced across ranks) so that the losses of
micro-batches and ranks *sum* to the full-batch loss. Under DDP, which averages gradients
over ranks, multiply the loss by the world size.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from grpo.learner import metric_names as mn
from grpo.learner.choices import LossTypeName, RatioLevel, ReductionName, names
from grpo.learner.collectives import all_reduce
from grpo.learner.kl import KL_ESTIMATORS, LOG_RATIO_CLAMP, kl_penalty
from grpo.learner.registry import Registry

__all__ = [
    "LOSS_TYPES",
    "RATIO_LEVELS",
    "REDUCTIONS",
    "LossDenominators",
    "LossTerms",
    "loss_denominators",
    "merge_loss_stats",
    "policy_loss",
]

RATIO_LEVELS: tuple[str, ...] = names(RatioLevel)


@dataclass(frozen=True)
class LossDenominators:
    """Global denominators of a batch (over every micro-batch and rank).

    Attributes:
        num_tokens: loss tokens (mask True) in the batch.
        num_responses: responses with at least one loss token.
    """

    num_tokens: float
    num_responses: float


def loss_denominators(
    response_mask: torch.Tensor, *, process_group: Any = None, distributed: bool | None = None
) -> LossDenominators:
    """Token and response counts of a batch, summed over ranks when distributed.

    Args:
        response_mask: bool/0-1 Tensor[N, T] of this rank's whole batch (all micro-batches).
        process_group: ``torch.distributed`` group (default world).
        distributed: None sums over ranks when ``torch.distributed`` is initialised; False
            keeps local counts.

    Returns:
        :class:`LossDenominators` to pass as ``num_tokens``/``num_responses`` to every
        micro-batch's :func:`policy_loss`.

    Raises:
        ValueError: response_mask not 2-D.
    """
    if response_mask.dim() != 2:
        raise ValueError(f"response_mask must be [N, T]; got {tuple(response_mask.shape)}")
    m = response_mask.bool()
    counts = torch.stack([m.sum(), m.any(1).sum()]).to(torch.float64)
    all_reduce(counts, "sum", process_group=process_group, distributed=distributed)
    tokens, responses = counts.tolist()
    return LossDenominators(num_tokens=tokens, num_responses=responses)


Reduction = Callable[..., torch.Tensor]
REDUCTIONS: Registry[Reduction] = Registry("reduction", ReductionName)
"""Reductions ``fn(per_token[N, T], mask[N, T] float, *, num_tokens, num_responses,
max_response_length) -> scalar``; ``per_token`` is already 0 outside the mask."""


@REDUCTIONS.register("token_mean")
def _token_mean(per_token: torch.Tensor, mask: torch.Tensor, **d: Any) -> torch.Tensor:
    return per_token.sum() / d["num_tokens"]


@REDUCTIONS.register("response_mean")
def _response_mean(per_token: torch.Tensor, mask: torch.Tensor, **d: Any) -> torch.Tensor:
    lengths = mask.sum(1).clamp(min=1)  # (N,) loss tokens per response
    return (per_token.sum(1) / lengths).sum() / d["num_responses"]


@REDUCTIONS.register("fixed_budget")
def _fixed_budget(per_token: torch.Tensor, mask: torch.Tensor, **d: Any) -> torch.Tensor:
    max_len = d["max_response_length"]
    if max_len is None:
        raise ValueError(
            "reduction='fixed_budget' needs max_response_length (L_max, the generation limit "
            "in tokens)"
        )
    longest = int(mask.sum(1).max()) if mask.numel() else 0
    if longest > max_len:
        raise ValueError(
            f"a response has {longest} loss tokens > max_response_length={max_len}; pass the "
            "generation limit as max_response_length"
        )
    return per_token.sum() / (d["num_responses"] * max_len)


@dataclass(frozen=True)
class LossTerms:
    """Per-token output of a loss type.

    Attributes:
        loss: Tensor[N, T] policy-gradient loss per token (before masking and reduction).
        clipped_low: bool Tensor[N, T], the low side of the band is active.
        clipped_high: bool Tensor[N, T], the high side of the band is active.
        dual_clipped: bool Tensor[N, T], the dual-clip bound is active.
    """

    loss: torch.Tensor
    clipped_low: torch.Tensor
    clipped_high: torch.Tensor
    dual_clipped: torch.Tensor


LossType = Callable[..., LossTerms]
LOSS_TYPES: Registry[LossType] = Registry("loss type", LossTypeName)
"""Loss types ``fn(log_ratio, ratio, advantages, *, clip_low, clip_high, dual_clip) ->
LossTerms``, all tensors [N, T]; ``log_ratio`` = log π_θ − log π_old (token or sequence level)
carries the gradient, ``ratio`` = exp(log_ratio)."""


@LOSS_TYPES.register("ppo")
def _ppo(
    log_ratio: torch.Tensor,
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None,
) -> LossTerms:
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(unclipped, clipped)
    negative = advantages < 0
    low = negative & (ratio < 1.0 - clip_low)
    high = (advantages > 0) & (ratio > 1.0 + clip_high)
    if dual_clip is None:
        dual = torch.zeros_like(low)
    else:
        loss = torch.where(negative, torch.minimum(loss, -dual_clip * advantages), loss)
        dual = negative & (ratio > dual_clip)
    return LossTerms(loss=loss, clipped_low=low, clipped_high=high, dual_clipped=dual)


@LOSS_TYPES.register("cispo")
def _cispo(
    log_ratio: torch.Tensor,
    ratio: torch.Tensor,
    advantages: torch.Tensor,
    *,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None,
) -> LossTerms:
    weight = ratio.detach().clamp(1.0 - clip_low, 1.0 + clip_high)
    # value −A·w·(1 + log r − log w): gradient −A·w·∇log r (CISPO's), value −A·r in the band
    surrogate = weight * (1.0 + log_ratio - weight.log())
    return LossTerms(
        loss=-advantages * surrogate,
        clipped_low=ratio < 1.0 - clip_low,
        clipped_high=ratio > 1.0 + clip_high,
        dual_clipped=torch.zeros_like(ratio, dtype=torch.bool),
    )


def _check_same_shape(name: str, t: torch.Tensor | None, shape: torch.Size) -> None:
    if t is not None and t.shape != shape:
        raise ValueError(f"{name} has shape {tuple(t.shape)}; expected {tuple(shape)}")


def _validate(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    clip_low: float,
    clip_high: float,
    dual_clip: float | None,
    ratio_level: str,
    loss_type: str,
) -> None:
    if logprobs.dim() != 2:
        raise ValueError(f"logprobs must be [N, T]; got {tuple(logprobs.shape)}")
    for name, t in (("old_logprobs", old_logprobs), ("response_mask", response_mask)):
        _check_same_shape(name, t, logprobs.shape)
    if advantages.shape not in (logprobs.shape, logprobs.shape[:1]):
        raise ValueError(
            f"advantages must be [N] or [N, T] = {tuple(logprobs.shape)}; got "
            f"{tuple(advantages.shape)}"
        )
    if not 0 <= clip_low < 1 or clip_high < 0:
        raise ValueError(
            f"clip band needs 0 <= clip_low < 1 and clip_high >= 0; got {clip_low}, {clip_high}"
        )
    if dual_clip is not None and (dual_clip <= 1.0 or loss_type != "ppo"):
        raise ValueError(f"dual_clip={dual_clip}: needs a value > 1 (e.g. 3.0) and loss_type='ppo'")
    if ratio_level not in RATIO_LEVELS:
        raise ValueError(
            f"unknown ratio_level {ratio_level!r}; valid: {', '.join(sorted(RATIO_LEVELS))}"
        )


def policy_loss(
    logprobs: torch.Tensor,
    old_logprobs: torch.Tensor,
    advantages: torch.Tensor,
    response_mask: torch.Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
    dual_clip: float | None = None,
    ratio_level: RatioLevel = "token",
    loss_type: str = "ppo",
    reduction: str = "token_mean",
    max_response_length: int | None = None,
    num_tokens: float | None = None,
    num_responses: float | None = None,
    behavior_logprobs: torch.Tensor | None = None,
    tis_cap: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    kl_estimator: str = "k3",
    kl_logprobs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Clipped policy-gradient loss of a (micro-)batch of responses, with statistics.

    Definitions in the module docstring and docs/learner-math.md. Values outside
    ``response_mask`` (even NaN) never reach the loss or its gradient.

    Args:
        logprobs: Tensor[N, T], log π_θ of the sampled tokens (nats), with gradient.
        old_logprobs: Tensor[N, T], log π_old (detached inside).
        advantages: Tensor[N] (one per response, broadcast) or Tensor[N, T] (per token).
        response_mask: bool/0-1 Tensor[N, T], the loss tokens.
        clip_low, clip_high: band [1 − clip_low, 1 + clip_high] for the ratio.
        dual_clip: c > 1 bounds the loss of negative-advantage tokens by c·|A| (ppo only).
        ratio_level: ``"token"`` or ``"sequence"`` (GSPO).
        loss_type: ``"ppo"`` or ``"cispo"`` (:data:`LOSS_TYPES`).
        reduction: ``"token_mean"``, ``"response_mean"`` or ``"fixed_budget"``.
        max_response_length: L_max in tokens, required by ``fixed_budget``.
        num_tokens, num_responses: global denominators (:func:`loss_denominators`); default
            this call's counts.
        behavior_logprobs: Tensor[N, T], log μ from the sampler; reported as mismatch stats.
        tis_cap: with ``behavior_logprobs``, multiply each token's policy-gradient loss by
            min(exp(old − behavior), tis_cap), detached.
        ref_logprobs: Tensor[N, T], log π_ref; with ``kl_coef`` > 0 adds
            kl_coef · kl_penalty(logprobs, ref_logprobs, kl_estimator) per token.
        kl_coef: β ≥ 0.
        kl_estimator: ``"k1"``, ``"k2"`` or ``"k3"``.
        kl_logprobs: Tensor[N, T], log π_θ to compare with ``ref_logprobs`` when it differs
            from ``logprobs`` (with gradient): under top-k/top-p sampling ``logprobs`` are of
            the truncated distribution while the KL compares full-vocabulary log-probs.
            Default ``logprobs``.

    Returns:
        ``(loss, stats)``: scalar loss (reduction of the masked per-token loss) and a dict of
        floats over this call's loss tokens: ``loss/total``, ``loss/pg_token_mean``,
        ``loss/clip_frac_low``, ``loss/clip_frac_high``, ``loss/dual_clip_frac``,
        ``loss/ratio_mean``, ``loss/ratio_min``, ``loss/ratio_max``, ``loss/approx_kl``
        (k3 estimate of KL(π_old‖π_θ)), ``loss/tokens``, ``loss/responses``; with
        ``ref_logprobs``: ``kl/ref_mean``; with ``behavior_logprobs``: ``tis/weight_mean``,
        ``tis/capped_frac``, ``tis/mismatch_kl`` (k3 estimate of KL(μ‖π_old)). Combine
        micro-batches with :func:`merge_loss_stats`.

    Raises:
        ValueError: shapes disagree; a bad clip band or dual clip; unknown ratio level, loss
            type, reduction or KL estimator (messages list the valid names); ``fixed_budget``
            without ``max_response_length``; ``tis_cap`` without ``behavior_logprobs`` or
            ≤ 0; ``kl_coef`` > 0 without ``ref_logprobs``; NaN/inf advantages on loss tokens.
    """
    loss_fn = LOSS_TYPES.get(loss_type)
    reduce_fn = REDUCTIONS.get(reduction)
    KL_ESTIMATORS.get(kl_estimator)
    _validate(
        logprobs,
        old_logprobs,
        advantages,
        response_mask,
        clip_low,
        clip_high,
        dual_clip,
        ratio_level,
        loss_type,
    )
    for name, t in (
        ("behavior_logprobs", behavior_logprobs),
        ("ref_logprobs", ref_logprobs),
        ("kl_logprobs", kl_logprobs),
    ):
        _check_same_shape(name, t, logprobs.shape)
    if tis_cap is not None and (behavior_logprobs is None or tis_cap <= 0):
        raise ValueError("tis_cap needs behavior_logprobs and a cap > 0 (e.g. 2.0)")
    if kl_coef < 0 or (kl_coef > 0 and ref_logprobs is None):
        raise ValueError(f"kl_coef={kl_coef}: needs kl_coef >= 0 and ref_logprobs when > 0")

    mask = response_mask.bool()
    maskf = mask.to(logprobs.dtype)
    if advantages.dim() == 1:
        advantages = advantages.unsqueeze(1).expand_as(logprobs)
    adv = torch.where(mask, advantages.detach().to(logprobs.dtype), 0)
    if not bool(torch.isfinite(adv).all()):
        raise ValueError("advantages are NaN or inf on loss tokens; mask invalid rewards first")
    # Zero out-of-mask entries *before* any arithmetic so NaN padding cannot leak into grads.
    lp = torch.where(mask, logprobs, 0)
    old = torch.where(mask, old_logprobs.detach().to(logprobs.dtype), 0)
    log_ratio = lp - old  # (N, T)
    if ratio_level == "sequence":
        lengths = maskf.sum(1, keepdim=True).clamp(min=1)  # (N, 1) loss tokens per response
        log_ratio = ((log_ratio * maskf).sum(1, keepdim=True) / lengths).expand_as(lp)
    log_ratio = log_ratio.clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)  # finite exp (verl)
    ratio = torch.exp(log_ratio)
    terms = loss_fn(
        log_ratio, ratio, adv, clip_low=clip_low, clip_high=clip_high, dual_clip=dual_clip
    )
    pg = terms.loss

    per_token_means: dict[str, torch.Tensor] = {}  # extra per-token stats, averaged below
    if behavior_logprobs is not None:
        mu = torch.where(mask, behavior_logprobs.detach().to(logprobs.dtype), 0)
        weight, per_token_means = _truncated_importance_weights(old, mu, tis_cap)
        if weight is not None:
            pg = pg * weight

    per_token = pg
    if ref_logprobs is not None:
        ref = torch.where(mask, ref_logprobs.detach().to(logprobs.dtype), 0)
        kl_lp = lp if kl_logprobs is None else torch.where(mask, kl_logprobs, 0)
        kl = kl_penalty(kl_lp if kl_coef > 0 else kl_lp.detach(), ref, kl_estimator)
        per_token_means[mn.KL_REF_MEAN] = kl.detach()
        if kl_coef > 0:
            per_token = per_token + kl_coef * kl
    per_token = torch.where(mask, per_token, 0)

    local_tokens = float(mask.sum())
    local_responses = float(mask.any(1).sum())
    loss = reduce_fn(
        per_token,
        maskf,
        num_tokens=max(num_tokens if num_tokens is not None else local_tokens, 1.0),
        num_responses=max(num_responses if num_responses is not None else local_responses, 1.0),
        max_response_length=max_response_length,
    )
    stats = _loss_stats(loss, pg, terms, ratio, log_ratio, mask, per_token_means)
    stats["loss/tokens"] = local_tokens
    stats["loss/responses"] = local_responses
    return loss, stats


def _truncated_importance_weights(
    old: torch.Tensor, behavior: torch.Tensor, tis_cap: float | None
) -> tuple[torch.Tensor | None, dict[str, torch.Tensor]]:
    """TIS weight min(π_old/μ, cap) (None without a cap) and its per-token statistics.

    Args:
        old, behavior: Tensor[N, T] log π_old and log μ (already 0 outside the mask).
        tis_cap: the cap, or None to only report the mismatch.
    """
    with torch.no_grad():
        # (N, T) log(π_old/μ), clamped like the policy log-ratio so exp stays finite
        log_w = (old - behavior).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
        raw = torch.exp(log_w)
        capped = raw > tis_cap if tis_cap is not None else torch.zeros_like(raw, dtype=torch.bool)
        weight = raw.clamp(max=tis_cap) if tis_cap is not None else raw
        stats = {
            "tis/weight_mean": weight,
            "tis/capped_frac": capped,
            "tis/mismatch_kl": torch.expm1(log_w) - log_w,  # k3 estimate of KL(μ‖π_old)
        }
    return (weight if tis_cap is not None else None), stats


def _loss_stats(
    loss: torch.Tensor,
    pg: torch.Tensor,
    terms: LossTerms,
    ratio: torch.Tensor,
    log_ratio: torch.Tensor,
    mask: torch.Tensor,
    per_token_means: Mapping[str, torch.Tensor],
) -> dict[str, float]:
    """Detached statistics over the loss tokens, converted with one device sync."""
    with torch.no_grad():
        n = mask.sum().clamp(min=1).to(torch.float64)
        has = bool(mask.any())

        def mean(x: torch.Tensor) -> torch.Tensor:
            return torch.where(mask, x.to(torch.float64), 0).sum() / n

        values: dict[str, torch.Tensor] = {
            "loss/total": loss.detach().to(torch.float64),
            "loss/pg_token_mean": mean(pg),
            mn.LOSS_CLIP_FRAC_LOW: mean(terms.clipped_low),
            mn.LOSS_CLIP_FRAC_HIGH: mean(terms.clipped_high),
            mn.LOSS_DUAL_CLIP_FRAC: mean(terms.dual_clipped),
            mn.LOSS_RATIO_MEAN: mean(ratio),
            mn.LOSS_RATIO_MIN: ratio[mask].min().to(torch.float64) if has else n.new_tensor(0),
            mn.LOSS_RATIO_MAX: ratio[mask].max().to(torch.float64) if has else n.new_tensor(0),
            # k3 estimate of KL(π_old‖π_θ) from tokens sampled by π_old: r − 1 − log r
            mn.LOSS_APPROX_KL: mean(torch.expm1(log_ratio) - log_ratio),
        }
        values.update({key: mean(x) for key, x in per_token_means.items()})
        keys = list(values)
        numbers = torch.stack([values[k].reshape(()) for k in keys]).tolist()
    return dict(zip(keys, numbers, strict=True))


_SUMMED = ("loss/total", "loss/tokens", "loss/responses")


def merge_loss_stats(parts: Sequence[Mapping[str, float]]) -> dict[str, float]:
    """Combine the stats of the micro-batches of one batch into batch-level stats.

    ``loss/total``, ``loss/tokens`` and ``loss/responses`` are summed (micro-batch losses
    with global denominators sum to the batch loss); ``loss/ratio_min``/``loss/ratio_max``
    take the min/max; every other entry is the mean weighted by ``loss/tokens``. Parts with
    no loss tokens contribute only to the sums; when no part has a loss token, only the sums
    are returned (a mean over no token is not a number, and is not written as 0).

    Args:
        parts: stats dicts returned by :func:`policy_loss`.

    Returns:
        One dict with the same keys (only the sums without a loss token).

    Raises:
        ValueError: ``parts`` is empty.
    """
    if not parts:
        raise ValueError("merge_loss_stats needs at least one stats dict")
    out: dict[str, float] = {}
    keys = list(dict.fromkeys(k for p in parts for k in p))
    live = [p for p in parts if p.get("loss/tokens", 0.0) > 0]
    total_tokens = sum(p["loss/tokens"] for p in live)
    for key in keys:
        if key in _SUMMED:
            out[key] = math.fsum(p.get(key, 0.0) for p in parts)
        elif not live:
            continue
        elif key == mn.LOSS_RATIO_MIN:
            out[key] = min(p[key] for p in live if key in p)
        elif key == mn.LOSS_RATIO_MAX:
            out[key] = max(p[key] for p in live if key in p)
        else:
            out[key] = math.fsum(p[key] * p["loss/tokens"] for p in live if key in p) / (
                total_tokens
            )
    return out
