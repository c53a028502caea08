"""Run reports: PNG plots of every per-step diagnostic in a run directory's ``metrics.jsonl``.

``render_report(run_dir)`` writes into ``<run_dir>/report/`` (``REPORT_FILES``, in order):

- ``reward_accuracy.png``: the mean reward of the rollouts trained on — *sampled* at the
  rollout temperature (``generation.temperature`` of ``<run_dir>/config.yaml``, 1 unless set),
  so it sits below the *greedy* held-out accuracy of the same policy by design — and the
  greedy accuracy from ``<run_dir>/eval.jsonl``, vs learner step, generated tokens and
  wall-clock seconds. An evaluation at step s is placed at the generated tokens and wall-clock
  of step s (step 0, the start, at 0);
- ``group_rewards.png``: group reward mean and within-group std, correct and missing shares;
  raw centered reward |R − mean| vs the scaled advantage |A| (the std normalization's effect);
  zero-variance groups (every valid reward equal: advantage 0) and groups with too few valid
  rewards per trained batch;
- ``group_outcomes.png``: all-correct / all-wrong / mixed shares of each trained batch; the
  cumulative shares of every group the assembler closed, accepted or rejected by reason
  (``metric_names.ASSEMBLER_GROUP_OUTCOMES``); members without a valid reward so far, those
  whose verifier answered UNDECIDED among them;
- ``clip_kl_entropy.png``: clip fractions (low, high, dual); KL to the reference (β > 0),
  the approximate KL(π_old‖π_θ) of the update and the π_old/μ mismatch; token entropy; the
  importance ratio π_θ/π_old (mean, min, max);
- ``length_by_advantage.png``: mean response length with positive, negative and zero
  advantage and overall; the share of responses truncated at the length limit; the loss
  denominators (prompts, responses, tokens; log scale);
- ``wasted_tokens.png``: cumulative generated tokens, those of accepted groups (kept), those
  never trained on (generated − kept: rejected, still open or late) and those of zero-variance
  groups (``assembler/*``); the wasted and zero-variance shares of generation; the share of
  trained rows with advantage 0 per batch;
- ``optimizer.png``: learning rate; gradient norm before clipping (the step's last and largest
  over its optimizer steps); optimizer steps skipped (non-finite) or without signal;
- ``straggler_wait.png``: straggler wait per step (mean and max over the step's groups);
- ``slice_weights.png``: the effective loss weight per slice (task, difficulty, length
  quartile) of each batch (``weight/<slice>/<label>``).

Metric names are the writers' own constants (``grpo.learner.metric_names``) where more than one
component uses them; ``METRICS_READ`` lists every name read (a test checks each is written by
a real learner step, and another that a real run's ``metrics.jsonl`` draws every line). A
panel whose metrics a run lacks (a run without evaluation or an assembler) says "no data".
A step that did not write a line's metric (the learner leaves out a mean over an empty set,
e.g. ``len/mean_pos_adv`` in a batch without a positive advantage: ``learner/diagnostics.py``)
is a gap in that line, never a 0; a point with no neighbour is drawn as a dot.
matplotlib runs with the non-interactive Agg backend.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib
import yaml

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.learner import metric_names as mn

__all__ = [
    "FIGURES",
    "METRICS_READ",
    "REPORT_FILES",
    "Figure",
    "Line",
    "Panel",
    "load_metrics",
    "render_report",
    "report_series",
]

Row = Mapping[str, Any]


@dataclass(frozen=True)
class Line:
    """One plotted series: a metric as written, or a value derived from a line's metrics.

    Attributes:
        label: the legend entry.
        metric: the ``metrics.jsonl`` name plotted (when ``derive`` is None).
        derive: computes the value from one metrics line (None = nothing that step).
        reads: the names ``derive`` reads (listed in ``METRICS_READ``).
    """

    label: str
    metric: str = ""
    derive: Callable[[Row], float | None] | None = None
    reads: tuple[str, ...] = ()

    def value(self, row: Row) -> float | None:
        """This line's finite value in ``row``, or None."""
        v = self.derive(row) if self.derive is not None else row.get(self.metric)
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
            return None
        return float(v)

    @property
    def names(self) -> tuple[str, ...]:
        return self.reads if self.derive is not None else (self.metric,)


