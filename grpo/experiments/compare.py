"""``grpo compare``: advantage estimators side by side at the same generated-token budget.

Comparing algorithms by learner step mistakes a change of sampling budget (dynamic sampling's
extra groups, a larger G) for an algorithmic gain; this compares them at the same number of
generated tokens, and reports the wall clock and CPU seconds each arm took for them.

``run_comparison`` (the whole job):

1. prepares the starting policy once (``prepare_policy``: a fresh tiny model and the SFT warm
   start of the config, or ``model.path``) into ``<out>/start``;
2. runs every (seed, arm) pair as a ``grpo run`` (``run_local``) into ``<out>/<arm>-seed<s>``,
   each from that same folder (``model.path`` set, SFT off), with ``learner.algo.estimator``
   set to the arm, the run seed (prompt order, sampling, trainer) set to the seed, and
   ``budget.generated_tokens`` set to the budget (``budget.steps`` unbounded, so the token
   budget binds; ``budget.wall_clock_s`` is a safety bound). Seeds are the outer loop so the
   arms of one seed run back to back (drift of a shared machine spreads over the arms);
3. measures each run: its ``summary.json`` (generated tokens as counted by the assembler: every
   rollout it received, the groups dynamic sampling rejected included, so that generation
   counts against the arm that caused it), ``eval.jsonl`` (held-out greedy accuracy against
   generated tokens and training seconds), ``metrics.jsonl`` (clip fractions, response length
   by advantage sign, per-step means), CPU seconds of every process of the run (this process
   and its waited-for children, ``getrusage``), and KL to the start
   (``grpo.experiments.policy_kl.kl_to_start`` on the first ``kl_prompts`` held-out
   prompts);
4. checks the budget was equal (``budget_check``) and writes ``compare.json``, ``compare.md``
   and ``compare.png`` (``write_report``).

Definitions used by the report:

- one job's worst case W = G·L_max·(1 + regeneration rounds): the most tokens one prompt job
  the driver feeds can cost (its group, and the groups dynamic sampling may regenerate from
  it); the driver never feeds a job whose worst case could pass what is left of the budget
  (``grpo.services.driver.token_budget``), so a run stops at most W below the budget, never
  above it;
- the budget is equal when every run stopped on ``generated_tokens`` with generated tokens
  in (budget − W, budget];
- wasted tokens = generated − kept (tokens of groups that were never trained on: rejected by
  dynamic sampling, still open at the stop, or trained after it);
- accuracy at equal tokens = the final held-out accuracy (every run ends at the budget);
  accuracy at equal time = each run's accuracy curve (linear between evaluations) at T*, the
  shortest training time of all runs; training time (``grpo_wall_clock_s``) counts from the
  first fed prompt and includes the in-run evaluations, which every arm does at the same
  steps;
- median and range (min, max) are over the seeds of an arm.
"""

from __future__ import annotations

import json
import math
import resource
import shutil
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import ValidationError

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner import metric_names as mn
from grpo.learner.choices import CriticEstimatorName, GroupEstimatorName
from grpo.services.driver.summary import RunSummary
from grpo.services.driver.token_budget import TokenGate
from grpo.services.runtime.config import error_text
from grpo.services.settings.run import RunConfig

__all__ = [
    "ESTIMATORS",
    "REPORT_FILES",
    "ArmResult",
    "BudgetCheck",
    "arm_config",
    "budget_check",
    "check_request",
    "curve_band",
    "interpolate",
    "job_tokens",
    "parse_estimators",
    "run_comparison",
    "summarize",
    "write_report",
]

ESTIMATORS: tuple[str, ...] = get_args(GroupEstimatorName) + get_args(CriticEstimatorName)
"""Every ``learner.algo.estimator`` an arm may use (grpo, rloo, dr_grpo, gae)."""
REPORT_FILES = ("compare.json", "compare.md", "compare.png")
"""What ``write_report`` writes into the comparison folder."""
UNBOUNDED_STEPS = 1_000_000
"""``budget.steps`` of an arm: never the binding budget."""
ARM_FILE = "compare_arm.json"
"""Per-run measurements in its run folder (``ArmResult``); reused by ``resume``."""


