"""Trainer step cost on the main job's shapes (tiny model, 8 groups x 8 rollouts, ~40 tokens).

Prints, measured side by side in one run on one torch thread (CPU seconds of the process):
- a full ``Trainer.step`` (batch building, π_old, advantages, loss, diagnostics, AdamW) against
  a bare forward+backward+AdamW of the same padded batch: the trainer's overhead ratio;
- one PPO epoch with one minibatch (π_old reused from the gradient pass) against the same step
  with a separate π_old forward (forced by 2 minibatches of half the rows): the saving;
- micro-batch sizes 64, 16 and 8 rows: time per step relative to 64.
"""

from __future__ import annotations

import random
import tempfile
import time
from pathlib import Path

import torch

from grpo.v1 import common_pb2


def _groups(model_dir: Path, n_groups: int = 8, g: int = 8, length: int = 40) -> list:
    from grpo.model import load_tokenizer

    tok = load_tokenizer(model_dir)
    rng = random.Random(0)
    groups = []
    for p in range(n_groups):
        prompt = tok(f"{rng.randint(10, 999)}+{rng.randint(10, 999)}=")["input_ids"]
        members = []
        for i in range(g):
            n = rng.randint(length // 2, length)
            ids = [rng.randint(3, 90) for _ in range(n - 1)] + [tok.eos_token_id]
            members.append(
                common_pb2.ScoredRollout(
                    rollout=common_pb2.Rollout(
                        index=i,
                        prompt_token_ids=prompt,
                        completion=common_pb2.Completion(
                            token_ids=ids, behavior_logprobs=[-1.0] * n, text="x" * (n - 1)
                        ),
                    ),
                    outcome=common_pb2.Score(
                        status=common_pb2.SCORE_STATUS_OK, reward=float(rng.random() < 0.5)
                    ),
                )
            )
        groups.append(common_pb2.Group(group_id=f"g{p}", group_size=g, members=members))
    return groups


def _time(fn, repeats: int = 5) -> float:
    """Best of ``repeats`` in CPU seconds of this process (robust to other load on the host)."""
    fn()  # warm-up
    best = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    from transformers import AutoModelForCausalLM

    from grpo.learner.config import LearnerAlgoConfig
    from grpo.learner.trainer import Trainer, TrainerConfig
    from grpo.model import init_tiny_model, load_tokenizer
    from grpo.services.learner.batch import build_batch, group_rows

    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as tmp:
        model_dir = init_tiny_model(Path(tmp) / "m", max_positions=128)
        tok = load_tokenizer(model_dir)
        groups = _groups(model_dir)

        def trainer(**cfg: object) -> Trainer:
            return Trainer(
                AutoModelForCausalLM.from_pretrained(model_dir),
                LearnerAlgoConfig(),
                TrainerConfig(**{"lr": 1e-5, "micro_batch_size": 64, **cfg}),  # type: ignore[arg-type]
                pad_token_id=tok.pad_token_id,
                eos_token_id=tok.eos_token_id,
            )

        bare_model = AutoModelForCausalLM.from_pretrained(model_dir)
        opt = torch.optim.AdamW(bare_model.parameters(), lr=1e-5)
        batch = build_batch(groups, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)

        def bare() -> None:
            out = bare_model(
                input_ids=batch.input_ids,
                attention_mask=batch.attention_mask,
                position_ids=batch.position_ids,
            )
            out.logits.float().logsumexp(-1).mean().backward()
            opt.step()
            opt.zero_grad()

        t_bare = _time(bare)
        t64 = trainer()
        t_step = _time(lambda: t64.step([group_rows(g) for g in groups]))
        t_sep = trainer(minibatches=2)
        t_separate = _time(lambda: t_sep.step([group_rows(g) for g in groups]))
        print(f"rows={batch.num_rows} tokens/row<= {batch.response_ids.shape[1]}")
        print(f"bare fwd+bwd+AdamW       {t_bare * 1e3:8.1f} ms   1.00x")
        print(f"Trainer.step (mb=64)     {t_step * 1e3:8.1f} ms   {t_step / t_bare:.2f}x bare")
        print(
            f"with separate pi_old pass {t_separate * 1e3:7.1f} ms   "
            f"{t_separate / t_step:.2f}x the reused-pi_old step"
        )
        for micro in (32, 16, 8):
            tm = trainer(micro_batch_size=micro)
            t = _time(lambda tm=tm: tm.step([group_rows(g) for g in groups]), repeats=3)
            print(f"micro_batch_size={micro:<3}      {t * 1e3:8.1f} ms   {t / t_step:.2f}x mb=64")


if __name__ == "__main__":
    main()
