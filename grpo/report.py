"""Run reports: PNG plots of a run directory's ``metrics.jsonl`` (one JSON object per step).

``render_report(run_dir)`` writes into ``<run_dir>/report/``:

- ``reward_accuracy.png``: mean reward and held-out greedy accuracy vs learner step, vs
  generated tokens and vs wall-clock seconds (three panels). Accuracy comes from
  ``<run_dir>/eval.jsonl`` (rows with ``step`` and ``accuracy``, written by ``grpo run``);
  an evaluation at step s is placed at the generated
  tokens and learner wall-clock of step s (step 0, the SFT start, at 0);
- ``group_outcomes.png``: shares of all-correct, all-wrong and mixed groups in each trained
  batch; (when the run has an assembler) the cumulative shares of every closed group that was
  accepted or rejected, by reason: all correct, all wrong, too few valid rewards, too many
  undecided members (``assembler/groups_*`` counters, ``metric_names.ASSEMBLER_GROUP_OUTCOMES``);
  and the members recorded without a valid reward so far, with those whose verifier answered
  UNDECIDED among them (``assembler/rewards_missing``, ``assembler/rewards_undecided``);
- ``clip_kl_entropy.png``: low/high clip fractions, KL to the reference (or the π_old/μ
  mismatch when no reference is used) and token entropy per step;
- ``length_by_advantage.png``: mean response length of rollouts with positive vs negative
  advantage per step;
- ``straggler_wait.png``: straggler wait per step (mean and max over the step's groups, seconds).

Metric names are those the learner writes (``grpo.services.learner``); each panel looks up a
short list of accepted names and says "no data" instead of failing when a run lacks them
(e.g. a run without evaluation). matplotlib runs with the non-interactive Agg backend.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.learner import metric_names as mn

__all__ = ["METRICS_READ", "REPORT_FILES", "load_metrics", "render_report"]

REPORT_FILES = (
    "reward_accuracy.png",
    "group_outcomes.png",
    "clip_kl_entropy.png",
    "length_by_advantage.png",
    "straggler_wait.png",
)

# The metric each line plots (grpo.learner.metric_names: the writers' own constants).
_REWARD = (mn.GROUPS_REWARD_MEAN,)
_ALL_CORRECT = (mn.GROUPS_ALL_CORRECT_FRAC,)
_ALL_WRONG = (mn.GROUPS_ALL_WRONG_FRAC,)
_MIXED = (mn.GROUPS_MIXED_FRAC,)
_CLIP_LOW = (mn.LOSS_CLIP_FRAC_LOW,)
_CLIP_HIGH = (mn.LOSS_CLIP_FRAC_HIGH,)
_KL = (mn.KL_REF_MEAN,)
_MISMATCH = (mn.BEHAVIOR_ABS_LOGPROB_DIFF_MEAN,)
_ENTROPY = (mn.ENTROPY_MEAN,)
_LEN_POS = (mn.LEN_MEAN_POS_ADV,)
_LEN_NEG = (mn.LEN_MEAN_NEG_ADV,)
_WAIT_MEAN = (mn.STRAGGLER_WAIT_MEAN_S,)
_WAIT_MAX = (mn.STRAGGLER_WAIT_MAX_S,)
_REWARDS_MISSING = (mn.ASSEMBLER_REWARDS_MISSING,)
_REWARDS_UNDECIDED = (mn.ASSEMBLER_REWARDS_UNDECIDED,)

METRICS_READ: tuple[str, ...] = (
    mn.STEP,
    mn.WALL_CLOCK_S,
    mn.GENERATED_TOKENS,
    *_REWARD, *_ALL_CORRECT, *_ALL_WRONG, *_MIXED, *_CLIP_LOW, *_CLIP_HIGH, *_KL, *_MISMATCH,
    *_ENTROPY, *_LEN_POS, *_LEN_NEG, *_WAIT_MEAN, *_WAIT_MAX,
    *mn.ASSEMBLER_GROUP_OUTCOMES, *_REWARDS_MISSING, *_REWARDS_UNDECIDED,
)  # fmt: skip
"""Every ``metrics.jsonl`` name the report reads (a test checks that each is written)."""


def load_metrics(path: str | Path) -> list[dict[str, Any]]:
    """Read a metrics JSONL file: one JSON object per line, blank lines skipped.

    Raises:
        NotFoundError: the file does not exist.
        InvalidArgumentError: a line is not a JSON object (the message gives its number).
    """
    path = Path(path)
    if not path.is_file():
        raise NotFoundError(f"metrics file {path} does not exist")
    rows = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise InvalidArgumentError(f"{path}:{number} is not JSON: {exc}") from None
        if not isinstance(row, dict):
            raise InvalidArgumentError(f"{path}:{number} is not a JSON object")
        rows.append(row)
    return rows


def _series(
    rows: Sequence[dict[str, Any]], x_key: str, names: Sequence[str]
) -> tuple[list[float], list[float]]:
    """(x, y) pairs of the first of ``names`` present, skipping rows without finite values."""
    for name in names:
        xs, ys = [], []
        for row in rows:
            x, y = row.get(x_key), row.get(name)
            if isinstance(x, int | float) and isinstance(y, int | float) and math.isfinite(y):
                xs.append(float(x))
                ys.append(float(y))
        if xs:
            return xs, ys
    return [], []


def _plot(ax: Any, rows: Sequence[dict[str, Any]], x_key: str, lines: dict[str, tuple]) -> None:
    drawn = False
    for label, names in lines.items():
        xs, ys = _series(rows, x_key, names)
        if xs:
            ax.plot(xs, ys, marker="." if len(xs) < 50 else None, label=label)
            drawn = True
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.grid(alpha=0.3)


def _eval_points(run_dir: Path, rows: Sequence[dict[str, Any]]) -> dict[str, list[float]]:
    """Held-out accuracy points from ``eval.jsonl`` placed on the three x axes."""
    path = run_dir / "eval.jsonl"
    points: dict[str, list[float]] = {"step": [], "generated_tokens": [], "wall_clock_s": []}
    points["y"] = []
    if not path.is_file():
        return points
    by_step = {int(r["step"]): r for r in rows}
    for ev in load_metrics(path):
        step, acc = ev.get("step"), ev.get("accuracy")
        if not isinstance(step, int | float) or not isinstance(acc, int | float):
            continue
        if not math.isfinite(acc):
            continue
        earlier = [s for s in by_step if s <= step]
        ref = by_step[max(earlier)] if earlier and step > 0 else {}
        points["step"].append(float(step))
        points["generated_tokens"].append(float(ref.get("generated_tokens", 0.0)))
        points["wall_clock_s"].append(float(ref.get("wall_clock_s", 0.0)))
        points["y"].append(float(acc))
    return points


_OUTCOME_LABELS = {
    mn.ASSEMBLER_GROUPS_ACCEPTED: "accepted",
    **{name: f"rejected {reason}" for reason, name in mn.ASSEMBLER_GROUPS_REJECTED.items()},
}
"""Closed-group outcome counter -> its line's label (every outcome, undecided included)."""
_ASSEMBLER_LINES = {label: (label,) for label in _OUTCOME_LABELS.values()}