@dataclass
class ArmResult:
    """What one run (one arm, one seed) measured.

    Attributes:
        estimator, seed: the arm and the run seed; run_dir: its ``grpo run`` folder.
        stop_reason: why training stopped (``RunDriver.train``).
        steps: learner steps; generated_tokens, kept_tokens: the assembler's counts.
        groups: accepted / rejected_all_correct / rejected_all_wrong / rejected_too_few_valid.
        start_accuracy, final_accuracy: held-out greedy accuracy before and after (in [0, 1]).
        curve: evaluations as ``{"generated_tokens", "train_s", "accuracy"}`` in order.
        train_s: training seconds (``grpo_wall_clock_s``); run_s: the whole run's seconds
            (services start to stop); cpu_s: CPU seconds (user + system) of every process.
        job_tokens: one job's worst case W in tokens (module docstring).
        means: per-step means over ``metrics.jsonl`` (clip fractions, lengths by advantage
            sign, entropy, the critic's explained variance, KL to π_ref when β > 0).
        kl_to_start: ``KlToStart`` as a dict (nats/token and nats/response).
        start_model: the starting policy folder.
    """

    estimator: str
    seed: int
    run_dir: str
    stop_reason: str
    steps: int
    generated_tokens: int
    kept_tokens: int
    groups: dict[str, int]
    start_accuracy: float
    final_accuracy: float
    curve: list[dict[str, float]]
    train_s: float
    run_s: float
    cpu_s: float
    job_tokens: float
    means: dict[str, float] = field(default_factory=dict)
    kl_to_start: dict[str, float] = field(default_factory=dict)
    start_model: str = ""

    @property
    def wasted_tokens(self) -> int:
        """Generated tokens that were never in a kept group (generated − kept)."""
        return self.generated_tokens - self.kept_tokens


@dataclass(frozen=True)
class BudgetCheck:
    """``budget_check``'s answer.

    Attributes:
        equal: every run stopped on the token budget, at most one job's worst case below it
            and never above it.
        budget: the generated-token budget of every run.
        max_deviation: largest |generated − budget| over the runs (tokens).
        problems: one line per run that broke the rule (empty when ``equal``).
    """

    equal: bool
    budget: int
    max_deviation: int
    problems: list[str]


_MEANS = {
    "clip_frac_low": mn.LOSS_CLIP_FRAC_LOW,
    "clip_frac_high": mn.LOSS_CLIP_FRAC_HIGH,
    "len_pos_adv": mn.LEN_MEAN_POS_ADV,
    "len_neg_adv": mn.LEN_MEAN_NEG_ADV,
    "entropy": mn.ENTROPY_MEAN,
    "kl_ref": mn.KL_REF_MEAN,
    "critic_explained_variance": "critic/explained_variance",
}
"""``ArmResult.means`` key -> the ``metrics.jsonl`` name averaged over steps."""


def parse_estimators(text: str) -> list[str]:
    """``"grpo,rloo"`` -> ``["grpo", "rloo"]``.

    Raises:
        InvalidArgumentError: an unknown or repeated name, or fewer than one.
    """
    names = [n.strip() for n in text.split(",") if n.strip()]
    if not names:
        raise InvalidArgumentError("--estimators needs at least one name, e.g. grpo,rloo")
    unknown = [n for n in names if n not in ESTIMATORS]
    if unknown:
        raise InvalidArgumentError(
            f"unknown estimator(s) {', '.join(unknown)}; valid: {', '.join(ESTIMATORS)}"
        )
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"--estimators repeats a name: {text!r}")
    return names


def arm_config(
    base: RunConfig,
    *,
    start_model: Path | str,
    estimator: str,
    seed: int,
    budget_tokens: int,
    wall_clock_s: float | None = None,
) -> RunConfig:
    """The RunConfig of one run of the comparison (module docstring, step 2).

    Args:
        base: the comparison's config; start_model: the prepared starting policy folder;
        estimator: the arm; seed: the run seed (also the trainer's); budget_tokens: > 0;
        wall_clock_s: safety bound of the training phase (default ``base.budget.wall_clock_s``).

    Raises:
        InvalidArgumentError: unknown estimator, budget_tokens < 1, or a config the new
            values make invalid (the message names the field).
    """
    if estimator not in ESTIMATORS:
        raise InvalidArgumentError(
            f"unknown estimator {estimator!r}; valid: {', '.join(ESTIMATORS)}"
        )
    if budget_tokens < 1:
        raise InvalidArgumentError(f"the token budget must be >= 1, got {budget_tokens}")
    data = base.model_dump(mode="json")
    data["name"] = f"{base.name}-{estimator}-seed{seed}"
    data["seed"] = seed
    data["model"]["path"] = str(start_model)
    data["model"]["sft"]["enabled"] = False
    data["learner"]["algo"]["estimator"] = estimator
    data["learner"]["trainer"]["seed"] = seed
    budget = data["budget"]
    budget["generated_tokens"] = budget_tokens
    budget["steps"] = UNBOUNDED_STEPS
    if wall_clock_s is not None:
        budget["wall_clock_s"] = wall_clock_s
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(error_text(RunConfig, e) for e in exc.errors())
        raise InvalidArgumentError(f"arm {estimator} seed {seed}: {problems}") from None


