"""Learner ranks as separate processes, one per pod (``world_size`` W > 1, ``dist_init: env://``).

The chart runs the learner as a StatefulSet of W pods, each running ``grpo serve learner`` with
``$RANK`` (the pod ordinal), ``$WORLD_SIZE``, ``$MASTER_ADDR`` (pod 0's stable DNS name) and
``$MASTER_PORT``; every process joins ``torch.distributed`` through the env:// rendezvous at
rank 0 (the same as ``grpo serve learner`` run by hand on W machines or W loopback processes).

- Rank 0 is the learner service as with one process: it reads the groups stream, trains its
  shard, checkpoints, publishes, serves ``grpo.v1.Learner`` and ``grpo.v1.Weights``, and hands
  each batch to the other ranks (``LearnerLoop`` with a ``DataParallel``).
- Ranks r > 0 run ``FollowerRank``: do what rank 0 commands (``follow``: train their shard
  of each batch, join the full-state gather of an FSDP model, heartbeat) until rank 0 sends
  stop. They serve only health and metrics.
- Pods share no filesystem: rank 0 sends its initial model folder (when ``model_path`` is a
  local folder; a hub id is resolved by every rank) and the checkpoint it resumes from over the
  process group (``grpo.learner.distributed.broadcast_folder``); each follower keeps the copies
  under ``<run_dir>/rank-<r>/`` on its own volume. All ranks then hold identical parameters
  and optimizer states, as with in-process ranks.

A rank that dies makes the next collective fail on the others: gloo reports a closed
connection at once (the process died), and any rank that hears nothing for ``dist_timeout_s``
(a lost node, a hung process; NCCL too) fails its collective. Rank 0 sends a heartbeat after
``dist_heartbeat_s`` without a batch, so an idle world notices as well, and no follower ever
waits ``dist_timeout_s`` on a healthy rank 0. Every survivor then exits non-zero (its worker
ends, ``serve`` reports it dead), Kubernetes restarts the pods, and the world forms again from
rank 0's last checkpoint: the groups trained after it are still pending in Redis and are
trained again, those before it are skipped (the exactly-once protocol of
``grpo.services.learner.loop``; tests/learner_service/test_rank_failure.py kills a rank).
A rank restarted while the old rank 0 still runs waits in the rendezvous, or fails it after
``dist_timeout_s`` and restarts again, until the new rank 0 is up.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

import torch

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner.checkpoint import intact_checkpoint, load_checkpoint
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.registry import ServiceParts

__all__ = [
    "FollowerRank",
    "build_follower",
    "env_rank",
    "follow",
    "share_checkpoint",
    "share_model",
]

log = logging.getLogger(__name__)


def env_rank(settings: LearnerServiceSettings, environ: dict[str, str] | None = None) -> int | None:
    """This process' rank when the ranks are separate processes, else None.

    Separate processes = ``world_size`` > 1 and ``dist_init`` "env://"; the rank is ``$RANK``.

    Raises:
        FailedPreconditionError: ``$RANK`` is missing or not a number.
        InvalidArgumentError: the rank is outside [0, world_size), or ``$WORLD_SIZE``
            disagrees with ``world_size``.
    """
    env = os.environ if environ is None else environ
    if settings.world_size < 2 or settings.dist_init != "env://":
        return None
    raw = env.get("RANK", "")
    if not raw.isdigit():
        raise FailedPreconditionError(
            f"dist_init env:// with world_size {settings.world_size} needs $RANK (this "
            f"process' rank, the pod ordinal in the chart), got {raw!r}"
        )
    rank = int(raw)
    if rank >= settings.world_size:
        raise InvalidArgumentError(f"$RANK {rank} is not below world_size {settings.world_size}")
    declared = env.get("WORLD_SIZE", "")
    if declared and declared != str(settings.world_size):
        raise InvalidArgumentError(
            f"$WORLD_SIZE {declared} disagrees with world_size {settings.world_size}"
        )
    return rank


def _rank_dir(settings: LearnerServiceSettings, rank: int) -> Path:
    return Path(settings.run_dir) / f"rank-{rank}"


def share_model(parallel: Any, settings: LearnerServiceSettings) -> str:
    """Rank 0's initial model folder on every rank; returns the ``model_path`` to load here.

    A ``model_path`` that is not a folder on rank 0 (a hub id) is returned unchanged on every
    rank (each resolves it itself).
    """
    local = Path(settings.model_path)
    source = local if parallel.is_main and local.is_dir() else None
    from grpo.learner.distributed import broadcast_folder

    got = broadcast_folder(parallel, source, _rank_dir(settings, parallel.rank) / "model")
    return str(settings.model_path) if got is None else str(got)


def share_checkpoint(parallel: Any, settings: LearnerServiceSettings) -> Path | None:
    """Rank 0's newest checkpoint folder on every rank (None when there is none)."""
    from grpo.learner.distributed import broadcast_folder

    source = (
        intact_checkpoint(Path(settings.run_dir) / "checkpoints")[0] if parallel.is_main else None
    )
    return broadcast_folder(parallel, source, _rank_dir(settings, parallel.rank) / "checkpoint")


