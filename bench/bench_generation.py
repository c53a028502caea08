"""Generation benchmark: transformers-backend tokens/s at batch 1, 8, 32 and the cost of μ.

Everything is measured in this run, side by side, on the tiny model (one torch thread):

- tokens/s of ``generate`` at batch sizes 1, 8 and 32 (one prompt, ``n`` = batch; fixed
  ``max_new_tokens`` and no EOS stop so every row generates the same number of tokens), and each
  batch size's speed-up over batch 1;
- the share of generation time spent on behavior log-probs: the per-step sampling function
  with the log-prob step (log_softmax + gather) and a variant without it (softmax +
  multinomial) are timed on [B, V] logits; their difference times the number of steps, over
  the CPU time of a whole generate call of the same batch, is the share (the end-to-end
  difference is below the run-to-run noise of a shared machine);
- rates use this process's CPU time (one thread, so = wall time on an idle core) because the
  development machine is shared and its wall-clock times are inflated; wall is printed too.
"""

from __future__ import annotations

import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import torch

from grpo.model import init_tiny_model
from grpo.services.generation import transformers_backend
from grpo.services.generation.backend import BackendConfig, SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend

__all__ = ["main"]

NEW_TOKENS = 48
REPEATS = 3


def _no_logprob_sampler(
    logits: torch.Tensor, sampling: SamplingConfig, generator: torch.Generator | None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sampling without computing log-probs (returns zeros): the baseline for μ's cost."""
    probs = torch.softmax(logits / sampling.temperature, dim=-1)
    tokens = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
    return tokens, torch.zeros(tokens.shape)


def _time(
    backend: TransformersBackend, batch: int, sampling: SamplingConfig
) -> tuple[float, float, int]:
    """(wall s, cpu s, tokens) of the lowest-CPU of REPEATS generate calls with ``batch`` rows."""
    best = (float("inf"), 0.0, 0)
    for _ in range(REPEATS):
        wall, cpu = time.perf_counter(), time.process_time()
        out = backend.generate(["12+34="], batch, sampling)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        tokens = sum(len(c.token_ids) for c in out[0].completions)
        if cpu < best[1] or not best[2]:
            best = (wall, cpu, tokens)
    return best


Sampler = Callable[
    [torch.Tensor, SamplingConfig, torch.Generator | None], tuple[torch.Tensor, torch.Tensor]
]


def _sampler_cpu(sampler: Sampler, logits: torch.Tensor, sampling: SamplingConfig) -> float:
    """CPU seconds of one ``sampler(logits, sampling, generator)`` call (best mean of 3x2000)."""
    generator = torch.Generator().manual_seed(0)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        for _ in range(2000):
            sampler(logits, sampling, generator)
        best = min(best, (time.process_time() - start) / 2000)
    return best


def main() -> None:
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = init_tiny_model(Path(tmp) / "tiny")
        backend = TransformersBackend(BackendConfig(model_path=str(model_dir)))
        backend._eos = set()  # never stop early: equal lengths across batch sizes
        sampling = SamplingConfig(temperature=1.0, max_new_tokens=NEW_TOKENS, seed=1)
        backend.generate(["warm up"], 2, sampling)
        print(f"tiny model, {NEW_TOKENS} new tokens per row, best of {REPEATS}, 1 thread")
        base = None
        for batch in (1, 8, 32):
            wall, cpu, tokens = _time(backend, batch, sampling)
            rate = tokens / cpu
            base = base or rate
            print(
                f"batch {batch:3d}: {rate:9.0f} tokens per cpu-s  ({cpu * 1e3:7.1f} ms cpu, "
                f"{wall * 1e3:7.1f} ms wall)  speed-up vs batch 1: {rate / base:5.1f}x"
            )
        vocab = backend.model.config.vocab_size
        for batch in (8, 32):
            gen_cpu = _time(backend, batch, sampling)[1]
            logits = torch.randn(batch, vocab)
            with_lp = _sampler_cpu(transformers_backend.sample_next_tokens, logits, sampling)
            without = _sampler_cpu(_no_logprob_sampler, logits, sampling)
            extra = max(0.0, with_lp - without) * NEW_TOKENS  # cpu s per generate call
            print(
                f"batch {batch:3d}: behavior log-probs cost {extra / gen_cpu * 100:5.2f}% of "
                f"generation time (sampling step {with_lp * 1e6:.1f} us with / "
                f"{without * 1e6:.1f} us without = {with_lp / without:.2f}x; "
                f"generate {gen_cpu * 1e3:.1f} ms cpu)"
            )


if __name__ == "__main__":
    main()