def job_tokens(config: RunConfig) -> float:
    """One job's worst case W = G·L_max·(1 + regeneration rounds) of ``config`` (tokens)."""
    return float(TokenGate.of(config).job_worst_case)


def budget_check(runs: Sequence[ArmResult], budget: int) -> BudgetCheck:
    """Was every run given the same generated-token budget? (module docstring).

    Raises:
        InvalidArgumentError: no runs.
    """
    if not runs:
        raise InvalidArgumentError("budget_check needs at least one run")
    problems = []
    for r in runs:
        deviation = abs(r.generated_tokens - budget)
        if r.stop_reason != "generated_tokens":
            problems.append(
                f"{r.estimator} seed {r.seed} stopped on {r.stop_reason!r} at "
                f"{r.generated_tokens} generated tokens, not on the token budget"
            )
        elif r.generated_tokens > budget:
            problems.append(
                f"{r.estimator} seed {r.seed}: {r.generated_tokens} generated tokens, "
                f"{deviation} above the budget"
            )
        elif deviation >= r.job_tokens:
            problems.append(
                f"{r.estimator} seed {r.seed}: {r.generated_tokens} generated tokens, "
                f"{deviation} below the budget (one job's worst case is {r.job_tokens:.0f})"
            )
    return BudgetCheck(
        equal=not problems,
        budget=budget,
        max_deviation=max(abs(r.generated_tokens - budget) for r in runs),
        problems=problems,
    )


def interpolate(curve: Sequence[dict[str, float]], x_key: str, x: float) -> float:
    """A run's accuracy at ``x`` on axis ``x_key`` ("generated_tokens" or "train_s"), linear
    between evaluations; nan beyond the last one or for an empty curve."""
    import numpy as np

    pts = [(p[x_key], p["accuracy"]) for p in curve if math.isfinite(p["accuracy"])]
    if not pts or x > pts[-1][0] + 1e-9:
        return float("nan")
    xs, ys = zip(*pts, strict=True)
    return float(np.interp(x, xs, ys))


def curve_band(
    curves: Sequence[Sequence[dict[str, float]]], x_key: str, points: int = 50
) -> dict[str, list[float]]:
    """Median and range over seeds of accuracy curves, on a common grid.

    Args:
        curves: one curve per seed (``ArmResult.curve``); x_key: the axis.
        points: grid points from 0 to the shortest curve's last x.

    Returns:
        ``{"x": [...], "median": [...], "low": [...], "high": [...]}`` (lists of ``points``
        floats; empty lists when a curve is empty).
    """
    import numpy as np

    ends = [c[-1][x_key] for c in curves if c]
    if not ends or len(ends) != len(curves):
        return {"x": [], "median": [], "low": [], "high": []}
    grid = np.linspace(0.0, min(ends), points)
    values = np.array([[interpolate(c, x_key, float(x)) for x in grid] for c in curves])
    return {
        "x": grid.tolist(),
        "median": np.median(values, axis=0).tolist(),
        "low": values.min(axis=0).tolist(),
        "high": values.max(axis=0).tolist(),
    }


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def _mean(rows: Sequence[dict[str, Any]], name: str) -> float:
    values = [
        float(r[name])
        for r in rows
        if isinstance(r.get(name), int | float) and math.isfinite(float(r[name]))
    ]
    return statistics.fmean(values) if values else float("nan")


