"""The run directory's per-step metrics and per-group log (JSON Lines).

``metrics.jsonl``: one object per learner step with at least ``step``, ``policy_version``,
``wall_clock_s`` (seconds since the run's first learner start), ``generated_tokens``
(cumulative response tokens of the groups trained on) and every trainer diagnostic.
``groups.jsonl``: one object per trained group (``step``, ``group_id``, rewards, statistics).

On resume from a checkpoint at step s, lines with ``step > s`` are dropped (those steps were
lost with the process and are trained again), so both files always describe one training
lineage: every group appears once.

Each metrics line also goes to the run's tracking sinks (``grpo.learner.tracking``: TensorBoard
by default, W&B, MLflow), at its step, once it is written.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from grpo.learner.tracking import Tracker

__all__ = ["RunLog"]


def _clean(value: Any) -> Any:
    """JSON-safe value: non-finite floats become None (JSON has no NaN)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


class RunLog:
    """Appends step metrics and group records under ``run_dir``.

    Args:
        run_dir: the run directory (created if needed).
        tracker: the tracking sinks each metrics line is sent to (None = none yet; set
            ``tracker`` once they are open).
    """

    def __init__(self, run_dir: Path, tracker: Tracker | None = None) -> None:
        run_dir.mkdir(parents=True, exist_ok=True)
        self.metrics_path = run_dir / "metrics.jsonl"
        self.groups_path = run_dir / "groups.jsonl"
        self.tracker = tracker

    def truncate_after(self, step: int) -> None:
        """Drop records of steps after ``step`` from both files (resume); atomic rewrite."""
        for path in (self.metrics_path, self.groups_path):
            if not path.is_file():
                continue
            kept = []
            for line in path.read_text().splitlines():
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a killed process
                if isinstance(rec, dict) and int(rec.get("step", 0)) <= step:
                    kept.append(line)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text("".join(line + "\n" for line in kept))
            os.replace(tmp, path)

    def write_step(self, metrics: Mapping[str, Any], groups: Sequence[Mapping[str, Any]]) -> None:
        """Append one step's metrics line and its group lines (flushed, not fsynced), then
        send the metrics line to the tracking sinks at its ``step``."""
        with open(self.groups_path, "a") as fh:
            for rec in groups:
                fh.write(json.dumps(_clean(dict(rec)), sort_keys=True) + "\n")
        with open(self.metrics_path, "a") as fh:
            fh.write(json.dumps(_clean(dict(metrics)), sort_keys=True) + "\n")
        if self.tracker is not None:
            self.tracker.log(metrics, int(metrics["step"]))

    def close(self) -> None:
        """Close the tracking sinks (flush TensorBoard, finish the W&B and MLflow runs)."""
        if self.tracker is not None:
            self.tracker.close()