@dataclass(frozen=True)
class Panel:
    """One axes: its title, y label and lines (plus one line per name under ``prefix``)."""

    title: str
    ylabel: str
    lines: tuple[Line, ...] = ()
    prefix: str = ""
    logy: bool = False

    def all_lines(self, rows: Sequence[Row]) -> list[Line]:
        """The fixed lines, then one per metric name under ``prefix`` found in ``rows``."""
        if not self.prefix:
            return list(self.lines)
        names = sorted({k for r in rows for k in r if k.startswith(self.prefix)})
        return [*self.lines, *(Line(n[len(self.prefix) :], n) for n in names)]


@dataclass(frozen=True)
class Figure:
    """One PNG of panels side by side, all against the learner step."""

    file: str
    title: str
    panels: tuple[Panel, ...]


def _ratio(num: str, den: str) -> Callable[[Row], float | None]:
    def f(row: Row) -> float | None:
        n, d = row.get(num), row.get(den)
        if isinstance(n, int | float) and isinstance(d, int | float) and d > 0:
            return n / d
        return None

    return f


def _difference(a: str, b: str) -> Callable[[Row], float | None]:
    def f(row: Row) -> float | None:
        x, y = row.get(a), row.get(b)
        return x - y if isinstance(x, int | float) and isinstance(y, int | float) else None

    return f


def _wasted_share(row: Row) -> float | None:
    wasted = _difference(mn.ASSEMBLER_GENERATED_TOKENS, mn.ASSEMBLER_KEPT_TOKENS)(row)
    total = row.get(mn.ASSEMBLER_GENERATED_TOKENS)
    if wasted is None or not isinstance(total, int | float) or total <= 0:
        return None
    return wasted / total


_OUTCOME_LABELS = {
    mn.ASSEMBLER_GROUPS_ACCEPTED: "accepted",
    **{name: f"rejected {reason}" for reason, name in mn.ASSEMBLER_GROUPS_REJECTED.items()},
}
"""Closed-group outcome counter -> its line's label (every outcome, undecided included)."""


def _outcome_share(name: str) -> Callable[[Row], float | None]:
    """Share of closed groups so far with outcome ``name`` (a counter absent is 0)."""

    def f(row: Row) -> float | None:
        closed = {n: row.get(n, 0.0) for n in _OUTCOME_LABELS}
        if not all(isinstance(v, int | float) for v in closed.values()):
            return None
        total = float(sum(closed.values()))
        return float(closed[name]) / total if total > 0 else None

    return f


_TOKENS = (mn.ASSEMBLER_GENERATED_TOKENS, mn.ASSEMBLER_KEPT_TOKENS)

