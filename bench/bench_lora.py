"""Learner memory and step time with and without LoRA on the tiny model (issue 31).

The main job's learner (configs/arith-cpu.yaml): the tiny Qwen2 (hidden 128, 4 layers,
intermediate 512, char vocabulary; ~1 M parameters), 8 groups × 8 rollouts of 24–40
response tokens after a 12-token prompt (rewards alternating, so every row trains),
``minibatches: 4``, ``micro_batch_size: 64``, float32 on the CPU, one torch thread. Arms:
``full`` (every weight trained) and ``lora`` (``LoraConfig()`` defaults: r 16, alpha 32, every
attention and MLP projection), built by ``build_trainer`` as the service builds them.

Memory, exact bytes (the same every run): the persistent training state — parameters,
gradients and AdamW moments of the trained model — and the activations autograd saves for
backward over a step and in its largest graph (``bench_learner._saved_activation_bytes``).
Time: ``Trainer.step`` seconds, the arms alternated step by step after a warm-up, median and
range over ``REPEATS`` steps each: wall-clock, and the process's CPU seconds (one torch thread:
the work itself, less sensitive than wall time to other processes on a shared machine). The
1-minute load average is printed with them.
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from functools import partial
from typing import Any

import torch

from bench.bench_learner import _saved_activation_bytes, _state_bytes

REPEATS = 9
P, G, PROMPT, RESP_MIN, RESP_MAX = 8, 8, 12, 24, 40


def _groups(vocab: int, eos: int) -> list[Any]:
    from grpo.learner.batch import GroupRows, RolloutRow

    g = torch.Generator().manual_seed(3)
    out = []
    for p in range(P):
        prompt = torch.randint(3, vocab, (PROMPT,), generator=g).tolist()
        rows = []
        for i in range(G):
            n = int(torch.randint(RESP_MIN, RESP_MAX + 1, (1,), generator=g))
            resp = torch.randint(3, vocab, (n,), generator=g).tolist()
            resp[-1] = eos
            mu = (-torch.rand(n, generator=g) * 3).tolist()
            rows.append(RolloutRow(i, prompt, resp, mu, True, 0, float(i % 2)))
        out.append(GroupRows(f"g{p}", f"p{p}", "arith", G, rows))
    return out


def measure() -> dict[str, dict[str, Any]]:
    """Per arm: trained parameters, state bytes, saved-activation bytes, step seconds."""
    from grpo.learner.config import LearnerAlgoConfig, LoraConfig, TrainerConfig
    from grpo.learner.loading import build_trainer
    from grpo.model import init_tiny_model

    config = TrainerConfig(
        lr=1e-5, warmup_steps=0, minibatches=4, micro_batch_size=64, device="cpu",
        max_response_length=RESP_MAX,
    )  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = init_tiny_model(tmp, hidden=128, layers=4, heads=4, kv_heads=2, intermediate=512)
        arms = {
            "full": build_trainer(path, LearnerAlgoConfig(), config)[0],
            "lora": build_trainer(path, LearnerAlgoConfig(), config, lora=LoraConfig())[0],
        }
        eos = 1
    groups = _groups(arms["full"].model.config.vocab_size, eos)
    out: dict[str, dict[str, Any]] = {}
    for name, trainer in arms.items():
        trainer.step(groups)  # warm-up; creates the AdamW moments
        total, peak = _saved_activation_bytes(partial(trainer.step, groups))
        out[name] = {
            "trained_params": sum(p.numel() for p in trainer.model.parameters() if p.requires_grad),
            "all_params": sum(p.numel() for p in trainer.model.parameters()),
            "state_bytes": _state_bytes(trainer),
            "saved_bytes": total,
            "saved_peak_bytes": peak,
            "times": [],
            "cpu": [],
        }
    for _ in range(REPEATS):
        for name, trainer in arms.items():
            start, cpu = time.perf_counter(), time.process_time()
            trainer.step(groups)
            out[name]["times"].append(time.perf_counter() - start)
            out[name]["cpu"].append(time.process_time() - cpu)
    return out


def main() -> None:
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    result = measure()
    print("| arm | trained / all params | state KiB | saved activations KiB (step / peak graph) "
          "| step wall s | step CPU s |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- |")

    def span(xs: list[float]) -> str:
        return f"{statistics.median(xs):.3f} ({min(xs):.3f}-{max(xs):.3f})"

    for name, r in result.items():
        print(
            f"| {name} | {r['trained_params']:,} / {r['all_params']:,} | "
            f"{r['state_bytes'] / 1024:,.0f} | {r['saved_bytes'] / 1024:,.0f} / "
            f"{r['saved_peak_bytes'] / 1024:,.0f} | {span(r['times'])} | {span(r['cpu'])} |"
        )
    full, lora = result["full"], result["lora"]

    def ratio(key: str) -> float:
        return statistics.median(lora[key]) / statistics.median(full[key])

    print(
        f"lora / full: state {lora['state_bytes'] / full['state_bytes']:.2f}x, saved "
        f"activations {lora['saved_bytes'] / full['saved_bytes']:.2f}x, step wall "
        f"{ratio('times'):.2f}x, step CPU {ratio('cpu'):.2f}x; load average "
        f"{os.getloadavg()[0]:.1f}"
    )


if __name__ == "__main__":
    main()
