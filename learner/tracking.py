"""Experiment tracking: each learner step's metrics mirrored to TensorBoard, W&B and MLflow.

``metrics.jsonl`` stays the run's record (``grpo report`` reads it); the sinks here receive
the same line, every finite number of it, at the same step:

- ``tensorboard`` (the default): event files under ``<run_dir>/tensorboard/``, one scalar per
  metric name (``torch.utils.tensorboard.SummaryWriter``), flushed after every step.
  ``tensorboard --logdir RUN_DIR/tensorboard`` shows them.
- ``wandb``: a Weights & Biases run, offline by default (``<run_dir>/wandb/offline-run-*``;
  ``wandb sync`` uploads it later), the learner's resolved settings as its config.
- ``mlflow``: an MLflow run in a local file store (``<run_dir>/mlruns``; MLflow keeps that
  backend in maintenance mode, so the sink opts in with ``MLFLOW_ALLOW_FILE_STORE=true``)
  or at ``mlflow_tracking_uri``; flattened settings as params.

A resumed learner (restarted from its checkpoint at step s) re-trains the steps after s:
TensorBoard's purge step hides the lost lineage's values after s (the viewer and its event
reader keep the newest file's), W&B and MLflow reopen the same run by the ids kept in
``<run_dir>/tracking.json`` (W&B offline writes one folder per process; MLflow shows both
values of a re-trained step, the later one last). Both TensorBoard files and W&B folders are
named by their start second, so a restart within the second of the last open waits for the
next one (at most 1 s). Only non-finite values are left out (JSON
writes them as null).

A sink that cannot be opened (its package missing, a bad tracking URI) raises at start; one
that fails while logging is logged as an error and closed, and training goes on
(``metrics.jsonl`` still holds every step).
"""

from __future__ import annotations

import json
import logging
import math
import os
import secrets
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import FailedPreconditionError, InvalidArgumentError

__all__ = [
    "REPORT_TO",
    "MetricsSink",
    "Tracker",
    "TrackingConfig",
    "finite_scalars",
    "open_tracker",
]

log = logging.getLogger(__name__)

SinkName = Literal["tensorboard", "wandb", "mlflow"]
REPORT_TO: tuple[str, ...] = ("tensorboard", "wandb", "mlflow")
"""The sinks ``logging.report_to`` may name."""

_PACKAGES = {"tensorboard": "tensorboard", "wandb": "wandb", "mlflow": "mlflow-skinny"}
"""Sink -> the pip package it needs (all three in the ``tracking`` extra)."""


class TrackingConfig(BaseModel):
    """Where the learner's per-step metrics go besides ``metrics.jsonl``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    report_to: list[SinkName] = Field(
        default=["tensorboard"],  # pydantic copies a mutable default per instance
        description="Tracking sinks fed every metrics.jsonl line at its step: tensorboard "
        "(event files in <run_dir>/tensorboard), wandb (<run_dir>/wandb), mlflow "
        "(<run_dir>/mlruns unless mlflow_tracking_uri); [] = metrics.jsonl only.",
    )
    project: str = Field(
        default="grpo-pipeline",
        min_length=1,
        description="W&B project and MLflow experiment name.",
    )
    run_name: str = Field(
        default="", description="W&B / MLflow run name; '' = the run directory's name."
    )
    wandb_mode: Literal["offline", "online"] = Field(
        default="offline",
        description="W&B mode: offline writes <run_dir>/wandb/offline-run-* (upload later "
        "with `wandb sync`); online needs WANDB_API_KEY and the network.",
    )
    mlflow_tracking_uri: str = Field(
        default="",
        description="MLflow tracking URI (a server's http(s)://..., or another store); "
        "'' = a local file store in <run_dir>/mlruns.",
    )

    @model_validator(mode="after")
    def _check(self) -> TrackingConfig:
        if len(set(self.report_to)) != len(self.report_to):
            raise ValueError(f"logging.report_to names a sink twice: {self.report_to}")
        return self


class MetricsSink(Protocol):
    """One tracking backend: ``log`` one step's scalars, ``close`` flushes and ends the run."""

    name: str

    def log(self, metrics: Mapping[str, float], step: int) -> None: ...

    def close(self) -> None: ...


def finite_scalars(record: Mapping[str, Any]) -> dict[str, float]:
    """The numbers of a metrics line as floats: bools, strings, None and NaN/inf left out.

    Args:
        record: one ``metrics.jsonl`` object (name -> value).

    Returns:
        name -> float for every finite int/float value (``step`` included; sinks drop it).
    """
    out = {}
    for name, value in record.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if math.isfinite(value):
            out[name] = float(value)
    return out


