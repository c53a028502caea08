"""Side by side with TRL's GRPOTrainer: held-out accuracy against generated tokens and CPU
seconds, from the same SFT checkpoint, prompts and held-out set, per seed and as the median.

``make bench-vs-trl`` (= ``python -m bench.bench_vs_trl --trl-python .venv-trl/bin/python``)
builds TRL's own venv on first use (CPU torch 2.13.0 first, then trl; never a dependency of the
package) and runs, for each seed:

1. the SFT warm start of CONFIG at that seed (``grpo.services.pipeline.policy.prepare_policy``,
   deterministic per seed) into ``<out>/s<seed>/model/sft``;
2. ours: ``grpo run CONFIG`` from that checkpoint (SFT off), stopped at ``--token-budget``
   generated tokens, held-out evaluations every ``eval.every_steps``;
3. TRL: ``bench/trl_worker.py`` in TRL's venv from the same checkpoint and prompts, G and
   completions per step as CONFIG, saving the policy every ``--save-every`` tokens;
   each saved policy is scored here by ``heldout_accuracy`` — greedy decoding, the run's own
   outcome verifier — exactly as the run scores ours.

The two systems run one after the other (never at the same time: the machine's cores are the
budget). CPU seconds: user + system of every process of the run (``RUSAGE_CHILDREN`` of the
``grpo run`` subprocess: SFT excluded, service start-up included) and of the TRL process.
Accuracy at a token count is the last evaluation at or below it. Results:
``<out>/results.json`` and a Markdown table printed and written to ``<out>/report.md``.

``python -m bench`` skips this module (it installs TRL and takes minutes per seed).
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
MARKS = (100_000, 200_000, 400_000)


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def _at(curve: list[tuple[int, float]], tokens: int) -> float | None:
    """Accuracy of the last point at or below ``tokens`` (None when there is none > 0)."""
    best = None
    for t, acc in curve:
        if t <= tokens and t > 0:
            best = acc
    return best


def _prepare(config_path: Path, seed: int, root: Path) -> tuple[Any, Path]:
    from grpo.services.pipeline.config import load_run_config
    from grpo.services.pipeline.policy import prepare_policy
    from grpo.services.pipeline.tasks import load_run_tasks

    config = load_run_config(config_path, {"seed": seed})
    tasks = load_run_tasks(config)
    sft = root / "model" / "sft"
    if not (sft / "config.json").exists():
        prepare_policy(config, root, tasks, lambda msg: print(f"  [s{seed}] {msg}", flush=True))
    train = root / "train.jsonl"
    with train.open("w") as fh:
        for t in tasks.train:
            fh.write(json.dumps({"prompt": t.prompt, "gold": t.gold_answer}) + "\n")
    return config, sft


def _score(config: Any, model_dir: Path, out: Path) -> float:
    from grpo.services.pipeline.heldout import heldout_accuracy
    from grpo.services.pipeline.tasks import load_run_tasks

    tasks = load_run_tasks(config)
    report = heldout_accuracy(
        model_dir, tasks.heldout, config=config, task_type=tasks.task_type, out_dir=out
    )
    return float(report.accuracy)


def _ours(config_path: Path, seed: int, sft: Path, root: Path, budget: int) -> dict[str, Any]:
    run_dir = root / "ours"
    before = _children_cpu_s()
    started = time.time()
    cmd = [
        str(REPO / ".venv" / "bin" / "grpo"),
        "run",
        str(config_path),
        "--run-dir",
        str(run_dir),
        "--set",
        f"seed={seed}",
        "--set",
        f"model.path={sft}",
        "--set",
        "model.sft.enabled=false",
        "--set",
        f"budget.generated_tokens={budget}",
        "--set",
        "budget.steps=100000",
        "--set",
        "budget.wall_clock_s=7200",
    ]
    subprocess.run(cmd, check=True, cwd=REPO)
    evals = [json.loads(line) for line in (run_dir / "eval.jsonl").read_text().splitlines()]
    curve = [(int(e["generated_tokens"]), float(e["accuracy"])) for e in evals]
    return {
        "curve": curve,
        "cpu_s": round(_children_cpu_s() - before, 1),
        "wall_s": round(time.time() - started, 1),
        "tokens": curve[-1][0],
    }


def _trl(
    config: Any, trl_python: str, sft: Path, root: Path, seed: int, budget: int, save_every: int
) -> dict[str, Any]:
    out = root / "trl"
    trainer = config.learner.trainer
    cmd = [
        trl_python,
        str(REPO / "bench" / "trl_worker.py"),
        "--model", str(sft),
        "--train", str(root / "train.jsonl"),
        "--out", str(out),
        "--seed", str(seed),
        "--lr", str(trainer.lr),
        "--warmup-steps", str(trainer.warmup_steps),
        "--group-size", str(config.generation.group_size),
        "--completions-per-step", str(config.generation.group_size * config.learner.batch_groups),
        "--max-new-tokens", str(config.generation.max_new_tokens),
        "--temperature", str(config.generation.temperature),
        "--token-budget", str(budget),
        "--save-every", str(save_every),
    ]  # fmt: skip
    env = {"OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "PATH": "/usr/bin:/bin", "HOME": str(Path.home())}  # fmt: skip
    started = time.time()
    subprocess.run(cmd, check=True, env=env)
    rows = [json.loads(line) for line in (out / "milestones.jsonl").read_text().splitlines()]
    curve = []
    for row in rows:
        acc = _score(config, Path(row["dir"]), out / "eval" / f"tokens-{row['tokens']}")
        curve.append((int(row["tokens"]), acc))
        print(f"  [s{seed}] TRL at {row['tokens']} tokens: {acc:.3f}", flush=True)
    return {
        "curve": curve,
        "cpu_s": rows[-1]["cpu_s"],
        "wall_s": round(time.time() - started, 1),
        "tokens": rows[-1]["tokens"],
    }


def _table(results: dict[str, Any]) -> str:
    head = "| run | seed | SFT | " + " | ".join(f"{m // 1000} k tokens" for m in MARKS)
    lines = [head + " | final (tokens) | CPU s |", "|" + " --- |" * (len(MARKS) + 5)]
    medians: dict[str, list[list[float]]] = {"ours": [], "trl": []}
    for seed, res in sorted(results.items()):
        for name in ("ours", "trl"):
            r = res[name]
            pts = [_at(r["curve"], m) for m in MARKS]
            final = r["curve"][-1][1]
            cells = " | ".join("—" if p is None else f"{100 * p:.1f}" for p in pts)
            lines.append(
                f"| {name} | {seed} | {100 * res['sft']:.1f} | {cells} | "
                f"{100 * final:.1f} ({r['tokens'] // 1000} k) | {r['cpu_s']:.0f} |"
            )
            medians[name].append([p if p is not None else float("nan") for p in pts] + [final])
    for name, rows in medians.items():
        if rows:
            cols = [statistics.median(c) for c in zip(*rows, strict=True)]
            cells = " | ".join(f"{100 * c:.1f}" for c in cols[:-1])
            lines.append(f"| **{name} median** | | | {cells} | {100 * cols[-1]:.1f} | |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    if argv is None:  # called by `python -m bench`
        print("skipped: run `make bench-vs-trl` (installs TRL in its own venv, minutes per seed)")
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "arith-cpu-outcome-only.yaml"))
    ap.add_argument("--trl-python", default=str(REPO / ".venv-trl" / "bin" / "python"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--token-budget", type=int, default=450_000)
    ap.add_argument("--save-every", type=int, default=50_000)
    ap.add_argument("--out", default=str(REPO / "runs" / "bench-vs-trl"))
    ap.add_argument("--skip-trl", action="store_true", help="only our side (no TRL venv needed)")
    args = ap.parse_args(argv)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    config_path = Path(args.config).resolve()
    results: dict[str, Any] = {}
    for seed in [int(s) for s in args.seeds.split(",")]:
        root = out / f"s{seed}"
        root.mkdir(parents=True, exist_ok=True)
        config, sft = _prepare(config_path, seed, root)
        sft_acc = _score(config, sft, root / "eval-sft")
        print(f"seed {seed}: SFT start {sft_acc:.3f}", flush=True)
        res: dict[str, Any] = {"sft": sft_acc}
        res["ours"] = _ours(config_path, seed, sft, root, args.token_budget)
        if not args.skip_trl:
            res["trl"] = _trl(
                config, args.trl_python, sft, root, seed, args.token_budget, args.save_every
            )
        results[str(seed)] = res
        (out / "results.json").write_text(json.dumps(results, indent=2))
    if args.skip_trl:
        for res in results.values():
            res["trl"] = {"curve": [(0, float("nan"))], "tokens": 0, "cpu_s": float("nan")}
    table = _table(results)
    (out / "report.md").write_text(table + "\n")
    print(table)


if __name__ == "__main__":
    main(sys.argv[1:])
