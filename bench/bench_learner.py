"""Learner-math cost vs one forward+backward of the tiny CPU model on the same batch.

Batch: 64 prompts × 16 rollouts × 1024 response tokens (N = 1024 responses, 1M tokens).
Learner math = group advantages + policy loss (forward and backward w.r.t. the log-probs) +
batch diagnostics, timed on the full batch. The model (``init_tiny_model``: Qwen2, hidden
128, 4 layers) is timed on a slice of the same batch (``MODEL_ROWS`` responses of 1024 tokens
plus a 32-token prompt) and scaled linearly to N responses, which the output says; attention
makes the true full-batch cost, if anything, larger. Both run in this process, one torch
thread, side by side. Target (issue 3): learner math < 5% of the model step.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable

import torch

P, G, T_RESP, T_PROMPT = 64, 16, 1024, 32
MODEL_ROWS = 2
REPEATS = 3


def _median_s(fn: Callable[[], object], repeats: int = REPEATS) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def _learner_math(batch: dict[str, torch.Tensor]) -> None:
    from grpo.learner.advantages import group_advantages
    from grpo.learner.diagnostics import batch_diagnostics
    from grpo.learner.losses import loss_denominators, policy_loss

    adv = group_advantages(batch["rewards"], "grpo", std="population")
    lp = batch["logprobs"].clone().requires_grad_(True)
    denom = loss_denominators(batch["mask"])
    loss, stats = policy_loss(
        lp,
        batch["old"],
        adv.reshape(-1),
        batch["mask"],
        clip_low=0.2,
        clip_high=0.28,
        reduction="token_mean",
        num_tokens=denom.num_tokens,
        num_responses=denom.num_responses,
        behavior_logprobs=batch["behavior"],
        tis_cap=2.0,
    )
    loss.backward()
    batch_diagnostics(
        batch["rewards"], adv, batch["mask"], loss_stats=stats, truncated=batch["truncated"]
    )


def _process_credit(steps: dict[str, list]) -> None:
    from grpo.learner.process import process_token_advantages

    process_token_advantages(
        steps["rewards"],
        steps["ends"],
        steps["lengths"],
        group_index=steps["groups"],
        num_tokens=T_RESP,
    )


def _make_steps(batch: dict[str, torch.Tensor], steps_per_response: int = 8) -> dict[str, list]:
    lengths = batch["mask"].sum(1).tolist()
    g = torch.Generator().manual_seed(2)
    ends = [
        sorted(set(torch.randint(0, length, (steps_per_response,), generator=g).tolist()))
        for length in lengths
    ]
    rewards = [torch.randint(0, 2, (len(e),), generator=g).float().tolist() for e in ends]
    return {
        "rewards": rewards,
        "ends": ends,
        "lengths": lengths,
        "groups": [i // G for i in range(P * G)],
    }


def _make_batch(seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    n = P * G
    lengths = torch.randint(T_RESP // 4, T_RESP + 1, (n,), generator=g)
    old = -torch.rand(n, T_RESP, generator=g) * 3
    return {
        "rewards": torch.randint(0, 2, (P, G), generator=g).float(),
        "mask": torch.arange(T_RESP).unsqueeze(0) < lengths.unsqueeze(1),
        "old": old,
        "logprobs": old + 0.05 * torch.randn(n, T_RESP, generator=g),
        "behavior": old + 0.01 * torch.randn(n, T_RESP, generator=g),
        "truncated": lengths == T_RESP,
    }


def _model_step_s() -> tuple[float, int]:
    """Seconds of one forward+backward on MODEL_ROWS rows, and the model's parameter count."""
    from transformers import Qwen2ForCausalLM

    from grpo.learner.logprobs import token_logprobs
    from grpo.model import init_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        path = init_tiny_model(tmp, max_positions=T_PROMPT + T_RESP + 8)
        model = Qwen2ForCausalLM.from_pretrained(path)
    model.train()
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(3, vocab, (MODEL_ROWS, T_PROMPT + T_RESP), generator=g)

    def step() -> None:
        model.zero_grad(set_to_none=True)
        logits = model(input_ids=ids, use_cache=False).logits[:, T_PROMPT - 1 : -1]
        lp = token_logprobs(logits, ids[:, T_PROMPT:], 1.0)
        lp.mean().backward()

    return _median_s(step, repeats=2), sum(p.numel() for p in model.parameters())


def main() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    batch = _make_batch()
    math_s = _median_s(lambda: _learner_math(batch))
    steps = _make_steps(batch)
    process_s = _median_s(lambda: _process_credit(steps))
    slice_s, params = _model_step_s()
    n = P * G
    model_s = slice_s * n / MODEL_ROWS
    ratio = math_s / model_s
    tokens = int(batch["mask"].sum())
    print(f"batch: {P} prompts x {G} rollouts x {T_RESP} tokens ({tokens} loss tokens), 1 thread")
    print(f"learner math (advantages + loss fwd/bwd + diagnostics): {math_s * 1e3:.1f} ms")
    print(
        f"tiny model fwd+bwd ({params / 1e6:.2f}M params): {slice_s:.2f} s on {MODEL_ROWS} rows, "
        f"scaled linearly x{n // MODEL_ROWS} to {model_s:.1f} s for {n} rows"
    )
    verdict = "OK" if ratio < 0.05 else "ABOVE TARGET"
    print(f"ratio learner math / model step = {ratio:.4%} (target < 5%: {verdict})")
    print(
        f"process credit (8 steps/response, group normalization): {process_s * 1e3:.1f} ms "
        f"= {process_s / model_s:.4%} of the model step"
    )


if __name__ == "__main__":
    main()
