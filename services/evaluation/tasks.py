"""Problem sets for ``grpo eval``: the shipped sources, or any JSONL file with a field map.

- ``gsm8k`` (the test split held in the data folder), ``math500``, ``humaneval``: the loaders of
  ``grpo.services.tasks.datasets`` (task types ``math``, ``math``, ``code``);
- ``arith``: ``limit`` synthetic arithmetic problems (``arith_tasks``, type ``arith``);
- a ``.jsonl`` path: one problem per line, read by ``evaluation.inputs`` with ``prompt``
  required, ``gold`` required for outcome math and the code tests for code, every other
  top-level text/number field kept as metadata (so ``--by`` can slice by it). Bad lines are
  returned beside the tasks (the eval loop writes them as ``invalid_input`` rows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from grpo.errors import InvalidArgumentError, NotFoundError, UsageError
from grpo.services.evaluation.inputs import FieldMap, InputSpec, InvalidLine, ScoreItem, read_lines
from grpo.v1 import common_pb2

__all__ = ["SOURCES", "ProblemSet", "load_problems"]

SOURCES = ("arith", "gsm8k", "math500", "humaneval")
"""Shipped problem sources (the rest of ``--dataset`` values are JSONL paths)."""


@dataclass(frozen=True)
class ProblemSet:
    """Problems to evaluate, their task type, the input lines that could not be read, and
    (a JSONL file) the 1-based line of each task, None for a shipped source."""

    tasks: list[common_pb2.Task]
    task_type: str
    invalid: list[InvalidLine] = field(default_factory=list)
    lines: list[int] | None = None


def load_problems(
    dataset: str,
    *,
    limit: int = 0,
    seed: int = 0,
    task_type: str | None = None,
    fields: FieldMap | None = None,
) -> ProblemSet:
    """Load ``dataset`` (a name of ``SOURCES`` or a JSONL path).

    Args:
        dataset: source name or file path.
        limit: keep the first ``limit`` problems (0 = all; ``arith`` needs > 0, default 200).
        seed: ``arith`` generator seed.
        task_type: ``Task.type`` of a JSONL file's problems (default ``math``); a source's
            own type otherwise (giving another one is an error).
        fields: where a JSONL file's fields are read from.

    Raises:
        UsageError: (``option="--dataset"``) neither a source nor a file, or a source
            whose data folder (``GRPO_DATA_DIR``) or file is missing; (``--task-type``) a
            ``task_type`` conflicting with a source's.
        InvalidArgumentError: a negative ``limit``.
    """
    from grpo.services.tasks import datasets

    if limit < 0:
        raise InvalidArgumentError(f"limit must be >= 0, got {limit}")
    if dataset in SOURCES:
        own = {"arith": "arith", "gsm8k": "math", "math500": "math", "humaneval": "code"}[dataset]
        if task_type and task_type != own:
            raise UsageError(
                f"--dataset {dataset} has task type {own!r}; drop --task-type {task_type}",
                option="--task-type",
            )
        try:
            if dataset == "arith":
                tasks = datasets.arith_tasks(limit or 200, seed=seed)
            elif dataset == "gsm8k":
                tasks = datasets.load_gsm8k("test")
            elif dataset == "math500":
                tasks = datasets.load_math500()
            else:
                tasks = datasets.load_humaneval()
        except NotFoundError as exc:  # no data folder, or no file of the source in it
            raise UsageError(str(exc), option="--dataset") from None
        return ProblemSet(tasks[:limit] if limit else tasks, own)
    path = Path(dataset)
    if not path.is_file():
        raise UsageError(
            f"{dataset!r} is neither a source ({', '.join(SOURCES)}) nor a file",
            option="--dataset",
        )
    kind = task_type or "math"
    spec = InputSpec(
        task_type=kind,
        require_response=False,
        require_prompt=True,
        require_gold=kind in ("math", "arith"),
        require_code_tests=kind == "code",
        extra_metadata=True,
    )
    tasks, invalid, lines = [], [], []
    with path.open("rb") as fh:
        for entry in read_lines(fh, spec, fields or FieldMap()):
            if isinstance(entry, ScoreItem):
                tasks.append(entry.task)
                lines.append(entry.line)
            else:
                invalid.append(entry)
            if limit and len(tasks) + len(invalid) >= limit:
                break
    return ProblemSet(tasks, kind, invalid, lines)
