"""Read back what the tracking sinks wrote, with each backend's own reader where it has one.

- TensorBoard: ``EventAccumulator`` (tensorboard's event reader; purges a resumed lineage's
  orphaned steps as the viewer does).
- W&B offline: the ``.wandb`` file is a LevelDB-style log of ``wandb.proto`` ``Record``
  messages (7-byte header ``:W&B`` + magic + version, 32 KiB blocks, each record chunk with a
  CRC32, a length and a type). wandb ships no Python reader any more (its core is in Go), so
  the chunks are joined here and each payload parsed with wandb's own ``Record`` message.
- MLflow: ``MlflowClient.get_metric_history``.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

_BLOCK = 32 * 1024
_HEADER = 7  # crc32 (4), length (2), type (1)
_FULL, _FIRST, _MIDDLE, _LAST = 1, 2, 3, 4


def tensorboard_scalars(log_dir: Path) -> dict[str, dict[int, float]]:
    """tag -> {step: value} of every scalar in the event files under ``log_dir``."""
    from tensorboard.backend.event_processing.event_accumulator import (
        SCALARS,
        EventAccumulator,
    )

    acc = EventAccumulator(str(log_dir), size_guidance={SCALARS: 0})  # 0 = keep all
    acc.Reload()
    return {
        tag: {int(e.step): float(e.value) for e in acc.Scalars(tag)}
        for tag in acc.Tags()["scalars"]
    }


def _records(path: Path) -> list[bytes]:
    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B data file"
    out: list[bytes] = []
    pending = b""
    pos = _HEADER
    while pos + _HEADER <= len(data):
        left_in_block = _BLOCK - pos % _BLOCK
        if left_in_block < _HEADER:  # block trailer: padding
            pos += left_in_block
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + _HEADER])
        chunk = data[pos + _HEADER : pos + _HEADER + length]
        pos += _HEADER + length
        if kind == 0 and length == 0:  # zero padding at the end of a block
            continue
        if kind == _FULL:
            out.append(chunk)
        elif kind == _FIRST:
            pending = chunk
        elif kind == _MIDDLE:
            pending += chunk
        elif kind == _LAST:
            out.append(pending + chunk)
            pending = b""
    return out


def wandb_history(run_folder: Path) -> dict[int, dict[str, float]]:
    """step -> {metric: value} of the history rows in ``run_folder/run-*.wandb``."""
    from wandb.proto import wandb_internal_pb2

    (path,) = run_folder.glob("run-*.wandb")
    rows: dict[int, dict[str, float]] = {}
    for payload in _records(path):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(payload)
        if record.WhichOneof("record_type") != "history":
            continue
        items = {
            item.key or "/".join(item.nested_key): json.loads(item.value_json)
            for item in record.history.item
        }
        step = int(items.pop("_step"))
        rows[step] = {k: v for k, v in items.items() if not k.startswith("_")}
    return rows


def mlflow_history(tracking_uri: str, run_id: str, key: str) -> dict[int, list[float]]:
    """step -> values (in logging order) of metric ``key`` of an MLflow run."""
    import os

    from mlflow.tracking import MlflowClient

    os.environ.setdefault("MLFLOW_ALLOW_FILE_STORE", "true")
    out: dict[int, list[float]] = {}
    history = MlflowClient(tracking_uri=tracking_uri).get_metric_history(run_id, key)
    for m in sorted(history, key=lambda m: m.timestamp):
        out.setdefault(int(m.step), []).append(float(m.value))
    return out
