"""The published policy: the one reader of the policy key, and snapshots of published weights.

The learner publishes each policy version as a ``save_pretrained`` folder plus a serialized
``PolicyWeights`` at ``StreamNames.policy_key`` (``grpo.services.learner.publish``); rollout
workers, the learner and the run driver read that key here, so no deployable imports another's
internals to learn which policy is current.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import redis

from grpo.integrity import DamagedError, NoDigestsError, check_digests
from grpo.v1 import common_pb2

__all__ = ["published_version", "read_policy", "snapshot_policy"]


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
        ``dest``, its files checked against the digests recorded at publication
        (``grpo.integrity``; a folder without digests is taken as it is).

    Raises:
        NotFoundError: ``folder`` has no ``config.json`` or a file vanished while it was
            linked (the version was pruned first; nothing is left at ``dest``).
        DamagedError: a file differs from its recorded digest (nothing is left at ``dest``).
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
    try:
        check_digests(dest, recorded_as=folder)
    except NoDigestsError:
        pass
    except DamagedError as exc:
        shutil.rmtree(dest, ignore_errors=True)
        raise DamagedError(f"published policy {folder} is damaged: {exc}") from exc
    return dest


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except FileNotFoundError:
        raise
    except OSError:
        shutil.copy2(src, dst)  # another filesystem (EXDEV) or no hard links there
