"""Token log-probabilities and entropy from logits, at the sampler's temperature.

The learner computes log π_θ and log π_old with :func:`token_logprobs` at the same temperature
the sampler used, so that with an unchanged policy the importance ratio π_θ/π_old is exactly 1
and log π_old is comparable with the engine's behaviour log-probs μ (which are reported after
temperature scaling, see ``grpo.v1.Completion.behavior_logprobs``).
"""

from __future__ import annotations

import torch

__all__ = ["entropy_from_logits", "token_logprobs"]


def _check_temperature(temperature: float) -> None:
    if not temperature > 0:
        raise ValueError(
            f"temperature must be > 0, got {temperature}; greedy decoding has no log-probs to "
            "train on, use the sampler's temperature"
        )


def token_logprobs(
    logits: torch.Tensor, token_ids: torch.Tensor, temperature: float = 1.0
) -> torch.Tensor:
    """log softmax(logits / T) gathered at the token ids.

    Args:
        logits: float Tensor[N, T, V] — the logits that *predict* each token (already shifted
            so that ``logits[:, t]`` scores ``token_ids[:, t]``).
        token_ids: int Tensor[N, T] in [0, V).
        temperature: the sampling temperature T > 0 (logits are divided by it).

    Returns:
        Tensor[N, T] of natural log-probabilities (nats), float32 or wider, with gradient.

    Raises:
        ValueError: shapes disagree, temperature ≤ 0.
    """
    _check_temperature(temperature)
    if logits.dim() != 3 or token_ids.shape != logits.shape[:2]:
        raise ValueError(
            f"logits must be [N, T, V] and token_ids [N, T]; got {tuple(logits.shape)} and "
            f"{tuple(token_ids.shape)}"
        )
    scaled = logits.float() if logits.dtype in (torch.float16, torch.bfloat16) else logits
    if temperature != 1.0:
        scaled = scaled / temperature
    logp = torch.log_softmax(scaled, dim=-1)
    return logp.gather(-1, token_ids.long().unsqueeze(-1)).squeeze(-1)


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
