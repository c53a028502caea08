"""Weights publishing: a ``save_pretrained`` folder per policy version plus the Redis key.

``publish_weights`` writes ``<run_dir>/weights/v<version>`` (``model.safetensors``,
``config.json`` and the tokenizer files, loadable by every generation backend, and
``DIGESTS.json``: ``grpo.integrity``, checked before a version is loaded or served) into a
temporary folder, renames it into place (atomic), and only then SETs the serialized
``PolicyWeights`` at ``StreamNames.policy_key``; a reader that sees a version therefore always
finds its folder complete. Versions are never reused: ``next_version`` is one above the highest
version in Redis *and* on disk, so a learner resumed from a checkpoint older than the newest
published weights (the steps after it were lost) publishes a fresh number rather than one
generation has already loaded. Old folders beyond ``keep`` are removed (generation loads a
folder within seconds of its publication), but never the version just written nor the one
announced in Redis.

The policy key is read with ``grpo.services.runtime.policy.read_policy`` (rollout workers, the
learner, the run driver).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import redis

from grpo.integrity import record_digests, write_digests
from grpo.services.runtime.policy import published_version
from grpo.v1 import common_pb2

__all__ = [
    "highest_folder_version",
    "next_version",
    "publish_weights",
    "weights_dir",
]


def weights_dir(run_dir: Path, version: int) -> Path:
    """Folder of policy ``version``: ``<run_dir>/weights/v<version>``."""
    return run_dir / "weights" / f"v{version}"


def _version_folders(run_dir: Path) -> list[Path]:
    root = run_dir / "weights"
    if not root.is_dir():
        return []
    return sorted(
        (p for p in root.glob("v*") if p.name[1:].isdigit()), key=lambda p: int(p.name[1:])
    )


def highest_folder_version(run_dir: Path) -> int:
    """The highest ``v<N>`` folder under ``<run_dir>/weights``, or -1 when there is none."""
    folders = _version_folders(run_dir)
    return int(folders[-1].name[1:]) if folders else -1


def next_version(client: redis.Redis, policy_key: Any, run_dir: Path) -> int:
    """One above every version announced in Redis or present on disk (never a reused number)."""
    return max(published_version(client, policy_key), highest_folder_version(run_dir)) + 1


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
        version: the new policy version (``next_version``: above any published one).
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
    write_digests(tmp)  # checked by every reader before it loads the version
    if final.exists():  # a crashed earlier attempt at this version
        shutil.rmtree(final)
    os.rename(tmp, final)
    record_digests(final)  # the parent vouches for the manifest (grpo.integrity)
    weights = common_pb2.PolicyWeights(
        policy_version=version,
        path=str(final.resolve()),
        step=step,
        published_unix_s=time.time(),
    )
    client.set(policy_key, weights.SerializeToString())
    in_use = published_version(client, policy_key)
    for old in _version_folders(run_dir)[: -max(1, keep)]:
        if int(old.name[1:]) not in (version, in_use):
            shutil.rmtree(old, ignore_errors=True)
    return weights