def measure_run(
    config: RunConfig, run_dir: Path, *, estimator: str, seed: int, cpu_s: float
) -> ArmResult:
    """Read a finished run's folder into an ``ArmResult`` (no KL yet).

    Raises:
        FailedPreconditionError: the run wrote no ``summary.json``.
    """
    path = run_dir / "summary.json"
    if not path.is_file():
        raise FailedPreconditionError(f"run {run_dir} wrote no summary.json")
    summary = RunSummary.read(path)
    metrics = [r for r in _read_jsonl(run_dir / "metrics.jsonl") if isinstance(r.get("step"), int)]
    order = {"sft": 0, "final": 2}
    evals = sorted(
        _read_jsonl(run_dir / "eval.jsonl"),
        key=lambda r: (order.get(r["label"], 1), r.get("step", 0)),
    )
    curve = [
        {
            "generated_tokens": 0.0 if e["label"] == "sft" else float(e["generated_tokens"]),
            "train_s": 0.0 if e["label"] == "sft" else float(e["wall_clock_s"]),
            "accuracy": float(e["accuracy"]),
        }
        for e in evals
    ]
    steps = summary.steps
    acc = summary.accounting
    generated = acc.generated_tokens
    rejected = acc.groups.rejected_by_reason
    return ArmResult(
        estimator=estimator,
        seed=seed,
        run_dir=str(run_dir),
        stop_reason=summary.stop_reason,
        steps=steps,
        generated_tokens=generated,
        kept_tokens=acc.kept_tokens,
        groups={
            "accepted": acc.groups.accepted,
            **{
                f"rejected_{k}": int(rejected.get(k, 0))
                for k in ("all_correct", "all_wrong", "too_few_valid")
            },
        },
        start_accuracy=summary.sft_accuracy,
        final_accuracy=summary.final_accuracy,
        curve=curve,
        train_s=summary.grpo_wall_clock_s,
        run_s=summary.wall_clock_s,
        cpu_s=round(cpu_s, 1),
        job_tokens=job_tokens(config),
        means={k: _mean(metrics, name) for k, name in _MEANS.items()},
        start_model=str(config.model.path),
    )


