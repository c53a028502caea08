"""Training, held-out and SFT task sets of a run (from ``RunConfig.data``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from grpo.errors import InvalidArgumentError
from grpo.services.datasets import (
    arith_tasks,
    load_gsm8k,
    load_humaneval,
    load_math500,
    worked_examples,
)
from grpo.services.pipeline.config import RunConfig
from grpo.v1 import common_pb2

__all__ = ["RunTasks", "load_run_tasks"]


@dataclass(frozen=True)
class RunTasks:
    """Task sets of a run.

    Attributes:
        train: prompts fed to the rollout workers.
        heldout: greedy-accuracy set, disjoint from ``train`` (by task id).
        sft: (prompt, worked solution) pairs for the warm start (empty when SFT is off or the
            source has no worked solutions).
        task_type: the routing key of the tasks.
        dev: prompts that decide when SFT stops (``model.sft.target_accuracy``), disjoint from
            ``heldout`` so the reported accuracies are not selected on; empty when unused.
    """

    train: list[common_pb2.Task]
    heldout: list[common_pb2.Task]
    sft: list[tuple[str, str]]
    task_type: str
    dev: list[common_pb2.Task] = field(default_factory=list)


def _split(
    tasks: list[common_pb2.Task], train_size: int, heldout_size: int
) -> tuple[list[common_pb2.Task], list[common_pb2.Task]]:
    if heldout_size >= len(tasks):
        raise InvalidArgumentError(
            f"data.heldout_size={heldout_size} leaves no training task out of {len(tasks)}"
        )
    heldout = tasks[len(tasks) - heldout_size :] if heldout_size else []
    train = tasks[: len(tasks) - heldout_size]
    return (train[:train_size] if train_size else train), heldout


def load_run_tasks(config: RunConfig) -> RunTasks:
    """Build the task sets described by ``config.data`` (and ``config.model.sft``).

    Arithmetic: the held-out set is drawn first (seed + 1), then training, SFT (seed + 2) and
    dev (seed + 3, only with ``model.sft.target_accuracy``) tasks are drawn excluding its ids.
    GSM8K: train split for training, test split for held-out. MATH-500 and HumanEval: the last
    ``heldout_size`` items are held out.

    Raises:
        InvalidArgumentError: sizes that cannot be met.
        NotFoundError: the dataset folder is missing.
    """
    data = config.data
    sft_cfg = config.model.sft
    sft: list[tuple[str, str]] = []
    if data.source == "arith":
        arith = dict(
            min_digits=data.arith.min_digits, max_digits=data.arith.max_digits, ops=data.arith.ops
        )
        heldout = arith_tasks(data.heldout_size, seed=data.seed + 1, **arith)  # type: ignore[arg-type]
        held_ids = {t.id for t in heldout}
        train = arith_tasks(data.train_size, seed=data.seed, exclude_ids=held_ids, **arith)  # type: ignore[arg-type]
        if sft_cfg.enabled:
            sft_tasks = arith_tasks(
                sft_cfg.examples,
                seed=data.seed + 2,
                exclude_ids=held_ids,
                **arith,  # type: ignore[arg-type]
            )
            sft = worked_examples(sft_tasks)
        dev = []
        if sft_cfg.enabled and sft_cfg.target_accuracy > 0:
            dev = arith_tasks(
                sft_cfg.dev_size,
                seed=data.seed + 3,
                exclude_ids=held_ids,
                **arith,  # type: ignore[arg-type]
            )
        return RunTasks(train=train, heldout=heldout, sft=sft, task_type="arith", dev=dev)
    if data.source == "gsm8k":
        train = load_gsm8k("train")
        train = train[: data.train_size] if data.train_size else train
        heldout = load_gsm8k("test")[: data.heldout_size]
        return RunTasks(train=train, heldout=heldout, sft=sft, task_type="math")
    if data.source == "math500":
        train, heldout = _split(load_math500(), data.train_size, data.heldout_size)
        return RunTasks(train=train, heldout=heldout, sft=sft, task_type="math")
    train, heldout = _split(load_humaneval(), data.train_size, data.heldout_size)
    return RunTasks(train=train, heldout=heldout, sft=sft, task_type="code")
