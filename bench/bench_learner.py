"""Learner-math cost vs one forward+backward of the tiny CPU model on the same batch.

Batch: 64 prompts × 16 rollouts × 1024 response tokens (N = 1024 responses, 1M tokens).
Learner math = group advantages + policy loss (forward and backward w.r.t. the log-probs) +
batch diagnostics, timed on the full batch. The model (``init_tiny_model``: Qwen2, hidden
128, 4 layers) is timed on a slice of the same batch (``MODEL_ROWS`` responses of 1024 tokens
plus a 32-token prompt) and scaled linearly to N responses, which the output says; attention
makes the true full-batch cost, if anything, larger. Both run in this process, one torch
thread, side by side. Target (issue 3): learner math < 5% of the model step.

PPO with a learned critic (``estimator: gae``, issue 18) against GRPO: the same trainer step
on the same batch (``GAE_P`` prompts × ``GAE_G`` rollouts × ``GAE_T`` response tokens of the
tiny model), timed alternately (median of ``REPEATS``), with memory as (a) the persistent
training state — parameters, gradients and AdamW moments of every trained model, exact
bytes — and (b) the activations saved for backward (bytes of the tensors autograd keeps,
counted with ``torch.autograd.graph.saved_tensors_hooks``, once per storage), over the whole
step and for the largest single graph (the activation peak); on CUDA also the peak allocated
memory. Printed as GAE / GRPO ratios.
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
GAE_P, GAE_G, GAE_T, GAE_PROMPT = 8, 8, 96, 16


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


def _rollout_groups(vocab: int, eos: int) -> list:
    """GAE_P groups of GAE_G random rollouts (content does not change time or memory)."""
    from grpo.learner.batch import GroupRows, RolloutRow

    g = torch.Generator().manual_seed(5)
    groups = []
    for p in range(GAE_P):
        prompt = torch.randint(3, vocab, (GAE_PROMPT,), generator=g).tolist()
        rows = []
        for i in range(GAE_G):
            length = int(torch.randint(GAE_T // 2, GAE_T + 1, (1,), generator=g))
            resp = torch.randint(3, vocab, (length,), generator=g).tolist()
            resp[-1] = eos
            mu = (-torch.rand(length, generator=g) * 3).tolist()
            rows.append(RolloutRow(i, prompt, resp, mu, True, 0, float(i % 2)))
        groups.append(GroupRows(f"g{p}", f"p{p}", "arith", GAE_G, rows))
    return groups


def _state_bytes(trainer) -> int:
    """Parameters + gradients + optimizer state of every trained model (bytes)."""
    pairs = [(trainer.model, trainer.optimizer)]
    if trainer.critic is not None:
        pairs.append((trainer.critic.model, trainer.critic.optimizer))
    total = 0
    for model, opt in pairs:
        for prm in model.parameters():
            total += prm.numel() * prm.element_size()
            if prm.grad is not None:
                total += prm.grad.numel() * prm.grad.element_size()
        for st in opt.state.values():
            total += sum(v.numel() * v.element_size() for v in st.values() if torch.is_tensor(v))
    return total


def _saved_activation_bytes(step: Callable[[], object]) -> tuple[int, int]:
    """Bytes of the tensors autograd saves for backward during ``step``: (total over the step,
    largest single graph, i.e. between two ``backward`` calls), each storage counted once.

    A graph's storages are kept alive until its ``backward``, so a freed address reused by a
    later tensor is never mistaken for one already counted. The largest graph is the peak of
    activation memory: the policy's graph is freed by its backward before the critic's forward.
    """
    seen: dict[int, object] = {}
    graphs: list[int] = []
    current = [0]

    def pack(t: torch.Tensor) -> torch.Tensor:
        storage = t.untyped_storage()
        if storage.data_ptr() not in seen:
            seen[storage.data_ptr()] = storage
            current[0] += storage.nbytes()
        return t

    original = torch.Tensor.backward

    def backward(self: torch.Tensor, *args: object, **kwargs: object) -> None:
        graphs.append(current[0])
        current[0] = 0
        seen.clear()
        original(self, *args, **kwargs)  # type: ignore[arg-type]

    torch.Tensor.backward = backward  # type: ignore[method-assign]
    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            step()
    finally:
        torch.Tensor.backward = original  # type: ignore[method-assign]
    return sum(graphs), max(graphs, default=0)


def _gae_vs_grpo() -> dict[str, float]:
    """Seconds, state bytes and saved-activation bytes of one GRPO and one GAE trainer step."""
    from transformers import AutoModelForCausalLM

    from grpo.learner.config import LearnerAlgoConfig
    from grpo.learner.trainer import Trainer, TrainerConfig
    from grpo.model import init_tiny_model, load_tokenizer

    with tempfile.TemporaryDirectory() as tmp:
        path = init_tiny_model(tmp, max_positions=GAE_PROMPT + GAE_T + 8)
        tok = load_tokenizer(path)
        trainers = {
            name: Trainer(
                AutoModelForCausalLM.from_pretrained(path),
                LearnerAlgoConfig(estimator=name, process_weight=0.0),
                TrainerConfig(lr=1e-5, warmup_steps=0, micro_batch_size=16, device="auto"),
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )
            for name in ("grpo", "gae")
        }
    groups = _rollout_groups(trainers["grpo"].model.config.vocab_size, tok.eos_token_id)
    out: dict[str, float] = {}
    for name, trainer in trainers.items():
        trainer.step(groups)  # warm-up; creates the AdamW moments
        out[f"{name}_state_bytes"] = _state_bytes(trainer)
        total, peak = _saved_activation_bytes(lambda t=trainer: t.step(groups))
        out[f"{name}_saved_bytes"], out[f"{name}_saved_peak_bytes"] = total, peak
    times: dict[str, list[float]] = {name: [] for name in trainers}
    for _ in range(REPEATS):
        for name, trainer in trainers.items():
            start = time.perf_counter()
            trainer.step(groups)
            times[name].append(time.perf_counter() - start)
    for name in trainers:
        out[f"{name}_s"] = statistics.median(times[name])
    if torch.cuda.is_available():
        for name, trainer in trainers.items():
            torch.cuda.reset_peak_memory_stats()
            trainer.step(groups)
            out[f"{name}_cuda_peak_bytes"] = torch.cuda.max_memory_allocated()
    return out


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
    gae = _gae_vs_grpo()
    mib = 2.0**20
    print(
        f"PPO + critic (gae) vs GRPO, one trainer step on {GAE_P} prompts x {GAE_G} rollouts x "
        f"<= {GAE_T} tokens, tiny model, 1 thread:"
    )
    print(
        f"  time/step: gae {gae['gae_s']:.3f} s, grpo {gae['grpo_s']:.3f} s, "
        f"ratio {gae['gae_s'] / gae['grpo_s']:.2f}x"
    )
    print(
        f"  training state (params + grads + AdamW): gae {gae['gae_state_bytes'] / mib:.1f} MiB, "
        f"grpo {gae['grpo_state_bytes'] / mib:.1f} MiB, "
        f"ratio {gae['gae_state_bytes'] / gae['grpo_state_bytes']:.2f}x"
    )
    print(
        f"  activations saved for backward, whole step: gae {gae['gae_saved_bytes'] / mib:.1f} "
        f"MiB, grpo {gae['grpo_saved_bytes'] / mib:.1f} MiB, "
        f"ratio {gae['gae_saved_bytes'] / gae['grpo_saved_bytes']:.2f}x"
    )
    print(
        f"  activations saved for backward, largest graph (peak): gae "
        f"{gae['gae_saved_peak_bytes'] / mib:.1f} MiB, grpo "
        f"{gae['grpo_saved_peak_bytes'] / mib:.1f} MiB, "
        f"ratio {gae['gae_saved_peak_bytes'] / gae['grpo_saved_peak_bytes']:.2f}x"
    )
    if "gae_cuda_peak_bytes" in gae:
        print(
            f"  CUDA peak allocated: gae {gae['gae_cuda_peak_bytes'] / mib:.1f} MiB, grpo "
            f"{gae['grpo_cuda_peak_bytes'] / mib:.1f} MiB, "
            f"ratio {gae['gae_cuda_peak_bytes'] / gae['grpo_cuda_peak_bytes']:.2f}x"
        )


if __name__ == "__main__":
    main()