def _flatten(tree: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """Nested mapping -> {"a.b.c": str(value)} (MLflow params are flat strings)."""
    out: dict[str, str] = {}
    for key, value in tree.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(_flatten(value, name + "."))
        else:
            out[name] = json.dumps(value) if isinstance(value, list | tuple) else str(value)
    return out


class _TensorBoardSink:
    name = "tensorboard"

    def __init__(self, log_dir: Path, resume_step: int | None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step: events of steps >= it in older files are hidden (a resumed lineage).
        purge = resume_step + 1 if resume_step is not None else None
        self.writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge)

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        for name, value in metrics.items():
            self.writer.add_scalar(name, value, global_step=step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


class _WandbSink:
    name = "wandb"

    def __init__(
        self, config: TrackingConfig, run_dir: Path, run_id: str, settings: Mapping[str, Any]
    ) -> None:
        import wandb

        self.run = wandb.init(
            project=config.project,
            name=config.run_name or run_dir.name,
            id=run_id,
            resume="allow",
            dir=str(run_dir),
            mode=config.wandb_mode,
            config=dict(settings),
            # no stdout capture: the service's stdout/stderr carry its JSON logs
            settings=wandb.Settings(console="off", quiet=True),
        )

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        self.run.log(dict(metrics), step=step)

    def close(self) -> None:
        self.run.finish()


def _mlflow_uri(config: TrackingConfig, run_dir: Path) -> str:
    """The MLflow tracking URI: the configured one, else ``file://<run_dir>/mlruns``."""
    return config.mlflow_tracking_uri or (run_dir / "mlruns").resolve().as_uri()


class _MlflowSink:
    name = "mlflow"

    def __init__(
        self,
        config: TrackingConfig,
        run_dir: Path,
        run_id: str | None,
        settings: Mapping[str, Any],
    ) -> None:
        uri = _mlflow_uri(config, run_dir)
        if not config.mlflow_tracking_uri:
            # MLflow keeps its file store in maintenance mode behind this opt-in.
            os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
        from mlflow.entities import Param
        from mlflow.tracking import MlflowClient

        self.client = MlflowClient(tracking_uri=uri)
        self.uri = uri
        experiment = self.client.get_experiment_by_name(config.project)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(config.project)
        )
        if run_id is not None:
            self.client.update_run(run_id, status="RUNNING")
            self.run_id = run_id
        else:
            run = self.client.create_run(experiment_id, run_name=config.run_name or run_dir.name)
            self.run_id = run.info.run_id
            params = [Param(k, v[:6000]) for k, v in sorted(_flatten(settings).items())]
            for at in range(0, len(params), 100):  # MLflow's batch limit
                self.client.log_batch(self.run_id, params=params[at : at + 100])

    def log(self, metrics: Mapping[str, float], step: int) -> None:
        from mlflow.entities import Metric

        now_ms = int(time.time() * 1000)
        batch = [Metric(k, v, now_ms, step) for k, v in metrics.items()]
        for at in range(0, len(batch), 1000):  # MLflow's batch limit
            self.client.log_batch(self.run_id, metrics=batch[at : at + 1000])

    def close(self) -> None:
        self.client.set_terminated(self.run_id, status="FINISHED")


class Tracker:
    """Fans one step's metrics out to the open sinks (``open_tracker`` builds it).

    Args:
        sinks: the open sinks, in ``report_to`` order.
    """

    def __init__(self, sinks: Sequence[MetricsSink]) -> None:
        self.sinks = list(sinks)

    @property
    def names(self) -> list[str]:
        """Names of the sinks still open."""
        return [s.name for s in self.sinks]

    def log(self, record: Mapping[str, Any], step: int) -> None:
        """Send every finite number of ``record`` (``step`` aside) to each sink at ``step``.

        A sink that raises is logged with its traceback and closed; the others go on.
        """
        scalars = finite_scalars(record)
        scalars.pop("step", None)
        for sink in list(self.sinks):
            try:
                sink.log(scalars, step)
            except Exception:
                log.exception("tracking sink %s failed at step %d: closed", sink.name, step)
                self.sinks.remove(sink)
                self._close(sink)

    def close(self) -> None:
        """Flush and close every sink (W&B ``finish``, MLflow run FINISHED); idempotent."""
        sinks, self.sinks = self.sinks, []
        for sink in sinks:
            self._close(sink)

    @staticmethod
    def _close(sink: MetricsSink) -> None:
        try:
            sink.close()
        except Exception:
            log.exception("tracking sink %s failed to close", sink.name)


def _load_ids(path: Path) -> dict[str, str]:
    if not path.is_file():
        return {}
    try:
        ids = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"{path} is not JSON: {exc}") from None
    if not isinstance(ids, dict):
        raise InvalidArgumentError(f"{path} is not a JSON object")
    return {str(k): str(v) for k, v in ids.items()}


