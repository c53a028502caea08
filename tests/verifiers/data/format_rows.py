r"""Generated responses in the two formats the shipped jobs train on, with known golds.

- :func:`arith_rows`: the main job's arithmetic task (``grpo.services.datasets.arith_tasks``),
  whose completions are worked steps then ``:answer`` (``7+8=15,4+3+1=8:85``). Responses are
  what a small policy writes while it learns: the worked solution, a wrong final answer, a
  wrong step, the answer alone, a truncated completion, end-of-text debris, spaces.
- :func:`gsm8k_rows`: GSM8K reference solutions (``… <<48+24=72>>72 clips.\n#### 72``) and
  the variations of their last line a GSM8K-tuned model writes: a wrong number, thousands
  separators, a dollar sign, a unit, a decimal, end-of-text debris, a truncated solution.

Both are seeded, so the same arguments give the same rows. ``tests/verifiers/
test_math_formats_unchanged.py`` checks that the rewards on these rows are the ones recorded
in ``format_rewards.json`` by the extraction before issue 27's redesign (what a training run
already relies on).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from collections.abc import Sequence

__all__ = ["arith_rows", "digest", "gsm8k_rows"]

Pair = tuple[str, str]  # (gold, response)
Row = tuple[str, str, str]  # (gold, response, prompt)
_EOT = ("<|endoftext|>", "</s>", "<|im_end|>", "<|eot_id|>")


def _wrong(value: int, rng: random.Random) -> int:
    """A different non-negative integer near ``value`` (a slip of one digit or carry)."""
    for _ in range(20):
        w = value + rng.choice([-10, -1, 1, 2, 10, 100])
        if w >= 0 and w != value:
            return w
    return value + 1


def arith_rows(n: int = 1000, seed: int = 0) -> list[Row]:
    """``n`` (gold, response, prompt) rows of the arithmetic job (module docstring).

    Raises:
        ValueError: ``n`` < 1.
    """
    from grpo.services.tasks.datasets import arith_tasks

    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    rng = random.Random(seed)
    tasks = arith_tasks(n, seed=seed, min_digits=1, max_digits=4, ops=("+", "-", "*"))
    rows: list[Row] = []
    for task in tasks:
        gold = task.gold_answer
        solution = task.metadata["solution"]
        steps, _, answer = solution.rpartition(":")
        kind = rng.randrange(12)
        if kind == 0:
            response = solution
        elif kind == 1:
            response = f"{steps}:{_wrong(int(answer), rng)}"
        elif kind == 2:  # a wrong step, the right answer
            parts = steps.split(",")
            k = rng.randrange(len(parts))
            lhs, _, rhs = parts[k].rpartition("=")
            parts[k] = f"{lhs}={_wrong(int(rhs), rng)}"
            response = ",".join(parts) + f":{answer}"
        elif kind == 3:
            response = answer
        elif kind == 4:  # truncated at the token budget
            response = solution[: rng.randrange(1, len(solution))]
        elif kind == 5:
            response = solution + rng.choice(_EOT)
        elif kind == 6:
            response = f"{steps}: {answer}"
        elif kind == 7:  # the answer of the last step without the colon
            response = f"{steps},{answer}"
        elif kind == 8:
            response = f"{steps}:{_wrong(int(answer), rng)}" + rng.choice(_EOT)
        elif kind == 9:
            response = solution + "\n"
        elif kind == 10:  # steps only
            response = steps
        else:  # another problem's completion
            other = rng.choice(tasks).metadata["solution"]
            response = other
        rows.append((gold, response, task.prompt))
    return rows


_FINAL = re.compile(r"####\s*(.*)$")


def gsm8k_rows(solutions: Sequence[str], n: int = 1000, seed: int = 0) -> list[Row]:
    """``n`` (gold, response, prompt) rows from GSM8K reference ``solutions`` (module
    docstring; the prompt is empty: the solutions come without their questions).

    Raises:
        ValueError: ``n`` < 1, or fewer than ``n`` solutions ending in ``#### <integer>``.
    """
    usable = []
    for s in solutions:
        m = _FINAL.search(s.strip())
        if m is not None and re.fullmatch(r"-?[\d,]+", m.group(1).strip()):
            usable.append(s.strip())
    if n < 1 or len(usable) < n:
        raise ValueError(f"need n >= 1 and at least n usable solutions, got n={n}")
    rng = random.Random(seed)
    rows: list[Row] = []
    for solution in rng.sample(usable, n):
        body, _, final = solution.rpartition("####")
        gold = final.strip().replace(",", "")
        value = int(gold)
        kind = rng.randrange(10)
        if kind == 0:
            response = solution
        elif kind == 1:
            response = f"{body}#### {_wrong(value, rng)}"
        elif kind == 2:
            response = f"{body}#### {value:,}"
        elif kind == 3:
            response = f"{body}#### ${value}"
        elif kind == 4:
            response = f"{body}#### {value}.00"
        elif kind == 5:
            response = solution + rng.choice(_EOT)
        elif kind == 6:
            response = f"{body}####{value}"
        elif kind == 7:
            response = f"{body}#### {_wrong(value, rng)}" + rng.choice(_EOT)
        elif kind == 8:
            response = f"{body}#### {value} "
        else:
            response = f"{body}#### {value:,}.0" if value >= 1000 else f"{body}#### {value}.0"
        rows.append((gold, response, ""))
    return rows


def digest(rows: Sequence[Row]) -> str:
    """sha256 of the rows' (gold, response) pairs (detects a generator that no longer gives
    the recorded rows)."""
    pairs = [[gold, response] for gold, response, _ in rows]
    return hashlib.sha256(json.dumps(pairs, ensure_ascii=False).encode()).hexdigest()
