"""One real ``grpo run`` (configs/e2e-tiny.yaml, the CLI as a user starts it) feeding every
tracking sink, read back with each backend's reader, and ``grpo report`` on its metrics. The
run trains LoRA adapters with a KL term (β 0.01, the reference = the base with adapters
off); a run without LoRA writes TensorBoard in ``test_resume.py``, the sinks' other checks are
in ``tests/learner/test_tracking.py``.

The run is shared by the module's tests (a few learner steps, ~20 s on 2 cores):

- TensorBoard (tensorboard's ``EventAccumulator``): every finite number of every
  ``metrics.jsonl`` line is a scalar at that line's step, with the same value;
- W&B offline: the run folder, its ``.wandb`` file's history rows equal ``metrics.jsonl``;
- MLflow (local file store): the run FINISHED, a metric's history per step, settings as
  params;
- ``grpo report``: every PNG written, and every line of every panel drawn from the real
  ``metrics.jsonl``;
- LoRA: checkpoints hold the adapters alone, published weights are plain merged models.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from tracking_files import mlflow_history, tensorboard_scalars, wandb_history

REPO = Path(__file__).resolve().parents[2]
SINKS = "[tensorboard, wandb, mlflow]"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("tracking") / "run"
    env = {k: v for k, v in os.environ.items() if k not in ("REDIS_URL", "WANDB_MODE")}
    env["OMP_NUM_THREADS"] = "1"
    cmd = [
        sys.executable, "-m", "grpo", "run", str(REPO / "configs" / "e2e-tiny.yaml"),
        "--run-dir", str(out), "--set", "model.sft.steps=5", "--set", "budget.steps=3",
        "--set", f"logging.report_to={SINKS}", "--set", "logging.project=e2e",
        "--set", "model.lora={r: 4, alpha: 8}", "--set", "learner.algo.kl_coef=0.01",
    ]  # fmt: skip
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    return out


def _metrics(run_dir: Path) -> list[dict[str, Any]]:
    lines = (run_dir / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def _numbers(row: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in row.items()
        if k != "step" and isinstance(v, int | float) and not isinstance(v, bool)
        if math.isfinite(v)
    }


def test_tensorboard_holds_every_metric_of_every_step(run_dir: Path) -> None:
    rows = _metrics(run_dir)
    assert [r["step"] for r in rows] == [1, 2, 3]
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    for row in rows:
        numbers = _numbers(row)
        assert len(numbers) > 50  # the whole line, not a chosen few
        for name, value in numbers.items():
            assert scalars[name][row["step"]] == pytest.approx(value, rel=1e-6, abs=1e-12), name
    written = {k for r in rows for k in _numbers(r)}
    assert set(scalars) == written


def test_wandb_offline_run_holds_the_same_history(run_dir: Path) -> None:
    ids = json.loads((run_dir / "tracking.json").read_text())
    (folder,) = (run_dir / "wandb").glob(f"offline-run-*-{ids['wandb_run_id']}")
    history = wandb_history(folder)
    rows = _metrics(run_dir)
    assert sorted(history) == [r["step"] for r in rows]
    for row in rows:
        assert history[row["step"]] == pytest.approx(_numbers(row), rel=1e-9)


def test_mlflow_run_in_the_local_file_store(run_dir: Path) -> None:
    from mlflow.tracking import MlflowClient

    ids = json.loads((run_dir / "tracking.json").read_text())
    assert ids["mlflow_tracking_uri"] == (run_dir / "mlruns").resolve().as_uri()
    rows = _metrics(run_dir)
    history = mlflow_history(ids["mlflow_tracking_uri"], ids["mlflow_run_id"], "optim/lr")
    assert history == {r["step"]: [r["optim/lr"]] for r in rows}
    run = MlflowClient(tracking_uri=ids["mlflow_tracking_uri"]).get_run(ids["mlflow_run_id"])
    assert run.info.status == "FINISHED" and run.info.run_name == run_dir.name
    assert run.data.params["settings.batch_groups"] == "2"  # the learner's resolved settings
    assert run.data.params["settings.logging.report_to"] == '["tensorboard", "wandb", "mlflow"]'
    assert set(run.data.metrics) == {k for r in rows for k in _numbers(r)}


def test_report_draws_every_line_from_the_real_metrics(run_dir: Path) -> None:
    from grpo.report import FIGURES, REPORT_FILES, report_series

    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "grpo", "report", str(run_dir), "--out-dir", str(run_dir / "r")],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert proc.stdout.split() == [str(run_dir / "r" / name) for name in REPORT_FILES]
    for name in REPORT_FILES:
        assert (run_dir / "r" / name).stat().st_size > 10_000, name

    series = report_series(run_dir)
    reward = series["reward_accuracy.png"]
    assert reward["reward"] == {"mean reward, sampled at temperature 1 (trained groups)": 3}
    assert reward["held-out accuracy"]["greedy"] >= 2  # before and after GRPO
    # A mean over the responses of one advantage sign is written only at the steps that have
    # such a response (never a false 0): its line has exactly those points. (The tiny start
    # solves nothing, so its outcome advantages are often all 0.)
    rows = _metrics(run_dir)
    by_sign = {
        "len/mean_pos_adv": "adv/pos_frac",
        "len/mean_neg_adv": "adv/neg_frac",
        "len/mean_zero_adv": "adv/zero_frac",
    }
    for mean, share in by_sign.items():
        assert [mean in r for r in rows] == [r[share] > 0 for r in rows], mean
    for figure in FIGURES:
        for panel in figure.panels:
            drawn = series[figure.file][panel.title]
            if panel.prefix:  # weight shares: only at steps whose tokens carry weight
                weighted = any(r.get("adv/token_abs_mean", 0) > 0 for r in rows)
                assert bool(drawn) == weighted, (figure.file, panel.title)
                continue
            assert drawn, (figure.file, panel.title)
            for line in panel.lines:
                want = sum(line.value(r) is not None for r in rows)
                if line.metric in by_sign:
                    assert drawn.get(line.label, 0) == want, (panel.title, line.label)
                else:
                    assert drawn.get(line.label) == 3, (figure.file, panel.title, line.label)


def test_the_run_leaves_no_tracking_process(run_dir: Path) -> None:
    summary = json.loads((run_dir / "summary.json").read_text())
    assert summary["leftover_processes"] == []  # W&B's service ended with the learner
    assert summary["final_policy_step"] == 3


def test_lora_checkpoints_adapters_and_publishes_merged_weights(run_dir: Path) -> None:
    from safetensors import safe_open

    (ckpt,) = sorted((run_dir / "checkpoints").glob("step-*"))[-1:]
    files = {p.name for p in (ckpt / "model").iterdir()}
    assert "adapter_model.safetensors" in files and "model.safetensors" not in files
    meta = json.loads((ckpt / "meta.json").read_text())
    assert meta["precision"] == {"params": "float32", "autocast": "off", "lora": "on"}
    last = max((run_dir / "weights").glob("v*"), key=lambda p: int(p.name[1:]))
    with safe_open(str(last / "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert keys and not any("lora" in k or "base_layer" in k for k in keys)
    rows = _metrics(run_dir)
    assert rows[0]["kl/ref_mean"] == 0.0  # B = 0 at the start: π_θ is the base
    assert all(r["kl/ref_mean"] >= 0.0 for r in rows)  # k3 (its growth: test_lora.py)