FIGURES: tuple[Figure, ...] = (
    Figure("group_rewards.png", "Group rewards and advantages (trained batches)", (
        Panel("Reward per group", "reward / share", (
            Line("group reward mean", mn.GROUPS_REWARD_MEAN),
            Line("within-group reward std (mean)", mn.GROUPS_REWARD_STD_MEAN),
            Line("correct share", mn.GROUPS_CORRECT_FRAC),
            Line("missing share (no valid reward)", mn.GROUPS_MISSING_FRAC),
        )),
        Panel("Centered reward vs advantage", "mean |value|", (
            Line("raw centered |R − mean|", mn.ADV_CENTERED_ABS_MEAN),
            Line("scaled advantage |A|", mn.ADV_ABS_MEAN),
        )),
        Panel("Groups without an advantage", "groups per batch", (
            Line("zero variance", mn.ADV_ZERO_VARIANCE_GROUPS),
            Line("too few valid rewards", mn.ADV_TOO_FEW_VALID_GROUPS),
        )),
    )),
    Figure("group_outcomes.png", "Group outcomes", (
        Panel("Trained batches", "share of groups", (
            Line("all correct", mn.GROUPS_ALL_CORRECT_FRAC),
            Line("all wrong", mn.GROUPS_ALL_WRONG_FRAC),
            Line("mixed", mn.GROUPS_MIXED_FRAC),
        )),
        Panel("All sampled groups (assembler)", "share of closed groups", tuple(
            Line(label, derive=_outcome_share(name), reads=tuple(_OUTCOME_LABELS))
            for name, label in _OUTCOME_LABELS.items()
        )),
        Panel("Rewards without a verdict (assembler)", "members so far", (
            Line("missing (no valid reward)", mn.ASSEMBLER_REWARDS_MISSING),
            Line("of which undecided", mn.ASSEMBLER_REWARDS_UNDECIDED),
        )),
    )),
    Figure("clip_kl_entropy.png", "Clipping, KL, entropy and ratios", (
        Panel("Clip fractions", "share of tokens", (
            Line("clip low (A < 0)", mn.LOSS_CLIP_FRAC_LOW),
            Line("clip high (A > 0)", mn.LOSS_CLIP_FRAC_HIGH),
            Line("dual clip", mn.LOSS_DUAL_CLIP_FRAC),
        )),
        Panel("KL / behavior mismatch", "nats per token", (
            Line("KL to reference", mn.KL_REF_MEAN),
            Line("approx KL(π_old‖π_θ)", mn.LOSS_APPROX_KL),
            Line("|log π_old − log μ|", mn.BEHAVIOR_ABS_LOGPROB_DIFF_MEAN),
        )),
        Panel("Entropy", "nats per token", (Line("entropy", mn.ENTROPY_MEAN),)),
        Panel("Ratio π_θ/π_old", "ratio", (
            Line("mean", mn.LOSS_RATIO_MEAN),
            Line("min", mn.LOSS_RATIO_MIN),
            Line("max", mn.LOSS_RATIO_MAX),
        )),
    )),
    Figure("length_by_advantage.png", "Response length", (
        Panel("Length by advantage sign", "mean response tokens", (
            Line("advantage > 0", mn.LEN_MEAN_POS_ADV),
            Line("advantage < 0", mn.LEN_MEAN_NEG_ADV),
            Line("advantage = 0", mn.LEN_MEAN_ZERO_ADV),
            Line("all responses", mn.LEN_MEAN),
        )),
        Panel("Truncation", "share of responses", (
            Line("truncated at the length limit", mn.LEN_TRUNCATED_FRAC),
        )),
        Panel("Loss denominators", "count (log)", (
            Line("prompts", mn.DENOM_PROMPTS),
            Line("responses", mn.DENOM_RESPONSES),
            Line("tokens", mn.DENOM_TOKENS),
        ), logy=True),
    )),
    Figure("wasted_tokens.png", "Generated tokens and waste", (
        Panel("Cumulative tokens (assembler)", "tokens", (
            Line("generated", mn.ASSEMBLER_GENERATED_TOKENS),
            Line("kept (accepted groups)", mn.ASSEMBLER_KEPT_TOKENS),
            Line("wasted (generated − kept)", derive=_difference(*_TOKENS), reads=_TOKENS),
            Line("in zero-variance groups", mn.ASSEMBLER_ZERO_VARIANCE_TOKENS),
        )),
        Panel("Share of generated tokens", "share", (
            Line("wasted (never trained on)", derive=_wasted_share, reads=_TOKENS),
            Line("in zero-variance groups", derive=_ratio(
                mn.ASSEMBLER_ZERO_VARIANCE_TOKENS, mn.ASSEMBLER_GENERATED_TOKENS,
            ), reads=(mn.ASSEMBLER_ZERO_VARIANCE_TOKENS, mn.ASSEMBLER_GENERATED_TOKENS)),
        )),
        Panel("Trained rows (per batch)", "share of rows", (
            Line("advantage = 0", mn.ADV_ZERO_FRAC),
            Line("advantage > 0", mn.ADV_POS_FRAC),
            Line("advantage < 0", mn.ADV_NEG_FRAC),
        )),
    )),
    Figure("optimizer.png", "Optimizer", (
        Panel("Learning rate", "lr", (Line("learning rate", mn.OPTIM_LR),)),
        Panel("Gradient norm (before clipping)", "L2 norm", (
            Line("last optimizer step", mn.OPTIM_GRAD_NORM),
            Line("largest over the step", mn.OPTIM_GRAD_NORM_MAX),
        )),
        Panel("Optimizer steps not taken", "steps per learner step", (
            Line("skipped (non-finite)", mn.OPTIM_SKIPPED_STEPS),
            Line("no signal (all advantages 0)", mn.OPTIM_NO_SIGNAL_STEPS),
        )),
    )),
    Figure("straggler_wait.png", "Straggler wait per group", (
        Panel("Straggler wait", "seconds", (
            Line("mean", mn.STRAGGLER_WAIT_MEAN_S),
            Line("max", mn.STRAGGLER_WAIT_MAX_S),
        )),
    )),
    Figure("slice_weights.png", "Effective loss weight per slice", (
        Panel("Task", "share of loss weight", prefix=mn.weight_prefix("task")),
        Panel("Difficulty", "share of loss weight", prefix=mn.weight_prefix("difficulty")),
        Panel("Length quartile", "share of loss weight", prefix=mn.weight_prefix("length")),
    )),
)  # fmt: skip
"""Every figure after ``reward_accuracy.png``, declared panel by panel."""

