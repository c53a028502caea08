"""Side by side with TRL's GRPOTrainer: held-out accuracy against generated tokens and CPU
seconds, from the same SFT checkpoint, prompts and held-out set, per seed and as the median.

``make bench-vs-trl`` (= ``python -m bench.bench_vs_trl --trl-python .venv-trl/bin/python``)
builds TRL's own venv on first use (CPU torch 2.13.0 first, then trl; never a dependency of the
package) and runs, for each seed, one arm after the other (never two at the same time):

1. the SFT warm start of ``--config`` at that seed (``prepare_policy``, deterministic per seed)
   into ``<out>/s<seed>/model/sft``: the one starting policy of every arm of that seed;
2. ``ours``: ``grpo run --config`` (the shipped config, process reward included) from that
   checkpoint (SFT off), stopped at ``--token-budget`` generated tokens, held-out evaluations
   every ``eval.every_steps`` learner steps as the run does them;
3. ``ours-outcome``: the same with ``--outcome-config`` (outcome reward only; skipped with
   ``--outcome-config ''``);
4. ``trl``: ``bench/trl_worker.py`` in TRL's venv from the same checkpoint and training prompts,
   with the config's G, completions per learner step, PPO epochs and minibatches, clip, β = 0,
   max new tokens, temperature, AdamW settings, gradient clip and the learner's exact learning
   rate per optimizer step (``grpo.learner.schedule.lr_multiplier``, passed as a table), outcome
   reward; its policy is saved every ``--save-every`` generated tokens and each saved policy is
   scored here by ``heldout_accuracy`` (greedy, the run's own outcome verifier), as ours is.

Generated tokens: completion tokens sampled, EOS included, every group counted (ours: the
assembler's count at the learner step that published the evaluated policy, from
``metrics.jsonl``; TRL: the completion ids its reward function received up to the save).

CPU seconds: user + system of every process of the arm. A sampler polls the process tree
(psutil, every ``POLL_S``) and notes the tree's CPU when each line of the run's
``metrics.jsonl`` / ``eval.jsonl`` appears; the tree's total at the end is checked against
``RUSAGE_CHILDREN`` of this process (exact: every process is reaped). Ours' held-out
evaluations run in the driver process; their CPU (the driver subtree's CPU during each
evaluation's ``eval_s``) is subtracted, since TRL's checkpoints are scored outside its run.
"train CPU s" below is that figure; "all CPU s" includes the evaluations.

Accuracy at a mark (tokens or CPU seconds) is linearly interpolated between the two evaluated
policies around it (None past the last one). Results: ``<out>/results.json`` and Markdown tables
printed and written to ``<out>/report.md``.

``python -m bench`` skips this module (it installs TRL and takes minutes per seed).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import re
import resource
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil

REPO = Path(__file__).resolve().parents[1]
TOKEN_MARKS = (100_000, 200_000, 400_000)
POLL_S = 0.25


def _children_cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def interpolate(points: list[tuple[float, float]], x: float) -> float | None:
    """Linear interpolation of ``(x, y)`` points (sorted by x) at ``x``.

    Returns:
        y at x; None when x lies outside [first x, last x] or there are no points.
    """
    if not points or x < points[0][0] or x > points[-1][0]:
        return None
    for (x0, y0), (x1, y1) in itertools.pairwise(points):
        if x0 <= x <= x1:
            return y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
    return points[-1][1]


class TreeSampler(threading.Thread):
    """CPU seconds (user + system) of a process tree over time, and of the subtree of its
    process whose command line contains ``sub_match``; notes the tree's CPU when new lines
    appear in watched JSONL files.

    ``samples``: ``(monotonic s, tree CPU s, subtree CPU s, 1-min load)``; ``lines[name]``:
    ``(monotonic s, tree CPU s, parsed line)``. An exited process keeps its last sampled CPU.
    """

    def __init__(self, pid: int, watch: dict[str, Path], sub_match: str | None = None) -> None:
        super().__init__(daemon=True)
        self.root = psutil.Process(pid)
        self.watch = watch
        self.sub_match = sub_match
        self.samples: list[tuple[float, float, float, float]] = []
        self.lines: dict[str, list[tuple[float, float, dict[str, Any]]]] = {k: [] for k in watch}
        self._last: dict[tuple[int, float], float] = {}
        self._sub: set[tuple[int, float]] = set()
        self._offsets = dict.fromkeys(watch, 0)
        self._halt = threading.Event()

    def _in_sub(self, p: psutil.Process) -> bool:
        assert self.sub_match is not None
        if self.sub_match in " ".join(p.cmdline()):
            return True
        return any((q.pid, q.create_time()) in self._sub for q in p.parents())

    def _poll(self) -> tuple[float, float]:
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.NoSuchProcess:
            procs = []
        for p in procs:
            try:
                key = (p.pid, p.create_time())
                t = p.cpu_times()
                self._last[key] = t.user + t.system
                if self.sub_match and key not in self._sub and self._in_sub(p):
                    self._sub.add(key)
            except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
                continue
        total = sum(self._last.values())
        sub = sum(v for k, v in self._last.items() if k in self._sub)
        return total, sub

    def _read_lines(self, now: float, total: float) -> None:
        for name, path in self.watch.items():
            if not path.exists():
                continue
            with path.open() as fh:
                fh.seek(self._offsets[name])
                chunk = fh.read()
            complete = chunk[: chunk.rfind("\n") + 1]
            self._offsets[name] += len(complete.encode())
            for line in complete.splitlines():
                if line.strip():
                    self.lines[name].append((now, total, json.loads(line)))

    def run(self) -> None:
        while not self._halt.is_set():
            total, sub = self._poll()
            now = time.monotonic()
            self.samples.append((now, total, sub, os.getloadavg()[0]))
            self._read_lines(now, total)
            self._halt.wait(POLL_S)

    def stop(self) -> None:
        """Stop sampling and read the lines written since the last poll."""
        self._halt.set()
        self.join()
        last = self.samples[-1] if self.samples else (time.monotonic(), 0.0, 0.0, 0.0)
        self._read_lines(last[0], last[1])

    def sub_cpu_at(self, t: float) -> float:
        """Subtree CPU seconds at monotonic time ``t`` (interpolated between samples)."""
        v = interpolate([(s[0], s[2]) for s in self.samples], t)
        if v is None:
            return self.samples[-1][2] if t > self.samples[-1][0] else 0.0
        return v

    def load(self) -> dict[str, float]:
        """1-min load average: mean, min and max over the samples."""
        loads = [s[3] for s in self.samples] or [float("nan")]
        return {"mean": round(statistics.fmean(loads), 2), "min": min(loads), "max": max(loads)}


def _prepare(config_path: Path, seed: int, root: Path) -> tuple[Any, Path]:
    from grpo.local.policy import prepare_policy
    from grpo.services.settings.run import load_run_config
    from grpo.services.tasks.run_tasks import load_run_tasks

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
    from grpo.services.driver.heldout import heldout_accuracy
    from grpo.services.tasks.run_tasks import load_run_tasks

    tasks = load_run_tasks(config)
    report = heldout_accuracy(
        model_dir, tasks.heldout, config=config, task_type=tasks.task_type, out_dir=out
    )
    return float(report.accuracy)


def _ours(
    name: str, config_path: Path, seed: int, sft: Path, root: Path, budget: int
) -> dict[str, Any]:
    run_dir = root / name
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    run_dir.mkdir(parents=True)
    cmd = [
        str(REPO / ".venv" / "bin" / "grpo"), "run", str(config_path),
        "--run-dir", str(run_dir),
        "--set", f"seed={seed}",
        "--set", f"model.path={sft}",
        "--set", "model.sft.enabled=false",
        "--set", f"budget.generated_tokens={budget}",
        "--set", "budget.steps=100000",
        "--set", "budget.wall_clock_s=7200",
    ]  # fmt: skip
    before = _children_cpu_s()
    started = time.monotonic()
    with (root / f"{name}.log").open("w") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(
            proc.pid,
            {"metrics": run_dir / "metrics.jsonl", "eval": run_dir / "eval.jsonl"},
            sub_match="serve driver",
        )
        sampler.start()
        code = proc.wait()
        sampler.stop()
    if code != 0:
        raise SystemExit(f"{name} seed {seed}: grpo run exited {code}; see {root / name}.log")
    exact = _children_cpu_s() - before
    evals = [(t, row) for t, _, row in sampler.lines["eval"]]
    windows = [(t - float(row["eval_s"]), t) for t, row in evals]

    def eval_cpu_before(t: float) -> float:
        return sum(
            sampler.sub_cpu_at(min(t, end)) - sampler.sub_cpu_at(start)
            for start, end in windows
            if start < t
        )

    steps = {int(row["policy_version"]): (t, cpu, row) for t, cpu, row in sampler.lines["metrics"]}
    curve = []
    for t_end, row in evals:
        m = re.search(r"/weights/v(\d+)$", str(row["model_dir"]))
        if m and int(m.group(1)) in steps:
            t, cpu, mrow = steps[int(m.group(1))]
            tokens = int(mrow["generated_tokens"])
        else:  # the starting policy: tokens 0, the CPU of start-up before its evaluation
            t = t_end - float(row["eval_s"])
            cpu = interpolate([(s[0], s[1]) for s in sampler.samples], t) or 0.0
            tokens = 0
        curve.append(
            {
                "tokens": tokens,
                "cpu_s": round(cpu - eval_cpu_before(t), 1),
                "all_cpu_s": round(cpu, 1),
                "accuracy": float(row["accuracy"]),
                "label": row["label"],
            }
        )
    curve.sort(key=lambda p: (p["tokens"], p["cpu_s"]))
    from grpo.services.driver.summary import RunSummary

    summary = RunSummary.read(run_dir / "summary.json")
    metrics = [row for _, _, row in sampler.lines["metrics"]]
    groups = summary.accounting.groups
    opened = groups.accepted + groups.rejected_by_reason.get("all_correct", 0)
    opened += groups.rejected_by_reason.get("all_wrong", 0)
    return {
        "curve": curve,
        "tokens": summary.accounting.generated_tokens,
        "steps": summary.steps,
        "cpu_s_exact": round(exact, 1),
        "cpu_s_sampled": round(sampler.samples[-1][1], 1),
        "eval_cpu_s": round(eval_cpu_before(math.inf), 1),
        "wall_s": round(time.monotonic() - started, 1),
        "load": sampler.load(),
        "zero_variance_share": round(groups.zero_variance / max(opened, 1), 3),
        "staleness_mean": round(
            statistics.fmean(m.get("policy/staleness_mean", 0.0) for m in metrics), 2
        ),
    }


def _trl(
    config: Any, trl_python: str, sft: Path, root: Path, seed: int, budget: int, save_every: int
) -> dict[str, Any]:
    from grpo.learner.schedule import lr_multiplier

    out = root / "trl"
    out.mkdir(parents=True, exist_ok=True)
    trainer = config.learner.trainer
    per_step = config.generation.group_size * config.learner.batch_groups
    if per_step % trainer.minibatches:
        raise SystemExit(f"{per_step} completions per step do not split in {trainer.minibatches}")
    # The learner's factor for every optimizer update TRL can take within the budget (2x slack).
    updates = 2 * trainer.ppo_epochs * trainer.minibatches * (budget // (per_step * 10) + 10)
    factors = [
        lr_multiplier(
            s,
            warmup_steps=trainer.warmup_steps,
            schedule=trainer.schedule,
            total_steps=trainer.total_steps,
            min_lr_ratio=trainer.min_lr_ratio,
        )
        for s in range(updates)
    ]
    (out / "lr_factors.json").write_text(json.dumps(factors))
    algo = config.learner.algo
    cmd = [
        trl_python, str(REPO / "bench" / "trl_worker.py"),
        "--model", str(sft),
        "--train", str(root / "train.jsonl"),
        "--out", str(out),
        "--seed", str(seed),
        "--lr", str(trainer.lr),
        "--lr-factors", str(out / "lr_factors.json"),
        "--adam", str(trainer.adam_beta1), str(trainer.adam_beta2), str(trainer.adam_eps),
        "--weight-decay", str(trainer.weight_decay),
        "--max-grad-norm", str(trainer.max_grad_norm),
        "--epochs", str(trainer.ppo_epochs),
        "--minibatches", str(trainer.minibatches),
        "--clip", str(algo.clip_low), str(algo.clip_high),
        "--group-size", str(config.generation.group_size),
        "--completions-per-step", str(per_step),
        "--max-new-tokens", str(config.generation.max_new_tokens),
        "--temperature", str(config.generation.temperature),
        "--token-budget", str(budget),
        "--save-every", str(save_every),
    ]  # fmt: skip
    env = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PATH": "/usr/bin:/bin",
           "HOME": str(Path.home())}  # fmt: skip
    before = _children_cpu_s()
    started = time.monotonic()
    with (root / "trl.log").open("w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT)
        sampler = TreeSampler(proc.pid, {})
        sampler.start()
        code = proc.wait()
        sampler.stop()
    if code != 0:
        raise SystemExit(f"TRL seed {seed}: trl_worker exited {code}; see {root / 'trl.log'}")
    exact = _children_cpu_s() - before
    wall = time.monotonic() - started
    rows = [json.loads(line) for line in (out / "milestones.jsonl").read_text().splitlines()]
    curve = []
    for row in rows:
        acc = _score(config, Path(row["dir"]), out / "eval" / f"tokens-{row['tokens']}")
        curve.append({"tokens": int(row["tokens"]), "cpu_s": float(row["cpu_s"]), "accuracy": acc})
        print(f"  [s{seed}] TRL at {row['tokens']} tokens: {acc:.3f}", flush=True)
    logs = [json.loads(line) for line in (out / "logs.jsonl").read_text().splitlines()]
    zero = [x["frac_reward_zero_std"] for x in logs if "frac_reward_zero_std" in x]
    return {
        "curve": curve,
        "tokens": curve[-1]["tokens"],
        "cpu_s_exact": round(exact, 1),
        "cpu_s_sampled": round(sampler.samples[-1][1], 1) if sampler.samples else None,
        "wall_s": round(wall, 1),
        "load": sampler.load(),
        "zero_variance_share": round(statistics.fmean(zero), 3) if zero else None,
        "worker": json.loads((out / "worker.json").read_text()),
    }


def _points(arm: dict[str, Any], axis: str) -> list[tuple[float, float]]:
    return sorted((float(p[axis]), float(p["accuracy"])) for p in arm["curve"])


def _fmt(v: float | None) -> str:
    return "—" if v is None or math.isnan(v) else f"{100 * v:.1f}"


def table(results: dict[str, Any], arms: list[str], cpu_marks: list[float]) -> str:
    """Markdown table: one row per seed and arm, then each arm's median over seeds."""
    head = ["arm", "seed", "SFT"] + [f"{m // 1000} k tok" for m in TOKEN_MARKS]
    head += [f"{m:g} CPU s" for m in cpu_marks]
    head += ["final (tokens)", "train CPU s", "all CPU s", "wall s", "load"]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    cols: dict[str, list[list[float]]] = {a: [] for a in arms}
    for seed, res in sorted(results.items()):
        for arm in arms:
            r = res[arm]
            pts = [interpolate(_points(r, "tokens"), m) for m in TOKEN_MARKS]
            pts += [interpolate(_points(r, "cpu_s"), m) for m in cpu_marks]
            last = r["curve"][-1]
            lines.append(
                f"| {arm} | {seed} | {_fmt(res['sft'])} | "
                + " | ".join(_fmt(p) for p in pts)
                + f" | {_fmt(last['accuracy'])} ({r['tokens'] // 1000} k) | {last['cpu_s']:.0f}"
                + f" | {r['cpu_s_exact']:.0f} | {r['wall_s']:.0f} | {r['load']['mean']:.1f} |"
            )
            cols[arm].append([math.nan if p is None else p for p in pts] + [last["accuracy"]])
    for arm, rows in cols.items():
        med = [statistics.median(c) for c in zip(*rows, strict=True)]
        cells = " | ".join(_fmt(c) for c in med[:-1])
        lines.append(f"| **{arm} median** | | | {cells} | {_fmt(med[-1])} | | | | |")
    return "\n".join(lines)


