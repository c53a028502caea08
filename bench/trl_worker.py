"""TRL's GRPOTrainer on the main job's task, run in TRL's own venv by ``bench_vs_trl``.

This file imports only torch, transformers, datasets and trl (never ``grpo``): it runs under
``.venv-trl/bin/python`` (``make bench-vs-trl`` builds that venv; TRL is never a dependency of
the package). It trains the given SFT checkpoint with ``trl.GRPOTrainer`` on the prompts of
``--train`` (JSONL rows ``{"prompt", "gold"}``) and saves the policy each time the generated
completion tokens pass a milestone (``--save-every`` tokens) and at the end, writing one line
per save to ``<out>/milestones.jsonl``: ``{"tokens", "cpu_s", "wall_s", "dir", "step"}``
(``cpu_s``: user + system CPU seconds of this process and its reaped children), and TRL's logs
(every ``logging_steps``) to ``<out>/logs.jsonl``. A file ``<out>/STOP`` ends training at the
next generation boundary (saved and recorded like the budget's end). ``bench_vs_trl`` scores
every saved policy on the held-out set with the run's own outcome verifier, as it scores ours.

Reward: 1.0 when the text after the completion's last ``:`` is the gold integer, else 0.0 —
the worked-solution format of the arithmetic tasks (``7+8=15,4+3+1=8:85``), for which the math
verifier's verdict is the same integer comparison.

Settings mirror the main job's learner (``bench_vs_trl`` passes them from the run config):
G completions per prompt (``num_generations``), completions per generation, PPO epochs
(``num_iterations``) x minibatches (``steps_per_generation``, one optimizer step each), clip
(``epsilon``/``epsilon_high``), no KL (beta 0), token-mean loss (``loss_type="dapo"``),
temperature, top-p 1 / top-k 0, ``max_completion_length``, AdamW betas/eps/weight decay,
gradient-norm clip, and the learner's learning rate of every optimizer update (``--lr-factors``:
a JSON list of factors of ``--lr``, the last one held; a ``LambdaLR`` over TRL's optimizer
updates); one torch thread, CPU. What TRL keeps its own way: its group std is the sample std
(ours: population), it trains on every group (zero-advantage ones too; ours drops them with
dynamic sampling), prompts are drawn uniformly (ours: the curriculum), generation is synchronous
(no staleness).
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
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


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
    ap.add_argument("--lr-factors", required=True, help="JSON list: lr factor per update")
    ap.add_argument("--adam", type=float, nargs=3, default=(0.9, 0.999, 1e-8))
    ap.add_argument("--weight-decay", type=float, default=0.0)
    ap.add_argument("--max-grad-norm", type=float, default=1.0)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--minibatches", type=int, default=2)
    ap.add_argument("--clip", type=float, nargs=2, default=(0.2, 0.2))
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

    per_step = args.completions_per_step // args.minibatches  # one optimizer step each
    updates_per_generation = args.epochs * args.minibatches
    # Enough updates for the budget at >= 10 tokens per completion; the callback stops earlier.
    generations = -(-args.token_budget // (args.completions_per_step * 10)) + 10
    factors = [float(x) for x in json.loads(Path(args.lr_factors).read_text())]
    wanted = {
        "output_dir": str(out / "trainer"),
        "seed": args.seed,
        "learning_rate": args.lr,
        "per_device_train_batch_size": per_step,
        "gradient_accumulation_steps": 1,
        "steps_per_generation": args.minibatches,
        "num_iterations": args.epochs,
        "num_generations": args.group_size,
        "max_completion_length": args.max_new_tokens,
        "temperature": args.temperature,
        "top_p": 1.0,
        "top_k": 0,
        "beta": 0.0,
        "epsilon": args.clip[0],
        "epsilon_high": args.clip[1],
        "loss_type": "dapo",
        "scale_rewards": "group",
        "max_grad_norm": args.max_grad_norm,
        "weight_decay": args.weight_decay,
        "adam_beta1": args.adam[0],
        "adam_beta2": args.adam[1],
        "adam_epsilon": args.adam[2],
        "max_steps": generations * updates_per_generation,
        "logging_steps": updates_per_generation,
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
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.lr,
        betas=(args.adam[0], args.adam[1]),
        eps=args.adam[2],
        weight_decay=args.weight_decay,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: factors[min(s, len(factors) - 1)]
    )

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
    trl_log = (out / "logs.jsonl").open("w")
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

    save_every, budget = args.save_every, args.token_budget  # `args` is TRL's in the callbacks

    class Milestones(TrainerCallback):  # type: ignore[misc]
        next_at = save_every

        def on_step_end(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            if state.global_step % updates_per_generation:  # mid-generation: not all trained
                return control
            if counted["tokens"] >= self.next_at:
                save(state.global_step, kw["model"])
                self.next_at += save_every
            if counted["tokens"] >= budget or (out / "STOP").exists():
                control.should_training_stop = True
            return control

        def on_log(self, args: Any, state: Any, control: Any, **kw: Any) -> Any:
            row = {"step": state.global_step, "tokens": counted["tokens"], **(kw.get("logs") or {})}
            trl_log.write(json.dumps(row) + "\n")
            trl_log.flush()
            return control

    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[Milestones()],
        optimizers=(optimizer, scheduler),
    )
    save(0, model)
    trainer.train()
    save(trainer.state.global_step, trainer.model)
    log.close()
    trl_log.close()


if __name__ == "__main__":
    main()