def _cpu_seconds() -> float:
    """User + system CPU seconds of this process and its waited-for descendants so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def check_request(
    config: RunConfig,
    *,
    estimators: Sequence[str],
    seeds: int,
    budget_tokens: int,
    wall_clock_s: float | None = None,
    kl_prompts: int = 64,
) -> None:
    """Check a comparison's arguments and every arm's config, before SFT or any run.

    Raises:
        InvalidArgumentError: no estimators, seeds < 1, budget_tokens < 1, kl_prompts < 0, or
            a value an arm makes invalid (the message names it).
    """
    if not estimators:
        raise InvalidArgumentError("a comparison needs at least one estimator")
    if seeds < 1:
        raise InvalidArgumentError(f"--seeds must be >= 1, got {seeds}")
    if budget_tokens < 1:
        raise InvalidArgumentError(f"--budget-tokens must be >= 1, got {budget_tokens}")
    if kl_prompts < 0:
        raise InvalidArgumentError(f"--kl-prompts must be >= 0, got {kl_prompts}")
    for est in estimators:
        arm_config(
            config, start_model="start", estimator=est, seed=config.seed,
            budget_tokens=budget_tokens, wall_clock_s=wall_clock_s,
        )  # fmt: skip


def run_comparison(
    config: RunConfig,
    out_dir: Path,
    *,
    estimators: Sequence[str],
    seeds: int,
    budget_tokens: int,
    wall_clock_s: float | None = None,
    kl_prompts: int = 64,
    resume: bool = False,
    log_fn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The whole comparison (module docstring); returns ``compare.json``'s content.

    Args:
        config: the job (its SFT, data, generation, learner and eval settings are every
            arm's); out_dir: the comparison folder (created).
        estimators: arms (``ESTIMATORS`` names); seeds: runs per arm (seeds config.seed,
            config.seed + 1, ...); budget_tokens: generated tokens per run (> 0).
        wall_clock_s: safety bound of each run's training (default the config's).
        kl_prompts: held-out prompts of the KL-to-start measurement (0 = skip it).
        resume: reuse the starting policy and every run already measured in ``out_dir``.
        log_fn: progress lines.

    Raises:
        InvalidArgumentError: no estimators, seeds < 1, budget_tokens < 1, a bad arm config.
        GrpoError: a run failed (its folder has the summary and logs).
        KeyboardInterrupt: interrupted; the report of the runs finished so far is written.
    """
    from grpo.services.tasks.run_tasks import load_run_tasks

    say = log_fn or (lambda line: None)
    check_request(
        config,
        estimators=estimators,
        seeds=seeds,
        budget_tokens=budget_tokens,
        wall_clock_s=wall_clock_s,
        kl_prompts=kl_prompts,
    )
    out_dir = out_dir.resolve()
    started = time.time()
    tasks = load_run_tasks(config)
    start_model = _starting_policy(config, out_dir / "start", tasks, resume=resume, say=say)
    plan = [
        (est, config.seed + i, arm_config(
            config, start_model=start_model, estimator=est, seed=config.seed + i,
            budget_tokens=budget_tokens, wall_clock_s=wall_clock_s,
        ))
        for i in range(seeds)
        for est in estimators
    ]  # fmt: skip
    kl_set = [t.prompt for t in tasks.heldout[:kl_prompts]]
    runs: list[ArmResult] = []
    interrupted = False
    try:
        for n, (est, seed, cfg) in enumerate(plan, start=1):
            run_dir = out_dir / f"{est}-seed{seed}"
            earlier = _measured_arm(run_dir, budget_tokens) if resume else None
            if earlier is not None:
                runs.append(earlier)
                say(f"[{n}/{len(plan)}] {est} seed {seed}: measured earlier")
                continue
            if resume and (run_dir / "config.yaml").is_file():
                # an arm cut short: run again from the start (a new run refuses a folder
                # that holds one; its checkpoints would leak into the new arm)
                say(f"[{n}/{len(plan)}] {est} seed {seed}: unfinished earlier, run again")
                shutil.rmtree(run_dir)
            say(f"[{n}/{len(plan)}] {est} seed {seed}: {budget_tokens} generated tokens")
            result = _run_arm(cfg, run_dir, est, seed, start_model, kl_set, say)
            if result is None:
                interrupted = True
                break
            runs.append(result)
    except KeyboardInterrupt:
        interrupted = True
    report = summarize(runs, budget_tokens, estimators=estimators, seeds=seeds)
    report["config"] = config.name
    report["start_model"] = str(start_model)
    report["wall_clock_s"] = round(time.time() - started, 1)
    report["interrupted"] = interrupted
    if runs:
        write_report(report, out_dir)
    if interrupted:
        raise KeyboardInterrupt("comparison interrupted")
    return report


def _starting_policy(
    config: RunConfig, start_dir: Path, tasks: Any, *, resume: bool, say: Callable[[str], None]
) -> Path | str:
    """Every arm's starting policy: the one ``start_dir/start.json`` names when resuming, else
    the run's policy set-up (fresh model + SFT) written there, with its CPU seconds."""
    from grpo.local.policy import prepare_policy
    from grpo.local.run import write_run_config

    start_file = start_dir / "start.json"
    if resume and start_file.is_file():
        start_model: Path | str = json.loads(start_file.read_text())["model"]
        say(f"reusing the starting policy {start_model}")
        return start_model
    write_run_config(config, start_dir)
    cpu0 = _cpu_seconds()
    start_model = prepare_policy(config, start_dir, tasks, say)
    start_file.write_text(
        json.dumps({"model": str(start_model), "cpu_s": round(_cpu_seconds() - cpu0, 1)}) + "\n"
    )
    return start_model


def _measured_arm(run_dir: Path, budget_tokens: int) -> ArmResult | None:
    """The arm measured earlier in ``run_dir`` (``ARM_FILE``), or None when it was not.

    Raises:
        FailedPreconditionError: it ran with another generated-token budget, or was measured
            before the worst-case token gate.
    """
    arm_file = run_dir / ARM_FILE
    if not arm_file.is_file():
        return None
    earlier = yaml.safe_load((run_dir / "config.yaml").read_text())
    if earlier["budget"]["generated_tokens"] != budget_tokens:
        raise FailedPreconditionError(
            f"cannot resume: {run_dir} ran with a budget of "
            f"{earlier['budget']['generated_tokens']} tokens, not {budget_tokens}"
        )
    measured = json.loads(arm_file.read_text())
    if "job_tokens" not in measured:  # before the worst-case token gate (2026-12-05)
        raise FailedPreconditionError(
            f"cannot resume: {run_dir} was measured by an older grpo compare, whose driver "
            "could feed past the token budget; start again in a new --out folder"
        )
    return ArmResult(**measured)


