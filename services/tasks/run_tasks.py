"""Training, held-out and SFT task sets of a run (from ``RunConfig.data``): the shipped
sources (synthetic arithmetic, GSM8K, MATH-500, HumanEval) or a user's dataset (JSONL, Parquet
or a Hugging Face dataset, ``data.dataset``: ``grpo.services.tasks.user_dataset``), with every
prompt rendered once through the policy tokenizer's chat template (``data.chat``,
``render_chat``)."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

from grpo.errors import InvalidArgumentError
from grpo.services.settings.data import USER_SOURCES
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.chat import chat_renderer, rendered
from grpo.services.tasks.datasets import (
    arith_tasks,
    load_gsm8k,
    load_humaneval,
    load_math500,
    worked_examples,
)
from grpo.services.tasks.user_dataset import load_dataset_tasks
from grpo.v1 import common_pb2

__all__ = ["RunTasks", "load_run_tasks", "render_chat", "task_digest"]


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
        chat_template: every prompt was rendered through the policy tokenizer's chat
            template (:func:`render_chat`): SFT targets end as it ends an assistant turn.
    """

    train: list[common_pb2.Task]
    heldout: list[common_pb2.Task]
    sft: list[tuple[str, str]]
    task_type: str
    dev: list[common_pb2.Task] = field(default_factory=list)
    chat_template: bool = False


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


def _user_run_tasks(config: RunConfig) -> RunTasks:
    """A user's dataset: held out by ``heldout_path``/``heldout_split``, else its last rows."""
    data = config.data
    source = data.dataset
    tasks = load_dataset_tasks(source, data.source)
    if source.heldout_path or source.heldout_split:
        heldout = load_dataset_tasks(source, data.source, heldout=True)[: data.heldout_size]
        held_ids = {t.id for t in heldout}
        train = [t for t in tasks if t.id not in held_ids]
        train = train[: data.train_size] if data.train_size else train
    else:
        train, heldout = _split(tasks, data.train_size, data.heldout_size)
    types = {t.type for t in train} | {t.type for t in heldout}
    if len(types) != 1:
        raise InvalidArgumentError(
            f"data.dataset rows have task types {sorted(types)}; a run routes one task type"
        )
    return RunTasks(train=train, heldout=heldout, sft=[], task_type=types.pop())


def render_chat(tasks: RunTasks, config: RunConfig) -> RunTasks:
    """Every prompt of ``tasks`` (training, held-out, dev, SFT) rendered with the policy
    tokenizer's chat template as ``data.chat`` says (``grpo.services.tasks.chat``): the
    tokenizer of ``model.path`` (a folder or hub id); a fresh tiny model (no ``model.path``)
    has the character tokenizer, which has no template.

    Raises:
        FailedPreconditionError: ``data.chat.system`` is set but there is no chat template.
        NotFoundError / OSError: the tokenizer cannot be loaded.
    """
    chat = config.data.chat
    render = chat_renderer(
        config.model.path, template=chat.template, system=chat.system,
        system_name="data.chat.system",
    )  # fmt: skip
    if render is None:
        return tasks
    return replace(
        tasks,
        train=rendered(tasks.train, render),
        heldout=rendered(tasks.heldout, render),
        dev=rendered(tasks.dev, render),
        sft=[(render(prompt), completion) for prompt, completion in tasks.sft],
        chat_template=True,
    )


def load_run_tasks(config: RunConfig, *, render: bool = True) -> RunTasks:
    """Build the task sets described by ``config.data`` (and ``config.model.sft``), their
    prompts rendered through the chat template as ``data.chat`` says (:func:`render_chat`;
    ``render=False``: plain prompts, for a caller that renders them later, e.g. the run
    driver on Kubernetes once it has the published policy's tokenizer).

    Arithmetic: the held-out set is drawn first (seed + 1), then training, SFT (seed + 2) and
    dev (seed + 3, only with ``model.sft.target_accuracy``) tasks are drawn excluding its ids.
    GSM8K: train split for training, test split for held-out. MATH-500 and HumanEval: the last
    ``heldout_size`` items are held out.

    Raises:
        InvalidArgumentError: sizes that cannot be met; a user's dataset that cannot be
            mapped (``user_dataset.load_dataset_tasks``).
        NotFoundError: the dataset folder or file is missing.
        FailedPreconditionError: a system message without a chat template.
    """
    plain = _plain_run_tasks(config)
    return render_chat(plain, config) if render else plain


def _plain_run_tasks(config: RunConfig) -> RunTasks:
    """``load_run_tasks`` before the chat template."""
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
    if data.source in USER_SOURCES:
        return _user_run_tasks(config)
    if data.source == "math500":
        train, heldout = _split(load_math500(), data.train_size, data.heldout_size)
        return RunTasks(train=train, heldout=heldout, sft=sft, task_type="math")
    train, heldout = _split(load_humaneval(), data.train_size, data.heldout_size)
    return RunTasks(train=train, heldout=heldout, sft=sft, task_type="code")


def task_digest(tasks: Sequence[common_pb2.Task]) -> str:
    """``sha256:<hex>`` of tasks in order (each one's deterministic protobuf bytes, length
    prefixed): equal exactly when the ids, prompts, golds, types and metadata are."""
    digest = hashlib.sha256()
    for task in tasks:
        raw = task.SerializeToString(deterministic=True)
        digest.update(len(raw).to_bytes(8, "big"))
        digest.update(raw)
    return "sha256:" + digest.hexdigest()