def merge_results(folders: list[Path]) -> tuple[dict[str, Any], list[str]]:
    """The ``results.json`` of several ``--out`` folders as one, and its arm names.

    Seeds and arms come from every folder (seeds or arms run as separate processes); an arm of
    a seed found in several folders is taken from the last one.

    Raises:
        SystemExit: a seed lacks an arm that another seed has (the medians would mix sets).
    """
    merged: dict[str, Any] = {}
    for folder in folders:
        for seed, res in json.loads((folder / "results.json").read_text()).items():
            merged.setdefault(seed, {}).update(res)
    names = list(dict.fromkeys(k for res in merged.values() for k in res if k != "sft"))
    missing = [(s, a) for s, res in sorted(merged.items()) for a in names if a not in res]
    if missing:
        raise SystemExit(f"--merge: (seed, arm) missing: {missing}")
    return merged, names


def main(argv: list[str] | None = None) -> None:
    if argv is None:  # called by `python -m bench`
        print("skipped: run `make bench-vs-trl` (installs TRL in its own venv, minutes per seed)")
        return
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", default=str(REPO / "configs" / "arith-cpu.yaml"))
    ap.add_argument(
        "--outcome-config", default=str(REPO / "configs" / "arith-cpu-outcome-only.yaml")
    )
    ap.add_argument(
        "--arm",
        action="append",
        default=[],
        metavar="NAME=CONFIG",
        help="one more arm of ours: its name and run config (repeatable)",
    )
    ap.add_argument("--trl-python", default=str(REPO / ".venv-trl" / "bin" / "python"))
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--token-budget", type=int, default=410_000)
    ap.add_argument("--save-every", type=int, default=25_000)
    ap.add_argument("--cpu-marks", default="60,120,240", help="CPU seconds, comma-separated")
    ap.add_argument("--out", default=str(REPO / "runs" / "bench-vs-trl"))
    ap.add_argument("--skip-trl", action="store_true", help="only our side (no TRL venv needed)")
    ap.add_argument(
        "--merge",
        nargs="+",
        metavar="DIR",
        help="only build the report from these earlier --out folders' results.json "
        "(seeds or arms run as separate processes; an arm in several: the last folder's)",
    )
    args = ap.parse_args(argv)
    out = Path(args.out)
    cpu_marks = [float(x) for x in args.cpu_marks.split(",") if x]
    if args.merge:
        merged, names = merge_results([Path(f) for f in args.merge])
        report = table(merged, names, cpu_marks)
        out.mkdir(parents=True, exist_ok=True)
        (out / "report.md").write_text(report + "\n")
        print(report)
        return
    out.mkdir(parents=True, exist_ok=True)
    config_path = Path(args.config).resolve()
    ours = {"ours": config_path}
    if args.outcome_config:
        ours["ours-outcome"] = Path(args.outcome_config).resolve()
    for spec in args.arm:
        name, sep, path = spec.partition("=")
        if not sep or not name or name in (*ours, "trl", "sft"):
            raise SystemExit(f"--arm {spec!r}: want NAME=CONFIG with a new name")
        ours[name] = Path(path).resolve()
    arms = [*ours, *([] if args.skip_trl else ["trl"])]
    results: dict[str, Any] = {}
    results_path = out / "results.json"
    for seed in [int(s) for s in args.seeds.split(",")]:
        root = out / f"s{seed}"
        root.mkdir(parents=True, exist_ok=True)
        config, sft = _prepare(config_path, seed, root)
        sft_acc = _score(config, sft, root / "eval-sft")
        print(f"seed {seed}: SFT start {sft_acc:.3f} (load {os.getloadavg()[0]:.1f})", flush=True)
        res: dict[str, Any] = {"sft": sft_acc}
        for name, path in ours.items():
            res[name] = _ours(name, path, seed, sft, root, args.token_budget)
            print(f"  [s{seed}] {name}: {json.dumps(res[name]['curve'][-1])}", flush=True)
        if not args.skip_trl:
            res["trl"] = _trl(
                config, args.trl_python, sft, root, seed, args.token_budget, args.save_every
            )
        results[str(seed)] = res
        results_path.write_text(json.dumps(results, indent=2))
    report = table(results, arms, cpu_marks)
    (out / "report.md").write_text(report + "\n")
    print(report)


if __name__ == "__main__":
    main(sys.argv[1:])