def _run_arm(
    cfg: RunConfig,
    run_dir: Path,
    est: str,
    seed: int,
    start_model: Path | str,
    kl_set: list[str],
    say: Callable[[str], None],
) -> ArmResult | None:
    """Train one arm with ``grpo run``'s path, measure it (and its KL to the start on
    ``kl_set``), write ``ARM_FILE``; None when the run was interrupted.

    Raises:
        GrpoError: the run failed (its folder has the summary and logs).
    """
    from grpo.experiments.policy_kl import kl_to_start
    from grpo.local.run import run_local

    cpu0 = _cpu_seconds()
    summary = run_local(cfg, run_dir, log_fn=_prefixed(say, f"  {est}: "))
    cpu_s = _cpu_seconds() - cpu0
    if summary.stop_reason == "interrupted":
        return None
    result = measure_run(cfg, run_dir, estimator=est, seed=seed, cpu_s=cpu_s)
    final = _final_policy(run_dir)
    if kl_set and final is not None:
        result.kl_to_start = asdict(
            kl_to_start(
                final,
                start_model,
                kl_set,
                temperature=cfg.generation.temperature,
                max_new_tokens=cfg.generation.max_new_tokens,
                seed=seed + 1,
            )
        )
    (run_dir / ARM_FILE).write_text(json.dumps(asdict(result), indent=2) + "\n")
    say(
        f"  {est} seed {seed}: accuracy {result.start_accuracy:.3f} -> "
        f"{result.final_accuracy:.3f}, {result.generated_tokens} tokens, "
        f"{result.steps} steps, {result.train_s:.0f} s, {result.cpu_s:.0f} CPU s"
    )
    return result


def _prefixed(say: Callable[[str], None], prefix: str) -> Callable[[str], None]:
    """``say`` with every line prefixed."""

    def log_line(line: str) -> None:
        say(prefix + line)

    return log_line


def _final_policy(run_dir: Path) -> Path | None:
    """The policy folder the run's final evaluation used (its ``eval.jsonl`` row)."""
    for row in _read_jsonl(run_dir / "eval.jsonl"):
        if row.get("label") == "final" and row.get("model_dir"):
            return Path(row["model_dir"])
    return None


def _stats(values: Sequence[float]) -> dict[str, float]:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return {"median": float("nan"), "min": float("nan"), "max": float("nan")}
    return {"median": statistics.median(finite), "min": min(finite), "max": max(finite)}


def summarize(
    runs: Sequence[ArmResult],
    budget_tokens: int,
    *,
    estimators: Sequence[str],
    seeds: int,
) -> dict[str, Any]:
    """The comparison's table as data: per arm the median and range over seeds of every
    measurement, the budget check, T*, the best arm at equal tokens and at equal time.

    Raises:
        InvalidArgumentError: no runs.
    """
    if not runs:
        raise InvalidArgumentError("nothing to summarize: no run finished")
    check = budget_check(runs, budget_tokens)
    t_star = (
        min(r.curve[-1]["train_s"] for r in runs if r.curve)
        if any(r.curve for r in runs)
        else float("nan")
    )
    arms: dict[str, Any] = {}
    for est in estimators:
        mine = [r for r in runs if r.estimator == est]
        if not mine:
            continue

        def s(fn: Callable[[ArmResult], float], mine: list[ArmResult] = mine) -> dict[str, float]:
            return _stats([float(fn(r)) for r in mine])

        arms[est] = {
            "seeds": [r.seed for r in mine],
            "final_accuracy": s(lambda r: r.final_accuracy),
            "accuracy_at_equal_time": s(lambda r: interpolate(r.curve, "train_s", t_star)),
            "gain_points": s(lambda r: 100 * (r.final_accuracy - r.start_accuracy)),
            "generated_tokens": s(lambda r: r.generated_tokens),
            "kept_tokens": s(lambda r: r.kept_tokens),
            "wasted_tokens": s(lambda r: r.wasted_tokens),
            "wasted_share": s(lambda r: r.wasted_tokens / max(r.generated_tokens, 1)),
            "steps": s(lambda r: r.steps),
            "train_s": s(lambda r: r.train_s),
            "run_s": s(lambda r: r.run_s),
            "cpu_s": s(lambda r: r.cpu_s),
            "tokens_per_train_s": s(lambda r: r.generated_tokens / max(r.train_s, 1e-9)),
            **{f"groups_{k}": _stats([r.groups[k] for r in mine]) for k in mine[0].groups},
            **{k: _stats([r.means.get(k, math.nan) for r in mine]) for k in _MEANS},
            "kl_to_start_per_token": s(lambda r: r.kl_to_start.get("kl_per_token", float("nan"))),
            "accuracy_vs_tokens": curve_band([r.curve for r in mine], "generated_tokens"),
            "accuracy_vs_train_s": curve_band([r.curve for r in mine], "train_s"),
        }
    starts = {round(r.start_accuracy, 6) for r in runs}
    return {
        "budget_tokens": budget_tokens,
        "seeds_requested": seeds,
        "budget_check": asdict(check),
        "same_start_accuracy": len(starts) == 1,
        "start_accuracy": runs[0].start_accuracy,
        "equal_time_s": t_star,
        "best_at_equal_tokens": _best(arms, "final_accuracy"),
        "best_at_equal_time": _best(arms, "accuracy_at_equal_time"),
        "arms": arms,
        "runs": [asdict(r) for r in runs],
    }


