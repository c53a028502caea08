"""Token log-probabilities and entropy from logits, at the sampler's temperature and truncation.

The learner computes log π_θ and log π_old with :func:`token_logprobs` at the same temperature
the sampler used, so that with an unchanged policy the importance ratio π_θ/π_old is exactly 1
and log π_old is comparable with the engine's behaviour log-probs μ (which are reported after
temperature scaling, see ``grpo.v1.Completion.behavior_logprobs``).

Truncated sampling: with top-k or top-p (nucleus) sampling the engine draws from the tempered
softmax restricted to the kept tokens and renormalised over them, and μ is the log-prob under
*that* distribution (``grpo.services.generation.backend``). Given the ``top_k``/``top_p`` the
rollout records (``Completion.sampling``), :func:`token_logprobs` applies the sampler's rule
to the learner's logits — logits / T; keep the tokens whose scaled logit is ≥ the k-th
largest; then keep the smallest set of most likely tokens whose mass reaches top_p (a token is
dropped when the mass of the tokens ranked before it is already ≥ top_p; Holtzman et al.
2020); renormalise — so π_old/μ is 1 for an unchanged policy instead of the kept mass (e.g.
0.7 at top-p 0.7). Each model's kept set comes from its own logits (the set is piecewise
constant in θ: no gradient flows through it). A token outside the kept set has probability 0;
its log-prob is floored at :data:`TRUNCATED_LOGPROB_FLOOR` so differences stay finite (the
loss clamps log-ratios to ±20, and the floor carries no gradient).
"""

from __future__ import annotations

import torch

__all__ = ["TRUNCATED_LOGPROB_FLOOR", "entropy_from_logits", "token_logprobs"]

TRUNCATED_LOGPROB_FLOOR = -1.0e4
"""log-prob (nats) given to a token outside the kept set of a truncated distribution."""


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; greedy decoding has no log-probs to "
            "train on, use the sampler's temperature"
        )


def _per_row(value: int | float | torch.Tensor | None, n: int, name: str) -> torch.Tensor | None:
    if value is None or isinstance(value, torch.Tensor):
        if value is not None and value.shape != (n,):
            raise ValueError(f"{name} must be a scalar or [N] = [{n}]; got {tuple(value.shape)}")
        return value
    return torch.full((n,), value)


def _truncate(scaled: torch.Tensor, top_k: torch.Tensor | None, top_p: torch.Tensor | None):
    """``scaled`` [N, T, V] with the tokens the sampler drops set to −inf (per-row k, p)."""
    vocab = scaled.shape[-1]
    if top_k is not None:
        k = top_k.to(device=scaled.device, dtype=torch.long)
        active = (k > 0) & (k < vocab)  # (N,)
        if bool(active.any()):
            ranked = torch.sort(scaled, dim=-1, descending=True).values  # (N, T, V)
            index = torch.where(active, k - 1, vocab - 1)[:, None, None]  # (N, 1, 1)
            kth = ranked.gather(-1, index.expand(*scaled.shape[:2], 1))  # (N, T, 1)
            scaled = scaled.masked_fill(active[:, None, None] & (scaled < kth), float("-inf"))
    if top_p is not None:
        p = top_p.to(device=scaled.device, dtype=scaled.dtype)
        active = p < 1.0  # (N,)
        if bool(active.any()):
            sorted_logits, order = torch.sort(scaled, dim=-1, descending=True)
            probs = torch.softmax(sorted_logits, dim=-1)
            mass_before = torch.cumsum(probs, dim=-1) - probs  # (N, T, V) mass ranked before
            drop_sorted = (mass_before >= p[:, None, None]) & active[:, None, None]
            drop = torch.zeros_like(drop_sorted).scatter(-1, order, drop_sorted)
            scaled = scaled.masked_fill(drop, float("-inf"))
    return scaled


def token_logprobs(
    logits: torch.Tensor,
    token_ids: torch.Tensor,
    temperature: float = 1.0,
    *,
    top_k: int | torch.Tensor | None = None,
    top_p: float | torch.Tensor | None = None,
) -> torch.Tensor:
    """log softmax(logits / T) gathered at the token ids, optionally under the sampler's
    top-k/top-p truncation (module docstring).

    Args:
        logits: float Tensor[N, T, V] — the logits that *predict* each token (already shifted
            so that ``logits[:, t]`` scores ``token_ids[:, t]``).
        token_ids: int Tensor[N, T] in [0, V).
        temperature: the sampling temperature T > 0 (logits are divided by it).
        top_k: keep the k most likely tokens (ties at the k-th value kept); an int or a
            per-row int Tensor[N]; 0 or ≥ V = off. None = off.
        top_p: nucleus mass in (0, 1]; a float or a per-row Tensor[N]; 1 = off. None = off.

    Returns:
        Tensor[N, T] of natural log-probabilities (nats), float32 or wider, with gradient.
        With truncation, log-probs of the truncated renormalised distribution; a token
        outside the kept set gets ``TRUNCATED_LOGPROB_FLOOR`` (no gradient).

    Raises:
        ValueError: shapes disagree, temperature ≤ 0, top_p outside (0, 1], top_k < 0.
    """
    _check_temperature(temperature)
    if logits.dim() != 3 or token_ids.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be [N, T, V] and token_ids [N, T]; got {tuple(logits.shape)} and "
            f"{tuple(token_ids.shape)}"
        )
    n = logits.shape[0]
    k = _per_row(top_k, n, "top_k")
    p = _per_row(top_p, n, "top_p")
    if k is not None and bool((k < 0).any()):
        raise ValueError(f"top_k must be >= 0 (0 = off); got {k.tolist()}")
    if p is not None and not bool(((p > 0) & (p <= 1)).all()):
        raise ValueError(f"top_p must lie in (0, 1] (1 = off); got {p.tolist()}")
    scaled = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if temperature != 1.0:
        scaled = scaled / temperature
    truncated = (k is not None and bool(((k > 0) & (k < logits.shape[-1])).any())) or (
        p is not None and bool((p < 1).any())
    )
    if truncated:
        scaled = _truncate(scaled, k, p)
    logp = torch.log_softmax(scaled, dim=-1)
    out = logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)
    return out.clamp(min=TRUNCATED_LOGPROB_FLOOR) if truncated else out


def entropy_from_logits(logits: torch.Tensor, temperature: float = 1.0) -> torch.Tensor:
    """Entropy H = −Σ_v p_v log p_v of softmax(logits / T) at each position.

    Args:
        logits: float Tensor[N, T, V].
        temperature: T > 0.

    Returns:
        Tensor[N, T] in nats.

    Raises:
        ValueError: logits not 3-D, temperature ≤ 0.
    """
    _check_temperature(temperature)
    if logits.dim() != 3:
        raise ValueError(f"logits must be [N, T, V]; got {tuple(logits.shape)}")
    scaled = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if temperature != 1.0:
        scaled = scaled / temperature
    logp = torch.log_softmax(scaled, dim=-1)
    return -(logp.exp() * logp).sum(-1)
