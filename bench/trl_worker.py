"""TRL's GRPOTrainer on the main job's task, run in TRL's own venv by ``bench_vs_trl``.

This file imports only torch, transformers, datasets and trl (never ``grpo``): it runs under
``.venv-trl/bin/python`` (``make bench-vs-trl`` builds that venv; TRL is never a dependency of
the package). It trains the given SFT checkpoint with ``trl.GRPOTrainer`` on the prompts of
``--train`` (JSONL rows ``{"prompt", "gold"}``) and saves the policy each time the generated
completion tokens pass a milestone (``--save-every`` tokens) and at the end, writing one line
per save to ``<out>/milestones.jsonl``: ``{"tokens", "cpu_s", "wall_s", "dir", "step"}``
(``cpu_s``: user + system CPU seconds of this process). ``bench_vs_trl`` scores every saved
policy on the held-out set with the run's own outcome verifier, as it scores ours.

Reward: 1.0 when the text after the completion's last ``:`` is the gold integer, else 0.0 —
the worked-solution format of the arithmetic tasks (``7+8=15,4+3+1=8:85``), for which the math
verifier's verdict is the same integer comparison.

Settings mirror the main job: G completions per prompt (``num_generations``), 64 completions
per generation, 2 PPO epochs (``num_iterations``) x 2 optimizer steps per generation
(``steps_per_generation``), clip 0.2, no KL (beta 0), token-mean loss (``loss_type="dapo"``
where this TRL has it), temperature 1, ``max_completion_length``, one torch thread, CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import resource
import time
from pathlib import Path
from typing import Any


def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _reward(completions: list[Any], gold: list[str], **_: Any) -> list[float]:
    """1.0 when the answer after the last ':' equals the gold integer (see module docstring)."""
    out = []
    for text, want in zip(completions, gold, strict=True):
        if isinstance(text, list):  # conversational format: [{"content": ...}]
            text = text[0]["content"]
        answer = str(text).rsplit(":", 1)[-1].strip()
        out.append(1.0 if answer == str(want).strip() else 0.0)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", required=True, help="SFT checkpoint folder (HF format)")
    ap.add_argument("--train", required=True, help="JSONL of {prompt, gold}")
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--warmup-steps", type=int, default=5)
    ap.add_argument("--group-size", type=int, default=8)
    ap.add_argument("--completions-per-step", type=int, default=64)
    ap.add_argument("--max-new-tokens", type=int, default=40)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--token-budget", type=int, default=450_000)
    ap.add_argument("--save-every", type=int, default=50_000)
    args = ap.parse_args()

    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows = [json.loads(line) for line in Path(args.train).read_text().splitlines() if line]
    dataset = Dataset.from_list([{"prompt": r["prompt"], "gold": r["gold"]} for r in rows])
    tokenizer = PreTrainedTokenizerFast.from_pretrained(args.model)
    tokenizer.padding_side = "left"
    model = AutoModelForCausalLM.from_pretrained(args.model, torch_dtype=torch.float32)

    per_step = args.completions_per_step // 2  # 2 optimizer steps per generation
    generations = -(-args.token_budget // (args.completions_per_step * 8)) + 10
    wanted = {
        "output_dir": str(out / "trainer"),
        "seed": args.seed,
        "learning_rate": args.lr,
        "warmup_steps": args.warmup_steps,
        "lr_scheduler_type": "constant_with_warmup",
        "per_device_train_batch_size": per_step,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": 2,
        "num_iterations": 2,
        "num_generations": args.group_size,
        "max_completion_length": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": 1.0,
        "beta": 0.0,
        "epsilon": 0.2,
        "loss_type": "dapo",
        "max_grad_norm": 1.0,
        "max_steps": generations * 4,
        "logging_steps": 10,
        "save_strategy": "no",
        "report_to": "none",
        "use_cpu": True,
        "bf16": False,
        "fp16": False,
        "dataloader_num_workers": 0,
        "remove_unused_columns": False,
    }
    fields = {f.name for f in dataclasses.fields(GRPOConfig)}
    config = GRPOConfig(**{k: v for k, v in wanted.items() if k in fields})
    dropped = sorted(set(wanted) - fields)

    counted = {"tokens": 0}

    def reward(completions: list[Any], gold: list[str], **kw: Any) -> list[float]:
        ids = kw.get("completion_ids")
        if ids is not None:
            counted["tokens"] += sum(len(x) for x in ids)
        else:
            texts = [c[0]["content"] if isinstance(c, list) else c for c in completions]
            counted["tokens"] += sum(len(tokenizer(t)["input_ids"]) + 1 for t in texts)
        return _reward(completions, gold)

    reward.__name__ = "outcome"
    started = time.time()
    log = (out / "milestones.jsonl").open("w")
    meta = {"trl_config_dropped": dropped, "args": vars(args)}
    (out / "worker.json").write_text(json.dumps(meta, indent=2))

    def save(step: int, mdl: Any) -> None:
        folder = out / f"policy-{counted['tokens']}"
        mdl.save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        row = {
            "tokens": counted["tokens"],
            "cpu_s": round(_cpu_s(), 1),
            "wall_s": round(time.time() - started, 1),
            "dir": str(folder),
            "step": step,
        }
        log.write(json.dumps(row) + "\n")
        log.flush()

    class Milestones(TrainerCallback):  # type: ignore[misc]
        next_at = args.save_every

        def on_step_end(self, _args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if counted["tokens"] >= self.next_at:
                save(state.global_step, kw["model"])
                self.next_at += args.save_every
            if counted["tokens"] >= args.token_budget:
                control.should_training_stop = True
            return control

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Milestones()],
    )
    save(0, model)
    trainer.train()
    save(trainer.state.global_step, trainer.model)
    log.close()


if __name__ == "__main__":
    main()