REWARD_FILE = "reward_accuracy.png"
REPORT_FILES: tuple[str, ...] = (REWARD_FILE, *(f.file for f in FIGURES))

_PANEL_NAMES = [n for f in FIGURES for p in f.panels for line in p.lines for n in line.names]
METRICS_READ: tuple[str, ...] = tuple(
    dict.fromkeys([mn.STEP, mn.WALL_CLOCK_S, mn.GENERATED_TOKENS, mn.GROUPS_REWARD_MEAN,
                   *_PANEL_NAMES])
)  # fmt: skip
"""Every ``metrics.jsonl`` name the report reads besides the ``weight/*`` prefixes (a test
checks that each is written)."""


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


def _series(rows: Sequence[Row], x_key: str, line: Line) -> tuple[list[float], list[float]]:
    """(x, y) of ``line`` over the rows that have ``x_key``; y is NaN where the row has no
    finite value (a metric not written that step, e.g. a mean over an empty set), so the
    line is drawn with a gap there instead of joining its neighbours. Empty when no row has
    a value."""
    xs, ys = [], []
    for row in rows:
        x, y = row.get(x_key), line.value(row)
        if isinstance(x, int | float) and not isinstance(x, bool):
            xs.append(float(x))
            ys.append(math.nan if y is None else y)
    if not any(math.isfinite(y) for y in ys):
        return [], []
    return xs, ys


def _points(ys: Sequence[float]) -> int:
    """Finite values of a series."""
    return sum(1 for y in ys if math.isfinite(y))


def _isolated(ys: Sequence[float]) -> list[int]:
    """Indices of finite values with no finite neighbour (a line cannot show them)."""
    finite = [math.isfinite(y) for y in ys]
    return [
        i
        for i, ok in enumerate(finite)
        if ok and not (i > 0 and finite[i - 1]) and not (i + 1 < len(ys) and finite[i + 1])
    ]


def _draw(ax: Any, rows: Sequence[Row], x_key: str, lines: Sequence[Line]) -> int:
    """Plot ``lines`` on ``ax`` ("no data" when none has a point), with a gap at each step
    whose value is missing; returns lines drawn."""
    drawn = 0
    for line in lines:
        xs, ys = _series(rows, x_key, line)
        if xs:
            if _points(ys) < 50:
                ax.plot(xs, ys, marker=".", label=line.label)
            else:  # no marker but on the points a line cannot show
                ax.plot(xs, ys, marker=".", markevery=_isolated(ys), label=line.label)
            drawn += 1
    if drawn:
        ax.legend(fontsize=8)
    else:
        ax.text(0.5, 0.5, "no data", ha="center", va="center", transform=ax.transAxes)
    ax.grid(alpha=0.3)
    return drawn


def _eval_points(run_dir: Path, rows: Sequence[Row]) -> dict[str, list[float]]:
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


def sampling_temperature(run_dir: Path) -> float | None:
    """``generation.temperature`` of ``<run_dir>/config.yaml`` (1.0 when the file leaves it
    out), or None without a readable run config (a learner-only run dir)."""
    path = run_dir / "config.yaml"
    try:
        config = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError):
        return None
    if not isinstance(config, dict):
        return None
    generation = config.get("generation") or {}
    temperature = generation.get("temperature", 1.0) if isinstance(generation, dict) else None
    return float(temperature) if isinstance(temperature, int | float) else None