def follow(parallel: Any, trainer: Any) -> None:
    """Rank r > 0: do what rank 0 commands until it sends ``stop``.

    ``train``: step on this rank's whole groups of the batch (``shard_groups``);
    ``gather_weights`` / ``gather_checkpoint``: join ``gather_full_state`` of the (sharded)
    model / model and optimizer; ``heartbeat``: a barrier with every rank (rank 0 learns that
    this rank still answers).

    Raises:
        RuntimeError: a collective failed (a rank died, or none answered within the process
            group's timeout).
    """
    from grpo.learner.distributed import gather_full_state, shard_groups
    from grpo.services.learner.batch import group_rows

    while True:
        command = parallel.broadcast_command()
        if command.kind == "stop":
            return
        if command.kind == "train":
            shard = shard_groups(command.groups, parallel.rank, parallel.world_size)
            trainer.step([group_rows(g) for g in shard])
        elif command.kind == "gather_weights":
            gather_full_state(trainer.model)
        elif command.kind == "gather_checkpoint":
            gather_full_state(trainer.model, trainer.optimizer)
        elif command.kind == "heartbeat":
            parallel.barrier()


class FollowerRank:
    """Rank r > 0 in its own process: ``follow`` in a thread (a ``BackgroundWorker``).

    The loop ends when rank 0 sends stop or a collective fails; ``is_alive`` then turns False
    and ``serve`` exits non-zero, so the pod restarts and rejoins the world.
    """

    def __init__(self, parallel: Any, trainer: Any) -> None:
        self.parallel = parallel
        self.trainer = trainer
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Run the loop in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="learner-rank", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        p = self.parallel
        try:
            follow(p, self.trainer)
            log.info("rank 0 stopped the world", extra={"rank": p.rank})
        except BaseException as exc:  # a dead peer: exit so the pod restarts
            self.error = exc
            log.exception("learner rank failed; reporting dead", extra={"rank": p.rank})

    def stop(self, timeout_s: float) -> None:
        """Join the loop (it ends with rank 0's stop signal)."""
        if self._thread is not None:
            self._thread.join(timeout_s)

    def is_alive(self) -> bool:
        """True while the loop runs."""
        return self._thread is not None and self._thread.is_alive()


def build_follower(settings: LearnerServiceSettings, rank: int) -> ServiceParts:
    """Join the world as ``rank`` > 0, receive the model and checkpoint, return the worker.

    Raises:
        RuntimeError: the rendezvous or a broadcast failed.
    """
    from grpo.learner.distributed import init_data_parallel
    from grpo.services.learner.service import build_trainer

    parallel = init_data_parallel(
        rank,
        settings.world_size,
        "env://",
        fsdp=settings.fsdp,
        timeout_s=settings.dist_timeout_s,
    )
    model_path = share_model(parallel, settings)
    trainer, _ = build_trainer(settings.model_copy(update={"model_path": model_path}), parallel)
    checkpoint = share_checkpoint(parallel, settings)
    if checkpoint is not None:
        state = load_checkpoint(
            checkpoint,
            model=trainer.model,
            optimizer=trainer.optimizer,
            scheduler=trainer.scheduler,
            critic=trainer.critic,
        )
        trainer.step_count = state.step

    def close() -> None:
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()

    return ServiceParts(bindings=[], workers=[FollowerRank(parallel, trainer)], close=close)
