"""Training, held-out and SFT task sets of a run (from ``RunConfig.data``): the shipped
sources (synthetic arithmetic, GSM8K, MATH-500, HumanEval) or a user's JSONL file mapped onto
tasks by field names (``data.jsonl``, ``load_jsonl_tasks``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.jsonl import read_objects
from grpo.services.settings.run import JsonlSourceConfig, RunConfig
from grpo.services.tasks.datasets import (
    arith_tasks,
    load_gsm8k,
    load_humaneval,
    load_math500,
    worked_examples,
)
from grpo.v1 import common_pb2

__all__ = ["RunTasks", "load_jsonl_tasks", "load_run_tasks"]


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


def load_jsonl_tasks(path: Path, source: JsonlSourceConfig) -> list[common_pb2.Task]:
    """Tasks from a JSONL file, one per non-empty line, mapped by ``source``'s field names.

    Lines are read by ``grpo.services.runtime.jsonl.read_objects`` (blank lines skipped, a leading
    byte-order mark dropped, 1-based line numbers). Each row's prompt is
    ``source.prompt_template`` with ``{prompt}`` replaced by the prompt field; the gold answer
    is the gold field as text; the type is ``source.task_type`` or the row's
    ``task_type_field``; the id is the ``id_field`` or ``<file stem>-<line number>``.

    Raises:
        NotFoundError: the file does not exist.
        InvalidArgumentError: a line is not UTF-8, not JSON or not a JSON object, lacks a
            mapped field, or repeats an id (each message starts with ``<file>:<line>:`` and
            names the field), or the file holds no row.
    """
    tasks: list[common_pb2.Task] = []
    seen: set[str] = set()
    for number, row in read_objects(path, what="data.jsonl"):
        fields = [source.prompt_field, source.gold_field]
        fields += [f for f in (source.task_type_field, source.id_field) if f]
        for name in fields:
            if name not in row:
                raise InvalidArgumentError(f"{path}:{number}: no field {name!r} (data.jsonl)")
        task_id = str(row[source.id_field]) if source.id_field else f"{path.stem}-{number}"
        if task_id in seen:
            raise InvalidArgumentError(f"{path}:{number}: task id {task_id!r} repeats")
        seen.add(task_id)
        kind = str(row[source.task_type_field]) if source.task_type_field else source.task_type
        prompt = source.prompt_template.replace("{prompt}", str(row[source.prompt_field]))
        tasks.append(
            common_pb2.Task(
                id=task_id, type=kind, prompt=prompt, gold_answer=str(row[source.gold_field])
            )
        )
    if not tasks:
        raise InvalidArgumentError(f"data.jsonl file {path} holds no row")
    return tasks


def _jsonl_run_tasks(config: RunConfig) -> RunTasks:
    data = config.data
    source = data.jsonl
    tasks = load_jsonl_tasks(Path(source.path), source)
    if source.heldout_path:
        heldout = load_jsonl_tasks(Path(source.heldout_path), source)[: data.heldout_size]
        held_ids = {t.id for t in heldout}
        train = [t for t in tasks if t.id not in held_ids]
        train = train[: data.train_size] if data.train_size else train
    else:
        train, heldout = _split(tasks, data.train_size, data.heldout_size)
    types = {t.type for t in train} | {t.type for t in heldout}
    if len(types) != 1:
        raise InvalidArgumentError(
            f"data.jsonl rows have task types {sorted(types)}; a run routes one task type"
        )
    return RunTasks(train=train, heldout=heldout, sft=[], task_type=types.pop())


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
    if data.source == "jsonl":
        return _jsonl_run_tasks(config)
    if data.source == "math500":
        train, heldout = _split(load_math500(), data.train_size, data.heldout_size)
        return RunTasks(train=train, heldout=heldout, sft=sft, task_type="math")
    train, heldout = _split(load_humaneval(), data.train_size, data.heldout_size)
    return RunTasks(train=train, heldout=heldout, sft=sft, task_type="code")
