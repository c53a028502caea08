"""How far a trained policy moved from its start: KL(π_trained ‖ π_start) measured on prompts.

``kl_to_start`` samples responses from the trained policy (the generation backend, the
run's temperature, no top-k/top-p truncation), then teacher-forces prompt + response through
both policies and averages, over every response position, the exact KL between their
next-token distributions at that prefix:

    KL_t = Σ_v π_trained(v | x, y_<t) · (log π_trained(v | x, y_<t) − log π_start(v | x, y_<t))

with both distributions at temperature T (softmax(logits / T)). Since the prefixes are drawn
from π_trained, Σ_t KL_t is an unbiased estimate of the sequence-level KL(π_trained ‖ π_start)
of the responses (the chain rule of KL); the reported ``kl_per_token`` is Σ KL_t over all
positions / number of positions (nats per token), ``kl_per_response`` that sum / responses.
The sampled-token estimator k1 = log π_trained(y_t) − log π_start(y_t) (Schulman 2020) is
reported beside it as a check (same expectation, more variance).

This is the "KL to the start" of ``grpo compare``: the learner's own ``kl/ref_mean`` exists only
when β > 0 (a reference model is loaded), which none of the shipped configs use.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from grpo.errors import InvalidArgumentError

__all__ = ["KlToStart", "kl_to_start"]


@dataclass(frozen=True)
class KlToStart:
    """KL(π_trained ‖ π_start) on sampled responses (module docstring).

    Attributes:
        kl_per_token: mean exact per-position KL over all response positions (nats/token).
        kl_per_response: Σ over positions / responses (nats per response).
        k1_per_token: mean sampled-token log-ratio (nats/token), the same expectation.
        responses: responses sampled; tokens: response positions averaged over.
    """

    kl_per_token: float
    kl_per_response: float
    k1_per_token: float
    responses: int
    tokens: int


def kl_to_start(
    policy: Path | str,
    start: Path | str,
    prompts: Sequence[str],
    *,
    temperature: float,
    max_new_tokens: int,
    samples: int = 1,
    seed: int = 1,
) -> KlToStart:
    """Estimate KL(π_policy ‖ π_start) on ``samples`` responses per prompt sampled from
    ``policy`` (module docstring for the estimator); runs on CPU with the calling process's
    torch threads.

    Args:
        policy: ``save_pretrained`` folder of the trained policy (responses come from it).
        start: folder of the starting policy (same tokenizer).
        prompts: P non-empty prompt texts.
        temperature: T > 0 of both distributions (the run's ``generation.temperature``).
        max_new_tokens: response length limit (tokens).
        samples: responses per prompt (≥ 1).
        seed: sampling seed (≥ 1: seeded, reproducible).

    Returns:
        ``KlToStart``; 0.0 for identical policies (up to float rounding).

    Raises:
        InvalidArgumentError: no prompts, temperature ≤ 0, samples < 1, seed < 1, or the two
            policies disagree on the vocabulary size.
        NotFoundError: a folder holds no model.
    """
    import torch
    from transformers import AutoModelForCausalLM

    from grpo.services.generation.backend import BackendConfig, SamplingConfig, create_backend

    if not prompts:
        raise InvalidArgumentError("kl_to_start needs at least one prompt")
    if temperature <= 0:
        raise InvalidArgumentError(f"temperature must be > 0, got {temperature}")
    if samples < 1 or seed < 1:
        raise InvalidArgumentError(f"samples and seed must be >= 1, got {samples} and {seed}")
    backend = create_backend(BackendConfig(model_path=str(policy), device="cpu", dtype="float32"))
    try:
        results = backend.generate(
            list(prompts),
            samples,
            SamplingConfig(temperature=temperature, max_new_tokens=max_new_tokens, seed=seed),
        )
    finally:
        backend.close()
    models = [
        AutoModelForCausalLM.from_pretrained(str(p), torch_dtype=torch.float32).eval()
        for p in (policy, start)
    ]
    vocab = [m.get_output_embeddings().weight.shape[0] for m in models]
    if vocab[0] != vocab[1]:
        raise InvalidArgumentError(
            f"{policy} and {start} have different vocabularies ({vocab[0]} vs {vocab[1]})"
        )
    kl_sum = k1_sum = 0.0
    tokens = responses = 0
    with torch.no_grad():
        for result in results:
            p = len(result.prompt_token_ids)
            for completion in result.completions:
                responses += 1
                if not completion.token_ids:
                    continue
                ids = torch.tensor([result.prompt_token_ids + completion.token_ids])
                # logits[:, t] predict ids[:, t + 1]: the response tokens are predicted by the
                # positions p-1 .. p+L-2
                logp = [
                    torch.log_softmax(
                        m(input_ids=ids).logits[0, p - 1 : -1].float() / temperature, -1
                    )
                    for m in models
                ]
                diff = logp[0] - logp[1]  # [L, V]
                kl_sum += float((logp[0].exp() * diff).sum())
                picked = ids[0, p:].unsqueeze(-1)
                k1_sum += float(diff.gather(-1, picked).sum())
                tokens += len(completion.token_ids)
    n = max(tokens, 1)
    return KlToStart(
        kl_per_token=kl_sum / n,
        kl_per_response=kl_sum / max(responses, 1),
        k1_per_token=k1_sum / n,
        responses=responses,
        tokens=tokens,
    )
