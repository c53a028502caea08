"""Worker of the FSDP checkpoint test: ranks of a gloo world train an FSDP2-sharded tiny model,
checkpoint it from the full state gathered on rank 0, and resume from checkpoints.

Lives in its own module so ``torch.multiprocessing.spawn`` can import it by name in children.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from grpo.v1 import common_pb2

ALGO = {"clip_high": 0.28, "process_weight": 0.5, "tis_cap": 2.0}
TRAINER = {"lr": 1e-3, "warmup_steps": 0, "micro_batch_size": 3}


def build(model_dir: str, parallel: Any | None) -> Any:
    """The service's trainer (``grpo.learner.loading.build_trainer``) in float64: sharded per
    decoder layer when ``parallel.fsdp``."""
    from grpo.learner.config import LearnerAlgoConfig
    from grpo.learner.loading import build_trainer
    from grpo.learner.trainer import TrainerConfig

    trainer, _ = build_trainer(
        model_dir,
        LearnerAlgoConfig(**ALGO),
        TrainerConfig(**TRAINER),
        dtype="float64",
        parallel=parallel,
    )
    return trainer


def step(trainer: Any, groups: list[common_pb2.Group], rank: int, world_size: int) -> None:
    """One trainer step on this rank's whole groups."""
    from grpo.learner.distributed import shard_groups
    from grpo.services.learner.batch import group_rows

    trainer.step([group_rows(g) for g in shard_groups(groups, rank, world_size)])


def save(trainer: Any, root: Path, parallel: Any | None) -> Path | None:
    """Checkpoint ``trainer`` under ``root`` (every rank calls it; rank 0 writes)."""
    from grpo.learner.checkpoint import CheckpointState, save_checkpoint
    from grpo.learner.distributed import gather_full_state

    full = None
    if parallel is not None:
        full = gather_full_state(trainer.model, trainer.optimizer)
        if not parallel.is_main:
            return None
    return save_checkpoint(
        root,
        model=trainer.model,
        optimizer=trainer.optimizer,
        scheduler=trainer.scheduler,
        state=CheckpointState(step=trainer.step_count, policy_version=trainer.step_count),
        full_state=full,
    )


def resume(trainer: Any, checkpoint: Path) -> None:
    """Restore ``trainer`` from ``checkpoint`` (a collective for a sharded model)."""
    from grpo.learner.checkpoint import load_checkpoint

    state = load_checkpoint(
        checkpoint, model=trainer.model, optimizer=trainer.optimizer, scheduler=trainer.scheduler
    )
    trainer.step_count = state.step


def run_rank(
    rank: int,
    world_size: int,
    init_file: str,
    model_dir: str,
    first: list[bytes],
    second: list[bytes],
    plain_checkpoint: str,
    out_dir: str,
) -> None:
    """Spawn target. Writes, from rank 0, under ``out_dir``:

    - ``fsdp/step-1``: a step on ``first`` from the initial model, sharded;
    - ``fsdp-resumed/step-2``: fresh sharded trainers resumed from ``fsdp/step-1``, a step on
      ``second``;
    - ``from-plain/step-2``: the same, resumed from ``plain_checkpoint`` (written without FSDP).

    A sharded model without its gathered state must be refused by ``save_checkpoint``.
    """
    import pytest
    import torch.distributed as dist

    from grpo.errors import InvalidArgumentError
    from grpo.learner.checkpoint import CheckpointState, save_checkpoint
    from grpo.learner.distributed import init_data_parallel, is_sharded

    torch.set_num_threads(1)
    parallel = init_data_parallel(
        rank, world_size, f"file://{init_file}", backend="gloo", fsdp=True, timeout_s=120
    )
    a, b = ([common_pb2.Group.FromString(x) for x in blobs] for blobs in (first, second))
    out = Path(out_dir)

    trainer = build(model_dir, parallel)
    assert is_sharded(trainer.model)
    step(trainer, a, rank, world_size)
    if rank == 0:
        with pytest.raises(InvalidArgumentError, match="full_state"):
            save_checkpoint(
                out / "refused",
                model=trainer.model,
                optimizer=trainer.optimizer,
                scheduler=trainer.scheduler,
                state=CheckpointState(step=1, policy_version=1),
            )
    save(trainer, out / "fsdp", parallel)
    dist.barrier()  # rank 0's folder is complete before anyone reads it

    for source, dest in ((out / "fsdp" / "step-00000001", "fsdp-resumed"),
                         (Path(plain_checkpoint), "from-plain")):  # fmt: skip
        trainer = build(model_dir, parallel)
        resume(trainer, source)
        step(trainer, b, rank, world_size)
        save(trainer, out / dest, parallel)
    dist.destroy_process_group()
