"""Per-token KL estimators k1, k2, k3 between the current policy π_θ and a reference π_ref.

From J. Schulman, "Approximating KL Divergence" (2020). With log r = log π_θ(y) − log π_ref(y)
for a token y:

* ``k1`` = log r — unbiased for KL(π_θ‖π_ref) when y ~ π_θ; can be < 0. As a loss term its
  expected gradient is 0 on-policy.
* ``k2`` = ½ (log r)² — ≥ 0, biased value; as a loss term its expected on-policy gradient is
  exactly ∇KL(π_θ‖π_ref) (reverse KL).
* ``k3`` = π_ref/π_θ − 1 − log(π_ref/π_θ) = exp(−log r) − 1 + log r — ≥ 0, unbiased for
  KL(π_θ‖π_ref) when y ~ π_θ (GRPO's estimator, Shao et al. 2024); as a loss term its expected
  on-policy gradient is ∇KL(π_ref‖π_θ) (forward KL).

Numerical guard (as verl's ``kl_penalty``): the log-ratio is clamped to
[−:data:`LOG_RATIO_CLAMP`, +:data:`LOG_RATIO_CLAMP`] = [−20, 20] before any estimator, and k3
(the one with an exponential) is clamped to at most :data:`K3_CLAMP` = 10 nats. A token with
log π_θ = −60 and log π_ref = −2 (log r = −58, a stale rollout or several PPO epochs) then
gives k3 = 10 instead of e^58 and no gradient (the clamp is active), instead of inf that
turns every parameter into NaN. Inside the band the estimators are exact; k3 reaches 10 at
log r ≈ −2.61, so the k3 clamp already binds for tokens the policy has made about 13.6× less
likely than the reference.

Under sample reuse (tokens drawn from π_old or a behaviour policy μ ≠ π_θ) all expectations
are over μ: no value is an unbiased KL estimate and no gradient is a KL gradient; only the
first mini-batch of an on-policy update (μ = π_θ) is exact. docs/learner-math.md has the table.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from grpo.learner.choices import KlEstimatorName
from grpo.learner.registry import Registry

__all__ = ["K3_CLAMP", "KL_ESTIMATORS", "LOG_RATIO_CLAMP", "kl_penalty"]

LOG_RATIO_CLAMP = 20.0
"""|log π_θ − log π_ref| above this is clamped before an estimator (nats; verl uses 20)."""
K3_CLAMP = 10.0
"""k3 values above this are clamped (nats; verl clamps its k3 ``low_var_kl`` to [−10, 10])."""

KlEstimator = Callable[[torch.Tensor], torch.Tensor]
KL_ESTIMATORS: Registry[KlEstimator] = Registry("KL estimator", KlEstimatorName)
"""KL estimators ``fn(log_ratio) -> per-token value``, log_ratio = log π_θ − log π_ref."""


@KL_ESTIMATORS.register("k1")
def _k1(log_ratio: torch.Tensor) -> torch.Tensor:
    return log_ratio


@KL_ESTIMATORS.register("k2")
def _k2(log_ratio: torch.Tensor) -> torch.Tensor:
    return 0.5 * log_ratio.square()


@KL_ESTIMATORS.register("k3")
def _k3(log_ratio: torch.Tensor) -> torch.Tensor:
    # expm1(x) − x is exactly 0 at x = 0 and accurate for small |x|
    return (torch.expm1(-log_ratio) + log_ratio).clamp(max=K3_CLAMP)


def kl_penalty(
    logprobs: torch.Tensor, ref_logprobs: torch.Tensor, estimator: str = "k3"
) -> torch.Tensor:
    """Per-token estimate of KL(π_θ‖π_ref) from the log-probs of the sampled tokens.

    Args:
        logprobs: Tensor[N, T] (any shape), log π_θ(y_t) in nats, may carry gradient.
        ref_logprobs: same shape, log π_ref(y_t) in nats (treated as a constant: detached).
        estimator: ``"k1"``, ``"k2"`` or ``"k3"`` (Schulman 2020; see the module docstring).

    Returns:
        Tensor of the same shape, nats per token, always finite for finite inputs: the
        log-ratio is clamped to ±``LOG_RATIO_CLAMP`` and k3 to ≤ ``K3_CLAMP`` (module
        docstring; the gradient is 0 where a clamp is active). Masking and reduction are the
        caller's.

    Raises:
        ValueError: shapes differ or the estimator is unknown (the message lists valid ones).
    """
    fn = KL_ESTIMATORS.get(estimator)
    if logprobs.shape != ref_logprobs.shape:
        raise ValueError(
            f"logprobs {tuple(logprobs.shape)} and ref_logprobs {tuple(ref_logprobs.shape)} "
            "must have the same shape"
        )
    log_ratio = (logprobs - ref_logprobs.detach()).clamp(-LOG_RATIO_CLAMP, LOG_RATIO_CLAMP)
    return fn(log_ratio)
