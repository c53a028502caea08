"""Weights publishing: a ``save_pretrained`` folder per policy version plus the Redis key.

``publish_weights`` writes ``<run_dir>/weights/v<version>`` (``model.safetensors``,
``config.json`` and the tokenizer files, loadable by every generation backend) into a temporary
folder, renames it into place (atomic), and only then SETs the serialized ``PolicyWeights`` at
``StreamNames.policy_key``; a reader that sees a version therefore always finds its folder
complete. Versions are never reused: ``next_version`` is one above the highest version in
Redis *and* on disk, so a learner resumed from a checkpoint older than the newest published
weights (the steps after it were lost) publishes a fresh number rather than one generation has
already loaded. Old folders beyond ``keep`` are removed (generation loads a folder within
seconds of its publication), but never the version just written nor the one announced in Redis.

``read_policy`` is the one reader of the policy key (rollout workers, the learner, the run
driver).
"""

from __future__ import annotations

import os
import shutil
import time
from pathlib import Path
from typing import Any

import redis

from grpo.v1 import common_pb2

__all__ = [
    "highest_folder_version",
    "next_version",
    "publish_weights",
    "published_version",
    "read_policy",
    "snapshot_policy",
    "weights_dir",
]


def weights_dir(run_dir: Path, version: int) -> Path:
    """Folder of policy ``version``: ``<run_dir>/weights/v<version>``."""
    return run_dir / "weights" / f"v{version}"


def snapshot_policy(folder: Path, dest: Path) -> Path:
    """A private copy of a published policy folder that pruning cannot take away.

    Files are hard-linked (no bytes copied; copied when ``dest`` is on another filesystem), so
    the snapshot costs nothing while ``folder`` exists and keeps its files once the learner's
    pruning (``publish_weights(keep=...)``) removes ``folder``. The caller removes ``dest``
    when done with it.

    Args:
        folder: a ``weights_dir`` folder (a ``save_pretrained`` folder).
        dest: where the snapshot goes (replaced when it exists).

    Returns:
        ``dest``.

    Raises:
        NotFoundError: ``folder`` has no ``config.json`` or a file vanished while it was
            linked (the version was pruned first; nothing is left at ``dest``).
    """
    from grpo.errors import NotFoundError

    shutil.rmtree(dest, ignore_errors=True)
    try:
        if not (folder / "config.json").is_file():
            raise FileNotFoundError(folder / "config.json")
        shutil.copytree(folder, dest, copy_function=_link_or_copy)
    except (FileNotFoundError, shutil.Error) as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise NotFoundError(f"policy folder {folder} is gone or incomplete: {exc}") from exc
    return dest


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except FileNotFoundError:
        raise
    except OSError:
        shutil.copy2(src, dst)  # another filesystem (EXDEV) or no hard links there


def _policy_key(names_or_key: Any) -> str:
    return names_or_key if isinstance(names_or_key, str) else str(names_or_key.policy_key)


def read_policy(client: redis.Redis, names_or_key: Any) -> common_pb2.PolicyWeights | None:
    """The ``PolicyWeights`` announced at the policy key, or None when nothing is published.

    Args:
        client: Redis connection (binary responses).
        names_or_key: the run's ``StreamNames`` or the policy key itself.

    Raises:
        redis.RedisError: Redis cannot be read.
        google.protobuf.message.DecodeError: the key holds something else.
    """
    raw = client.get(_policy_key(names_or_key))
    if raw is None:
        return None
    return common_pb2.PolicyWeights.FromString(raw)  # type: ignore[arg-type]


def published_version(client: redis.Redis, policy_key: Any) -> int:
    """The policy version currently at the policy key, or -1 when nothing is published."""
    weights = read_policy(client, policy_key)
    return -1 if weights is None else int(weights.policy_version)


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
    in_use = published_version(client, policy_key)
    for old in _version_folders(run_dir)[: -max(1, keep)]:
        if int(old.name[1:]) not in (version, in_use):
            shutil.rmtree(old, ignore_errors=True)
    return weights