def _assembler_shares(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cumulative outcome shares of every group the assembler closed, per learner step.

    Returns:
        One dict per step with a closed group: ``step`` and, per outcome label (accepted,
        rejected all correct / all wrong / too few valid / too many undecided), its share of
        the closed groups so far (the shares sum to 1; a counter absent from the row is 0).
    """
    out = []
    for row in rows:
        closed = {label: float(row.get(name, 0.0)) for name, label in _OUTCOME_LABELS.items()}
        total = sum(closed.values())
        if total > 0:
            out.append({"step": row["step"], **{k: v / total for k, v in closed.items()}})
    return out


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def render_report(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Render the run's PNG plots from ``<run_dir>/metrics.jsonl``.

    Args:
        run_dir: a run directory holding ``metrics.jsonl``.
        out_dir: where to write the PNGs (default ``<run_dir>/report``).

    Returns:
        The written files, in the order of ``REPORT_FILES``.

    Raises:
        NotFoundError: ``metrics.jsonl`` is missing.
        InvalidArgumentError: the file is malformed or holds no step.
    """
    run_dir = Path(run_dir)
    rows = load_metrics(run_dir / "metrics.jsonl")
    rows = [r for r in rows if isinstance(r.get("step"), int | float)]
    if not rows:
        raise InvalidArgumentError(f"{run_dir / 'metrics.jsonl'} holds no step records")
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    written = []

    evals = _eval_points(run_dir, rows)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    reward_lines = {"mean reward (trained groups)": _REWARD}
    for ax, (x_key, xlabel) in zip(
        axes,
        (
            ("step", "learner step"),
            ("generated_tokens", "generated tokens"),
            ("wall_clock_s", "wall-clock (s)"),
        ),
        strict=True,
    ):
        _plot(ax, rows, x_key, reward_lines)
        if evals["y"]:
            ax.plot(evals[x_key], evals["y"], "s--", label="held-out greedy accuracy (eval)")
            ax.legend(fontsize=8)
        ax.set_xlabel(xlabel)
    axes[0].set_ylabel("reward / accuracy")
    fig.suptitle("Reward and held-out accuracy")
    written.append(_save(fig, out / REPORT_FILES[0]))

    fig, axes = plt.subplots(1, 3, figsize=(18, 4))
    _plot(
        axes[0],
        rows,
        "step",
        {"all correct": _ALL_CORRECT, "all wrong": _ALL_WRONG, "mixed": _MIXED},
    )
    axes[0].set(xlabel="learner step", ylabel="share of groups", title="Trained batches")
    _plot(axes[1], _assembler_shares(rows), "step", _ASSEMBLER_LINES)
    axes[1].set(
        xlabel="learner step",
        ylabel="share of closed groups",
        title="All sampled groups (assembler)",
    )
    _plot(
        axes[2],
        rows,
        "step",
        {"missing (no valid reward)": _REWARDS_MISSING, "of which undecided": _REWARDS_UNDECIDED},
    )
    axes[2].set(
        xlabel="learner step",
        ylabel="members so far",
        title="Rewards without a verdict (assembler)",
    )
    written.append(_save(fig, out / REPORT_FILES[1]))

    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    _plot(axes[0], rows, "step", {"clip low": _CLIP_LOW, "clip high": _CLIP_HIGH})
    axes[0].set(xlabel="learner step", title="Clip fractions")
    _plot(axes[1], rows, "step", {"KL to reference": _KL, "|log π_old − log μ|": _MISMATCH})
    axes[1].set(xlabel="learner step", title="KL / behavior mismatch")
    _plot(axes[2], rows, "step", {"entropy (nats/token)": _ENTROPY})
    axes[2].set(xlabel="learner step", title="Entropy")
    written.append(_save(fig, out / REPORT_FILES[2]))

    fig, ax = plt.subplots(figsize=(7, 4))
    _plot(ax, rows, "step", {"advantage > 0": _LEN_POS, "advantage < 0": _LEN_NEG})
    ax.set(xlabel="learner step", ylabel="mean response tokens", title="Length by advantage")
    written.append(_save(fig, out / REPORT_FILES[3]))

    fig, ax = plt.subplots(figsize=(7, 4))
    _plot(ax, rows, "step", {"mean": _WAIT_MEAN, "max": _WAIT_MAX})
    ax.set(xlabel="learner step", ylabel="seconds", title="Straggler wait per group")
    written.append(_save(fig, out / REPORT_FILES[4]))
    return written
