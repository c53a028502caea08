"""Task sources: the offline reference datasets and the synthetic arithmetic task generator.

Every loader returns ``common_pb2.Task`` messages, the one task schema of the system:

- ``load_gsm8k(split)``: GSM8K (Cobbe et al., 2021), type ``"math"``, gold = the integer after
  ``####`` with thousands separators removed.
- ``load_math500()``: MATH-500 (Hendrycks et al., 2021; the PRM800K test subset), type ``"math"``,
  gold = the LaTeX final answer.
- ``load_humaneval()``: HumanEval (Chen et al., 2021), type ``"code"``, tests in ``code_tests``
  (``test_code`` defines ``check(candidate)``; ``program_prefix`` is the prompt, since models
  usually write only the function body).
- ``arith_tasks(n, ...)``: multi-digit arithmetic of type ``"arith"`` (prompt ``"47+38="``, gold
  ``"85"``), with a worked solution in ``metadata["solution"]`` made by ``arith_solution``.

The datasets are read from ``data_dir()`` (``$GRPO_DATA_DIR``, else ``<repo>/../shared/data``);
nothing is downloaded.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import Any

from grpo.errors import InvalidArgumentError, NotFoundError
from grpo.v1 import common_pb2

__all__ = [
    "ARITH_OPS",
    "arith_difficulty",
    "arith_solution",
    "arith_tasks",
    "data_dir",
    "load_gsm8k",
    "load_humaneval",
    "load_math500",
    "worked_examples",
]

ARITH_OPS = ("+", "-", "*")
MATH_PROMPT = "Question: {question}\nAnswer:"
_REPO = Path(__file__).resolve().parents[2]  # services/tasks/datasets.py -> the repository


def data_dir() -> Path:
    """Folder of the reference datasets: ``$GRPO_DATA_DIR``, else ``<repo>/../shared/data``.

    Raises:
        NotFoundError: the folder does not exist (the message says how to point at it).
    """
    path = Path(os.environ.get("GRPO_DATA_DIR", _REPO.parent / "shared" / "data"))
    if not path.is_dir():
        raise NotFoundError(f"dataset folder {path} does not exist; set GRPO_DATA_DIR")
    return path


def _read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    if not path.is_file():
        raise NotFoundError(f"dataset file {path} does not exist (data_dir() = {path.parent})")
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def load_gsm8k(
    split: str = "train", *, prompt_template: str = MATH_PROMPT
) -> list[common_pb2.Task]:
    """Load GSM8K as ``"math"`` tasks with integer gold answers.

    Args:
        split: ``"train"`` (7473 rows) or ``"test"`` (1219 rows; 100 held out of the file).
        prompt_template: Format string with ``{question}``.

    Returns:
        Tasks with id ``gsm8k/<split>/<row>``, gold answer without thousands separators, and
        metadata ``source``, ``split``, ``solution`` (the worked answer, ending
        with ``#### <answer>``).

    Raises:
        InvalidArgumentError: unknown split. NotFoundError: the file is missing.
    """
    if split not in ("train", "test"):
        raise InvalidArgumentError(f"GSM8K split must be 'train' or 'test', got {split!r}")
    tasks = []
    for i, row in enumerate(_read_jsonl(data_dir() / "gsm8k" / f"{split}.jsonl")):
        final = row["answer"].rpartition("####")[2]
        tasks.append(
            common_pb2.Task(
                id=f"gsm8k/{split}/{i}",
                type="math",
                prompt=prompt_template.format(question=row["question"]),
                gold_answer=final.strip().replace(",", ""),
                metadata={"source": "gsm8k", "split": split, "solution": row["answer"]},
            )
        )
    return tasks


def load_math500(*, prompt_template: str = MATH_PROMPT) -> list[common_pb2.Task]:
    """Load MATH-500 as ``"math"`` tasks with LaTeX gold answers.

    Returns:
        500 tasks with id = the dataset's ``unique_id`` and metadata ``source``, ``subject``,
        ``level`` (1-5, as text), ``solution``.

    Raises:
        NotFoundError: the file is missing.
    """
    return [
        common_pb2.Task(
            id=row["unique_id"],
            type="math",
            prompt=prompt_template.format(question=row["problem"]),
            gold_answer=row["answer"],
            metadata={
                "source": "math500",
                "subject": row["subject"],
                "level": str(row["level"]),
                "solution": row["solution"],
            },
        )
        for row in _read_jsonl(data_dir() / "math500" / "test.jsonl")
    ]


def load_humaneval() -> list[common_pb2.Task]:
    """Load HumanEval as ``"code"`` tasks.

    Returns:
        164 tasks with id = ``task_id``, prompt = the signature and docstring, and
        ``code_tests`` (``test_code`` = the ``check(candidate)`` source, ``entry_point``,
        ``program_prefix`` = the prompt); metadata ``source`` and ``canonical_solution``.

    Raises:
        NotFoundError: the file is missing.
    """
    return [
        common_pb2.Task(
            id=row["task_id"],
            type="code",
            prompt=row["prompt"],
            code_tests=common_pb2.CodeTests(
                test_code=row["test"],
                entry_point=row["entry_point"],
                program_prefix=row["prompt"],
            ),
            metadata={"source": "humaneval", "canonical_solution": row["canonical_solution"]},
        )
        for row in _read_jsonl(data_dir() / "humaneval" / "HumanEval.jsonl")
    ]


def _digits(x: int) -> list[int]:
    """Decimal digits of ``x >= 0``, least significant first."""
    return [int(c) for c in reversed(str(x))]


def arith_solution(a: int, b: int, op: str = "+") -> str:
    """Worked, step-checkable solution of ``a op b``; the final answer follows the last ``:``.

    Each step is one equation ``lhs=rhs`` that holds as written (so the steps verifier can check
    it), steps are separated by ``,``:

    - ``+``: one step per column, least significant first, the carry from the previous column
      written as an extra ``+1``: ``47+38`` -> ``7+8=15,4+3+1=8:85``. A missing digit is ``0``.
    - ``-`` (needs ``a >= b``): a borrow adds 10 to the digit and ``-1`` in the next column:
      ``52-17`` -> ``12-7=5,5-1-1=3:35``.
    - ``*``: one partial product per digit of ``b`` (shifted), then their running sum:
      ``47*38`` -> ``47*8=376,47*30=1410,376+1410=1786:1786``.

    Raises:
        InvalidArgumentError: negative operand, ``a < b`` for ``-``, or an unknown op.
    """
    if a < 0 or b < 0:
        raise InvalidArgumentError(f"operands must be >= 0, got {a} and {b}")
    if op == "+":
        return _add_steps(a, b)
    if op == "-":
        if a < b:
            raise InvalidArgumentError(f"subtraction needs a >= b, got {a}-{b}")
        return _sub_steps(a, b)
    if op == "*":
        return _mul_steps(a, b)
    raise InvalidArgumentError(f"unknown op {op!r}; valid ops: {', '.join(ARITH_OPS)}")


def arith_difficulty(a: int, b: int, op: str = "+") -> str:
    """Difficulty label of ``a op b`` (``Task.metadata["difficulty"]``, a diagnostics slice and
    the prompt curriculum's bucket): the larger operand's digit count and the carry (``+``) or
    borrow (``-``) count of the worked solution, e.g. ``"3-digit 2-carry"``; for ``*`` the two
    digit counts, ``"3x2-digit"``.

    Raises:
        InvalidArgumentError: negative operand, ``a < b`` for ``-``, or an unknown op.
    """
    solution = arith_solution(a, b, op)  # validates the arguments
    digits = max(len(str(a)), len(str(b)))
    if op == "*":
        return f"{len(str(a))}x{len(str(b))}-digit"
    columns = solution.split(":")[0].split(",")
    # A carried (borrowed) column is the one written with the extra "+1" ("-1") term.
    extra = "+1=" if op == "+" else "-1="
    count = sum(1 for c in columns if c.count(op) == 2 and extra in c)
    return f"{digits}-digit {count}-{'carry' if op == '+' else 'borrow'}"


def _add_steps(a: int, b: int) -> str:
    da, db = _digits(a), _digits(b)
    width = max(len(da), len(db))
    da += [0] * (width - len(da))
    db += [0] * (width - len(db))
    steps, carry = [], 0
    for x, y in zip(da, db, strict=True):
        total = x + y + carry
        steps.append(f"{x}+{y}" + ("+1" if carry else "") + f"={total}")
        carry = total // 10
    return ",".join(steps) + f":{a + b}"


def _sub_steps(a: int, b: int) -> str:
    da, db = _digits(a), _digits(b)
    db += [0] * (len(da) - len(db))
    steps, borrow = [], 0
    for x, y in zip(da, db, strict=True):
        top = x + 10 if x - y - borrow < 0 else x
        steps.append(f"{top}-{y}" + ("-1" if borrow else "") + f"={top - y - borrow}")
        borrow = 1 if top != x else 0
    return ",".join(steps) + f":{a - b}"


def _mul_steps(a: int, b: int) -> str:
    partials = [a * d * 10**i for i, d in enumerate(_digits(b))]
    steps = [
        f"{a}*{d * 10**i}={p}" for i, (d, p) in enumerate(zip(_digits(b), partials, strict=True))
    ]
    running = partials[0]
    for p in partials[1:]:
        steps.append(f"{running}+{p}={running + p}")
        running += p
    return ",".join(steps) + f":{a * b}"


def _operand(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def arith_tasks(
    n: int,
    *,
    seed: int,
    min_digits: int = 2,
    max_digits: int = 3,
    ops: Sequence[str] = ("+",),
    exclude_ids: Collection[str] = (),
) -> list[common_pb2.Task]:
    """Generate ``n`` distinct arithmetic tasks of type ``"arith"``.

    Each operand has a digit count drawn uniformly from ``[min_digits, max_digits]``; for ``-``
    the operands are ordered so that the result is >= 0.

    Args:
        n: Number of tasks.
        seed: Seed of the generator (same arguments -> same tasks).
        min_digits, max_digits: Operand size range (digits).
        ops: Operations to draw from (subset of ``ARITH_OPS``).
        exclude_ids: Task ids to skip (e.g. a training set's ids when drawing a held-out set).

    Returns:
        Tasks with id ``arith/<a><op><b>``, prompt ``"<a><op><b>="``, gold the result as text,
        metadata ``source="arith"``, ``op``, ``digits`` (of the larger operand), ``solution``
        (``arith_solution``; the SFT completion) and ``difficulty`` (``arith_difficulty``).

    Raises:
        InvalidArgumentError: bad sizes or ops, or fewer than ``n`` distinct problems exist.
    """
    if n < 0 or not 1 <= min_digits <= max_digits:
        raise InvalidArgumentError(
            f"need n >= 0 and 1 <= min_digits <= max_digits, got n={n}, "
            f"min_digits={min_digits}, max_digits={max_digits}"
        )
    bad = [op for op in ops if op not in ARITH_OPS]
    if bad or not ops:
        raise InvalidArgumentError(f"ops {list(ops)} invalid; choose from {list(ARITH_OPS)}")
    rng = random.Random(seed)
    seen = set(exclude_ids)
    tasks: list[common_pb2.Task] = []
    attempts = 0
    while len(tasks) < n:
        attempts += 1
        if attempts > 50 * n + 1000:
            raise InvalidArgumentError(
                f"could not draw {n} distinct tasks with digits {min_digits}-{max_digits}; "
                "lower n or widen the digit range"
            )
        op = rng.choice(list(ops))
        a = _operand(rng, rng.randint(min_digits, max_digits))
        b = _operand(rng, rng.randint(min_digits, max_digits))
        if op == "-" and a < b:
            a, b = b, a
        task_id = f"arith/{a}{op}{b}"
        if task_id in seen:
            continue
        seen.add(task_id)
        value = {"+": a + b, "-": a - b, "*": a * b}[op]
        tasks.append(
            common_pb2.Task(
                id=task_id,
                type="arith",
                prompt=f"{a}{op}{b}=",
                gold_answer=str(value),
                metadata={
                    "source": "arith",
                    "op": op,
                    "digits": str(max(len(str(a)), len(str(b)))),
                    "solution": arith_solution(a, b, op),
                    "difficulty": arith_difficulty(a, b, op),
                },
            )
        )
    return tasks


def worked_examples(tasks: Sequence[common_pb2.Task]) -> list[tuple[str, str]]:
    """(prompt, worked solution) pairs for SFT, from tasks carrying ``metadata["solution"]``.

    Raises:
        InvalidArgumentError: a task has no ``solution`` in its metadata (names the task id).
    """
    pairs = []
    for task in tasks:
        if "solution" not in task.metadata:
            raise InvalidArgumentError(f"task {task.id!r} has no metadata['solution']")
        pairs.append((task.prompt, task.metadata["solution"]))
    return pairs