def _save_ids(path: Path, ids: Mapping[str, str]) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(dict(ids), indent=1, sort_keys=True) + "\n")
    os.replace(tmp, path)


def _wait_for_a_new_second(previous: str | None) -> None:
    """Sleep until the wall-clock second is past the previous open's end (< 1 s).

    TensorBoard names an event file by its start second (then host and pid) and reads a
    directory's files in name order; W&B names an offline folder by its start second. A
    learner restarted within the same second would sort before the run it resumes (its
    purge marker read first, the lost lineage's values after it) or share its W&B folder.
    """
    if previous is None:
        return
    try:
        last = float(previous)
    except ValueError:
        return
    wait = math.floor(last) + 1 - time.time()
    if 0 < wait <= 1:
        time.sleep(wait)


def open_tracker(
    config: TrackingConfig,
    run_dir: str | Path,
    *,
    settings: Mapping[str, Any] | None = None,
    resume_step: int | None = None,
) -> Tracker:
    """Open the sinks of ``config.report_to`` for the run in ``run_dir``.

    Args:
        config: the ``logging`` settings.
        run_dir: the run directory (created if needed); TensorBoard writes
            ``<run_dir>/tensorboard``, W&B ``<run_dir>/wandb``, MLflow ``<run_dir>/mlruns``;
            the W&B and MLflow run ids are kept in ``<run_dir>/tracking.json``.
        settings: the resolved settings (JSON-able), W&B's config and MLflow's params.
        resume_step: the step this learner restarts from (its checkpoint's; 0 when it has
            none): TensorBoard hides values of later steps written before (a lost lineage);
            None writes no purge marker. W&B and MLflow reopen the runs whose ids
            ``tracking.json`` holds, whatever the step.

    Returns:
        A ``Tracker`` over the open sinks (none when ``report_to`` is empty).

    Raises:
        FailedPreconditionError: a sink's package is not installed (the message names it and
            the ``tracking`` extra).
        InvalidArgumentError: ``tracking.json`` is damaged.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ids_path = run_dir / "tracking.json"
    ids = _load_ids(ids_path)
    _wait_for_a_new_second(ids.get("opened_unix_s"))
    settings = dict(settings or {})
    sinks: list[MetricsSink] = []
    try:
        for name in config.report_to:
            try:
                if name == "tensorboard":
                    sinks.append(_TensorBoardSink(run_dir / "tensorboard", resume_step))
                elif name == "wandb":
                    ids.setdefault("wandb_run_id", secrets.token_hex(8))
                    _save_ids(ids_path, ids)
                    sinks.append(_WandbSink(config, run_dir, ids["wandb_run_id"], settings))
                elif name == "mlflow":
                    same_store = ids.get("mlflow_tracking_uri") == _mlflow_uri(config, run_dir)
                    run_id = ids.get("mlflow_run_id") if same_store else None
                    sink = _MlflowSink(config, run_dir, run_id, settings)
                    ids["mlflow_run_id"], ids["mlflow_tracking_uri"] = sink.run_id, sink.uri
                    _save_ids(ids_path, ids)
                    sinks.append(sink)
                else:  # pragma: no cover - the config's Literal refuses it first
                    raise InvalidArgumentError(f"unknown tracking sink {name!r}: {REPORT_TO}")
            except ImportError as exc:
                raise FailedPreconditionError(
                    f"logging.report_to has {name!r} but {_PACKAGES[name]} is not installed "
                    f"({exc}); pip install 'grpo-pipeline[tracking]'"
                ) from exc
    except BaseException:
        Tracker(sinks).close()
        raise
    # After every sink named its files: the next open starts in a later second than all.
    ids["opened_unix_s"] = repr(time.time())
    _save_ids(ids_path, ids)
    log.info("tracking", extra={"sinks": [s.name for s in sinks], "run_dir": str(run_dir)})
    return Tracker(sinks)
