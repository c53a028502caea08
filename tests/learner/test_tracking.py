"""The tracking sinks (``grpo.learner.tracking``) read back with each backend's reader.

A real ``grpo run`` feeding all three is in ``tests/e2e/test_tracking_run.py``; here: a
resumed learner's lineage (TensorBoard hides the lost steps, W&B and MLflow reopen the same
run), non-finite values left out, a missing package and a failing sink.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from tracking_files import mlflow_history, tensorboard_scalars, wandb_history

from grpo.errors import FailedPreconditionError
from grpo.learner.tracking import Tracker, TrackingConfig, finite_scalars, open_tracker


def _line(step: int, lineage: int) -> dict[str, Any]:
    return {
        "step": step,
        "groups/reward_mean": 0.1 * step + lineage,
        "optim/lr": 1e-4,
        "trained_tokens": 10 * step,
        "kl/ref_mean": float("nan"),
        "note": "text",
        "flag": True,
    }


def test_finite_scalars_keep_numbers_only() -> None:
    got = finite_scalars(_line(2, 0))
    assert got == {"step": 2.0, "groups/reward_mean": 0.2, "optim/lr": 1e-4, "trained_tokens": 20.0}


def test_a_resumed_run_keeps_one_lineage_in_every_sink(tmp_path: Path) -> None:
    config = TrackingConfig(report_to=["tensorboard", "wandb", "mlflow"], run_name="t")
    settings = {"trainer": {"lr": 1e-4, "betas": [0.9, 0.99]}, "batch_groups": 2}
    first = open_tracker(config, tmp_path, settings=settings)
    assert first.names == ["tensorboard", "wandb", "mlflow"]
    for step in (1, 2, 3):
        first.log(_line(step, lineage=0), step)
    first.close()
    # The learner died after step 3 with its checkpoint at step 1: steps 2, 3 are re-trained.
    second = open_tracker(config, tmp_path, settings=settings, resume_step=1)
    for step in (2, 3, 4):
        second.log(_line(step, lineage=1), step)
    second.close()

    tb = tensorboard_scalars(tmp_path / "tensorboard")
    assert set(tb) == {"groups/reward_mean", "optim/lr", "trained_tokens"}  # no step, NaN, text
    assert tb["groups/reward_mean"] == pytest.approx({1: 0.1, 2: 1.2, 3: 1.3, 4: 1.4})

    ids = json.loads((tmp_path / "tracking.json").read_text())
    folders = sorted((tmp_path / "wandb").glob("offline-run-*"))
    assert len(folders) == 2 and all(f.name.endswith(ids["wandb_run_id"]) for f in folders)
    rows = [wandb_history(f) for f in folders]
    assert sorted(rows[0]) == [1, 2, 3] and sorted(rows[1]) == [2, 3, 4]
    assert rows[1][4]["groups/reward_mean"] == pytest.approx(1.4)
    assert set(rows[0][1]) == {"groups/reward_mean", "optim/lr", "trained_tokens"}

    assert ids["mlflow_tracking_uri"] == (tmp_path / "mlruns").resolve().as_uri()
    history = mlflow_history(ids["mlflow_tracking_uri"], ids["mlflow_run_id"], "trained_tokens")
    assert history == {1: [10.0], 2: [20.0, 20.0], 3: [30.0, 30.0], 4: [40.0]}
    from mlflow.tracking import MlflowClient

    run = MlflowClient(tracking_uri=ids["mlflow_tracking_uri"]).get_run(ids["mlflow_run_id"])
    assert run.data.params["trainer.lr"] == "0.0001"
    assert run.data.params["trainer.betas"] == "[0.9, 0.99]"
    assert run.info.status == "FINISHED" and run.info.run_name == "t"


def test_a_missing_package_names_the_extra(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    config = TrackingConfig(report_to=["tensorboard", "wandb"])
    with pytest.raises(FailedPreconditionError, match=r"'wandb'.*grpo-pipeline\[tracking\]"):
        open_tracker(config, tmp_path)


def test_report_to_refuses_unknown_and_repeated_sinks() -> None:
    with pytest.raises(ValueError, match="comet"):
        TrackingConfig(report_to=["comet"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="twice"):
        TrackingConfig(report_to=["wandb", "wandb"])
    assert TrackingConfig().report_to == ["tensorboard"]


class _Sink:
    def __init__(self, name: str, fail: bool) -> None:
        self.name, self.fail, self.seen, self.closed = name, fail, [], False

    def log(self, metrics, step) -> None:  # type: ignore[no-untyped-def]
        if self.fail:
            raise OSError("disk full")
        self.seen.append(step)

    def close(self) -> None:
        self.closed = True


def test_a_failing_sink_is_closed_and_the_others_go_on(caplog) -> None:
    bad, good = _Sink("bad", fail=True), _Sink("good", fail=False)
    tracker = Tracker([bad, good])
    tracker.log({"x": 1.0}, 1)
    tracker.log({"x": 2.0}, 2)
    assert good.seen == [1, 2] and bad.closed and tracker.names == ["good"]
    assert "tracking sink bad failed at step 1" in caplog.text
    tracker.close()
    assert good.closed and tracker.names == []