def _best(arms: dict[str, Any], key: str) -> dict[str, Any]:
    """The arm with the highest median ``key`` and its lead over the runner-up (points)."""
    ranked = sorted(
        ((a[key]["median"], est) for est, a in arms.items() if math.isfinite(a[key]["median"])),
        reverse=True,
    )
    if not ranked:
        return {"arm": None, "accuracy": float("nan"), "lead_points": float("nan"), "tied": []}
    lead = 100 * (ranked[0][0] - ranked[1][0]) if len(ranked) > 1 else float("nan")
    return {
        "arm": ranked[0][1],
        "accuracy": ranked[0][0],
        "runner_up": ranked[1][1] if len(ranked) > 1 else None,
        "lead_points": lead,
        "tied": sorted(est for acc, est in ranked if acc == ranked[0][0]),
    }


def _fmt(st: dict[str, float], spec: str = ".3f", scale: float = 1.0) -> str:
    if not math.isfinite(st["median"]):
        return "–"
    med, lo, hi = (format(scale * st[k], spec) for k in ("median", "min", "max"))
    return med if lo == hi else f"{med} [{lo}, {hi}]"


def markdown_table(report: dict[str, Any]) -> str:
    """``compare.md``: the table (median [min, max] over seeds), the budget check, the
    winners at equal tokens and at equal time."""
    check = report["budget_check"]
    lines = [
        f"# grpo compare: {report.get('config', '')}",
        "",
        f"Same start: `{report.get('start_model', '')}` (held-out accuracy "
        f"{report['start_accuracy']:.3f}; identical in every run: "
        f"{'yes' if report['same_start_accuracy'] else 'NO'}). "
        f"Budget: {report['budget_tokens']} generated tokens per run (every rollout the "
        "assembler received, rejected groups included).",
        "",
        "**Budget equal: "
        + (
            f"yes** (every run stopped on the token budget, at most {check['max_deviation']} "
            "tokens below it, within one job's worst case, never above)."
            if check["equal"]
            else "NO**: " + "; ".join(check["problems"])
        ),
        "",
        "| arm | seeds | final acc (= at equal tokens) | gain (points) | acc at equal time "
        f"({report['equal_time_s']:.0f} s) | steps | train s | CPU s | generated tok | "
        "wasted tok (share) | groups kept / rej all-✓ / rej all-✗ / few | len A>0 / A<0 | "
        "KL to start (nats/tok) | clip low / high |",
        "|" + "---|" * 14,
    ]
    for est, a in report["arms"].items():
        groups = " / ".join(
            _fmt(a[f"groups_{k}"], ".0f")
            for k in (
                "accepted",
                "rejected_all_correct",
                "rejected_all_wrong",
                "rejected_too_few_valid",
            )
        )
        lines.append(
            f"| {est} | {len(a['seeds'])} | {_fmt(a['final_accuracy'])} | "
            f"{_fmt(a['gain_points'], '+.1f')} | {_fmt(a['accuracy_at_equal_time'])} | "
            f"{_fmt(a['steps'], '.0f')} | {_fmt(a['train_s'], '.0f')} | "
            f"{_fmt(a['cpu_s'], '.0f')} | "
            f"{_fmt(a['generated_tokens'], '.0f')} | {_fmt(a['wasted_tokens'], '.0f')} "
            f"({_fmt(a['wasted_share'], '.0%')}) | {groups} | "
            f"{_fmt(a['len_pos_adv'], '.1f')} / {_fmt(a['len_neg_adv'], '.1f')} | "
            f"{_fmt(a['kl_to_start_per_token'], '.4f')} | "
            f"{_fmt(a['clip_frac_low'], '.4f')} / {_fmt(a['clip_frac_high'], '.4f')} |"
        )
    for key, what in (
        ("best_at_equal_tokens", "equal tokens"),
        ("best_at_equal_time", "equal time"),
    ):
        best = report[key]
        if best["arm"] is None:
            continue
        lead = (
            f", {best['lead_points']:+.1f} points over {best['runner_up']}"
            if best.get("runner_up")
            else ""
        )
        lines.append("")
        if len(best["tied"]) > 1:
            lines.append(
                f"Best at {what}: a tie of {', '.join(best['tied'])} (median accuracy "
                f"{best['accuracy']:.3f})."
            )
        else:
            lines.append(
                f"Best at {what}: **{best['arm']}** (median accuracy {best['accuracy']:.3f}{lead})."
            )
    lines += [
        "",
        "Medians over seeds, [min, max] when they differ. Training seconds count from the first "
        "fed prompt and include the in-run evaluations; accuracy at equal time is each run's "
        "curve (linear between evaluations) at the shortest training time of all runs. Wasted "
        "tokens = generated − kept. KL to the start: exact per-position KL(π_final ‖ π_start) "
        "on responses sampled from the final policy. Clip fractions and lengths are means "
        "over learner steps.",
    ]
    if report.get("interrupted"):
        lines += ["", "**Interrupted**: only the runs above finished."]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> Path:
    """``compare.png``: held-out accuracy against generated tokens and against training
    seconds, per arm the median over seeds (line, linear between evaluations), the range
    (band) and every run's evaluations (dots)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    axes_keys = (
        ("accuracy_vs_tokens", "generated_tokens", "generated tokens"),
        ("accuracy_vs_train_s", "train_s", "training seconds"),
    )
    for ax, (key, x_key, label) in zip(axes, axes_keys, strict=True):
        for est, arm in report["arms"].items():
            band = arm[key]
            if not band["x"]:
                continue
            n = len(arm["seeds"])
            (line,) = ax.plot(band["x"], band["median"], label=f"{est} ({n} seed{'s' * (n > 1)})")
            color = line.get_color()
            if n > 1:
                ax.fill_between(band["x"], band["low"], band["high"], color=color, alpha=0.2)
            for run in report["runs"]:  # the measured evaluations
                if run["estimator"] == est:
                    xs = [p[x_key] for p in run["curve"]]
                    ax.plot(xs, [p["accuracy"] for p in run["curve"]], ".", color=color)
        ax.set(xlabel=label, ylabel="held-out greedy accuracy")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title(f"at equal generated tokens (budget {report['budget_tokens']})")
    axes[1].set_title("against wall clock (shared machine)")
    fig.suptitle(f"grpo compare: {report.get('config', '')} (median and range over seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def write_report(report: dict[str, Any], out_dir: Path) -> list[Path]:
    """Write ``REPORT_FILES`` into ``out_dir``; returns their paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = [out_dir / name for name in REPORT_FILES]
    paths[0].write_text(json.dumps(_finite(report), indent=2, allow_nan=False) + "\n")
    paths[1].write_text(markdown_table(report))
    plot(report, paths[2])
    return paths


def _finite(tree: Any) -> Any:
    """``tree`` with every non-finite float replaced by None (strict JSON)."""
    if isinstance(tree, float):
        return tree if math.isfinite(tree) else None
    if isinstance(tree, dict):
        return {k: _finite(v) for k, v in tree.items()}
    if isinstance(tree, list | tuple):
        return [_finite(v) for v in tree]
    return tree
