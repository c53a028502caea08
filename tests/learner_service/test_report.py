"""`grpo report` renders the expected PNG files from a small synthetic metrics file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from grpo.cli_report import app
from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.report import (
    FIGURES,
    REPORT_FILES,
    _eval_points,
    load_metrics,
    render_report,
    report_series,
)

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _write_metrics(run_dir: Path, steps: int = 6) -> None:
    rows = []
    for s in range(1, steps + 1):
        row = {
            "step": s,
            "policy_version": s,
            "wall_clock_s": 2.5 * s,
            "generated_tokens": 1000 * s,
            "groups/reward_mean": 0.3 + 0.05 * s,
            "groups/all_correct_frac": 0.1,
            "groups/all_wrong_frac": 0.2,
            "groups/mixed_frac": 0.7,
            "loss/clip_frac_low": 0.01,
            "loss/clip_frac_high": 0.02,
            "behavior/abs_logprob_diff_mean": 1e-6,
            "entropy/mean": 0.9,
            "len/mean_pos_adv": 12.0,
            "len/mean_neg_adv": 14.0,
            "time/straggler_wait_mean_s": 0.1,
            "time/straggler_wait_max_s": 0.4,
            "assembler/groups_accepted": 8.0 * s,
            "assembler/groups_rejected_all_correct": 2.0 * s,
            "assembler/groups_rejected_all_wrong": 6.0 * s,
            "assembler/groups_rejected_too_many_undecided": 1.0 * s,
            "assembler/rewards_missing": 3.0 * s,
            "assembler/rewards_undecided": 1.0 * s,
        }
        if s % 2 == 0:
            row["eval/accuracy"] = 0.4 + 0.02 * s
        rows.append(row)
    (run_dir / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")


def test_report_renders_every_png(tmp_path: Path) -> None:
    _write_metrics(tmp_path)
    evals = [
        {"label": "sft", "step": 0, "accuracy": 0.4},
        {"label": "final", "step": 6, "accuracy": 0.6},
    ]
    (tmp_path / "eval.jsonl").write_text("\n".join(json.dumps(e) for e in evals) + "\n")
    assert _eval_points(tmp_path, load_metrics(tmp_path / "metrics.jsonl")) == {
        "step": [0.0, 6.0],
        "generated_tokens": [0.0, 6000.0],
        "wall_clock_s": [0.0, 15.0],
        "y": [0.4, 0.6],
    }
    (panel,) = [p for f in FIGURES for p in f.panels if p.title == "All sampled groups (assembler)"]
    first = load_metrics(tmp_path / "metrics.jsonl")[0]
    shares = {line.label: line.value(first) for line in panel.lines}
    assert shares == {  # 8 accepted, 2 + 6 + 0 + 1 rejected: every closed group
        "accepted": 8 / 17,
        "rejected all correct": 2 / 17,
        "rejected all wrong": 6 / 17,
        "rejected too few valid": 0.0,
        "rejected too many undecided": 1 / 17,
    }
    series = report_series(tmp_path)
    assert list(series) == list(REPORT_FILES)
    assert series["reward_accuracy.png"]["held-out accuracy"] == {"greedy": 2}
    # no config.yaml: the temperature is unknown, the line still says it was sampled
    assert series["reward_accuracy.png"]["reward"] == {
        "mean reward, sampled at the rollout temperature (trained groups)": 6
    }
    (tmp_path / "config.yaml").write_text("generation: {temperature: 0.7}\n")
    assert "sampled at temperature 0.7" in str(report_series(tmp_path)["reward_accuracy.png"])
    written = render_report(tmp_path)
    assert [p.name for p in written] == list(REPORT_FILES)
    for path in written:
        assert path.parent == tmp_path / "report"
        data = path.read_bytes()
        assert data.startswith(PNG_MAGIC)
        assert len(data) > 5_000  # a real plot, not an empty canvas


def test_report_cli_writes_to_out_dir(tmp_path: Path) -> None:
    _write_metrics(tmp_path, steps=3)
    out = tmp_path / "plots"
    result = CliRunner().invoke(app, [str(tmp_path), "--out-dir", str(out)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in out.glob("*.png")) == sorted(REPORT_FILES)
    assert result.output.split() == [str(out / name) for name in REPORT_FILES]
    missing = CliRunner().invoke(app, [str(tmp_path / "nope")])
    assert missing.exit_code == 2 and "metrics.jsonl" in missing.output


def test_report_errors_name_the_problem(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError, match=r"metrics\.jsonl"):
        render_report(tmp_path)
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n')
    with pytest.raises(InvalidArgumentError, match=r"metrics\.jsonl:2 is not JSON"):
        render_report(tmp_path)


def test_a_metric_missing_at_a_step_is_a_gap_not_a_zero(tmp_path: Path) -> None:
    import math

    import matplotlib.pyplot as plt

    from grpo.report import Line, _draw, _series

    _write_metrics(tmp_path, steps=6)
    rows = load_metrics(tmp_path / "metrics.jsonl")
    for row in rows[2:4]:  # steps 3 and 4 had no negative-advantage response
        del row["len/mean_neg_adv"]
    line = Line("advantage < 0", "len/mean_neg_adv")
    xs, ys = _series(rows, "step", line)
    assert xs == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert [math.isnan(y) for y in ys] == [False, False, True, True, False, False]
    fig, ax = plt.subplots()
    assert _draw(ax, rows, "step", [line]) == 1
    (drawn,) = ax.get_lines()
    assert math.isnan(drawn.get_ydata()[2])  # matplotlib breaks the line there
    plt.close(fig)
    (tmp_path / "metrics.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    lengths = report_series(tmp_path)["length_by_advantage.png"]
    (panel,) = [p for p in lengths.values() if "advantage < 0" in p]
    assert panel["advantage < 0"] == 4 and panel["advantage > 0"] == 6  # finite points
    assert _series(rows, "step", Line("never", "no/such_metric")) == ([], [])
