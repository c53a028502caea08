"""Weights publishing: a ``save_pretrained`` folder per policy version plus the Redis key.

``publish_weights`` writes ``<run_dir>/weights/v<version>`` (``model.safetensors``,
``config.json`` and the tokenizer files, loadable by every generation backend) into a temporary
folder, renames it into place (atomic), and only then SETs the serialized ``PolicyWeights`` at
``StreamNames.policy_key``; a reader that sees a version therefore always finds its folder
complete. Versions are monotonic: a restarted learner continues after the highest version in
Redis, never reusing a number generation has already loaded. Old folders beyond ``keep`` are
removed (generation loads a folder within seconds of its publication).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import redis

from grpo.v1 import common_pb2

__all__ = ["publish_weights", "published_version", "weights_dir"]


def weights_dir(run_dir: Path, version: int) -> Path:
    """Folder of policy ``version``: ``<run_dir>/weights/v<version>``."""
    return run_dir / "weights" / f"v{version}"


def published_version(client: redis.Redis, policy_key: str) -> int:
    """The policy version currently at ``policy_key``, or -1 when nothing is published."""
    raw = client.get(policy_key)
    if raw is None:
        return -1
    return int(common_pb2.PolicyWeights.FromString(raw).policy_version)  # type: ignore[arg-type]


def publish_weights(
    client: redis.Redis,
    policy_key: str,
    *,
    model: Any,
    tokenizer: Any,
    run_dir: Path,
    version: int,
    step: int,
    keep: int = 3,
) -> common_pb2.PolicyWeights:
    """Save the model as policy ``version`` and announce it in Redis.

    Args:
        client: Redis connection.
        policy_key: ``StreamNames.policy_key``.
        model: a transformers ``PreTrainedModel`` (saved with ``save_pretrained``).
        tokenizer: saved beside it (``save_pretrained``) so the folder is self-contained.
        run_dir: the run directory.
        version: the new policy version (greater than any published one).
        step: learner step that produced the weights.
        keep: how many most recent version folders to keep (>= 1).

    Returns:
        The ``PolicyWeights`` written to Redis.

    Raises:
        redis.RedisError: the SET failed (the folder stays; a retry republishes it).
    """
    final = weights_dir(run_dir, version)
    final.parent.mkdir(parents=True, exist_ok=True)
    tmp = final.parent / f".tmp-v{version}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    if final.exists():  # a crashed earlier attempt at this version
        shutil.rmtree(final)
    os.rename(tmp, final)
    weights = common_pb2.PolicyWeights(
        policy_version=version,
        path=str(final.resolve()),
        step=step,
        published_unix_s=time.time(),
    )
    client.set(policy_key, weights.SerializeToString())
    folders = sorted(
        (p for p in final.parent.glob("v*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:])
    )
    for old in folders[: -max(1, keep)]:
        shutil.rmtree(old, ignore_errors=True)
    return weights