def _reward_line(run_dir: Path) -> Line:
    t = sampling_temperature(run_dir)
    at = f"temperature {t:g}" if t is not None else "the rollout temperature"
    return Line(f"mean reward, sampled at {at} (trained groups)", mn.GROUPS_REWARD_MEAN)


_X_AXES = (
    ("step", "learner step"),
    ("generated_tokens", "generated tokens"),
    ("wall_clock_s", "wall-clock (s)"),
)


def _reward_figure(run_dir: Path, rows: Sequence[Row], out: Path) -> Path:
    evals = _eval_points(run_dir, rows)
    reward = _reward_line(run_dir)
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for ax, (x_key, xlabel) in zip(axes, _X_AXES, strict=True):
        _draw(ax, rows, x_key, [reward])
        if evals["y"]:
            ax.plot(evals[x_key], evals["y"], "s--", label="held-out accuracy, greedy (eval)")
            ax.legend(fontsize=8)
        ax.set_xlabel(xlabel)
    axes[0].set_ylabel("reward / accuracy")
    fig.suptitle(
        "Sampled reward vs greedy held-out accuracy (sampling at temperature > 0 scores "
        "below greedy decoding of the same policy)",
        fontsize=10,
    )
    return _save(fig, out / REWARD_FILE)


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def _panel_figure(figure: Figure, rows: Sequence[Row], out: Path) -> Path:
    n = len(figure.panels)
    fig, axes = plt.subplots(1, n, figsize=(5 * n + 1, 4), squeeze=False)
    for ax, panel in zip(axes[0], figure.panels, strict=True):
        drawn = _draw(ax, rows, "step", panel.all_lines(rows))
        ax.set(xlabel="learner step", ylabel=panel.ylabel, title=panel.title)
        if panel.logy and drawn:
            ax.set_yscale("symlog", linthresh=1.0)
    fig.suptitle(figure.title)
    return _save(fig, out / figure.file)


def _step_rows(run_dir: Path) -> list[dict[str, Any]]:
    rows = load_metrics(run_dir / "metrics.jsonl")
    rows = [r for r in rows if isinstance(r.get("step"), int | float)]
    if not rows:
        raise InvalidArgumentError(f"{run_dir / 'metrics.jsonl'} holds no step records")
    return rows


def report_series(run_dir: str | Path) -> dict[str, dict[str, dict[str, int]]]:
    """What ``render_report`` would draw: file -> panel title -> line label -> points.

    Lines without a single finite point are left out (their panel may be empty); the reward
    figure lists the sampled reward and, under "held-out accuracy", the greedy evaluations.

    Raises:
        NotFoundError / InvalidArgumentError: as ``render_report``.
    """
    run_dir = Path(run_dir)
    rows = _step_rows(run_dir)
    reward = _reward_line(run_dir)
    out: dict[str, dict[str, dict[str, int]]] = {
        REWARD_FILE: {
            "reward": {reward.label: _points(_series(rows, "step", reward)[1])},
            "held-out accuracy": {"greedy": len(_eval_points(run_dir, rows)["y"])},
        }
    }
    for figure in FIGURES:
        out[figure.file] = {
            panel.title: {
                line.label: n
                for line in panel.all_lines(rows)
                if (n := _points(_series(rows, "step", line)[1]))
            }
            for panel in figure.panels
        }
    return out


def render_report(run_dir: str | Path, out_dir: str | Path | None = None) -> list[Path]:
    """Render the run's PNG plots from ``<run_dir>/metrics.jsonl``.

    Args:
        run_dir: a run directory holding ``metrics.jsonl`` (and, from ``grpo run``,
            ``eval.jsonl`` and ``config.yaml``).
        out_dir: where to write the PNGs (default ``<run_dir>/report``).

    Returns:
        The written files, in the order of ``REPORT_FILES``.

    Raises:
        NotFoundError: ``metrics.jsonl`` is missing.
        InvalidArgumentError: the file is malformed or holds no step.
    """
    run_dir = Path(run_dir)
    rows = _step_rows(run_dir)
    out = Path(out_dir) if out_dir is not None else run_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    written = [_reward_figure(run_dir, rows, out)]
    written += [_panel_figure(figure, rows, out) for figure in FIGURES]
    return written
