"""Dataset loaders and the arithmetic task generator."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from grpo.errors import InvalidArgumentError
from grpo.services.tasks.datasets import (
    arith_solution,
    arith_tasks,
    load_gsm8k,
    load_humaneval,
    load_math500,
    worked_examples,
)


@pytest.mark.parametrize(
    ("a", "b", "op", "expected"),
    [
        (47, 38, "+", "7+8=15,4+3+1=8:85"),
        (95, 17, "+", "5+7=12,9+1+1=11:112"),
        (123, 45, "+", "3+5=8,2+4=6,1+0=1:168"),
        (52, 17, "-", "12-7=5,5-1-1=3:35"),
        (100, 1, "-", "10-1=9,10-0-1=9,1-0-1=0:99"),
        (47, 38, "*", "47*8=376,47*30=1410,376+1410=1786:1786"),
    ],
)
def test_arith_solution_golden(a: int, b: int, op: str, expected: str) -> None:
    assert arith_solution(a, b, op) == expected


@given(st.integers(0, 99999), st.integers(0, 99999), st.sampled_from(["+", "-", "*"]))
def test_every_step_holds_and_answer_is_exact(a: int, b: int, op: str) -> None:
    if op == "-" and a < b:
        a, b = b, a
    steps, _, answer = arith_solution(a, b, op).rpartition(":")
    assert int(answer) == {"+": a + b, "-": a - b, "*": a * b}[op]
    for step in steps.split(","):
        lhs, rhs = step.split("=")
        assert re.fullmatch(r"[\d+\-*]+", lhs)
        assert eval(lhs) == int(rhs), step  # lhs is digits and + - * only (checked above)


def test_arith_tasks_distinct_seeded_and_excluding() -> None:
    train = arith_tasks(300, seed=1, min_digits=2, max_digits=3)
    assert len({t.id for t in train}) == 300
    assert [t.id for t in train] == [t.id for t in arith_tasks(300, seed=1)]
    held = arith_tasks(50, seed=2, exclude_ids={t.id for t in train})
    assert not {t.id for t in held} & {t.id for t in train}
    task = train[0]
    a, b = (int(x) for x in task.prompt.rstrip("=").split("+"))
    assert task.type == "arith" and task.gold_answer == str(a + b)
    assert 2 <= int(task.metadata["digits"]) <= 3
    assert worked_examples([task]) == [(task.prompt, arith_solution(a, b))]


def test_arith_tasks_errors() -> None:
    with pytest.raises(InvalidArgumentError, match="ops"):
        arith_tasks(1, seed=0, ops=("/",))
    with pytest.raises(InvalidArgumentError, match="distinct"):
        arith_tasks(200, seed=0, min_digits=1, max_digits=1)  # only 100 sums of 1-digit numbers
    with pytest.raises(InvalidArgumentError, match="a >= b"):
        arith_solution(1, 2, "-")


def test_reference_datasets(data_dir: Path) -> None:
    gsm = load_gsm8k("test")
    assert len(gsm) == 1219 and gsm[0].type == "math"
    assert all(t.gold_answer.lstrip("-").isdigit() for t in gsm)  # commas removed
    assert gsm[0].metadata["solution"].rstrip().endswith("#### " + gsm[0].gold_answer)
    math = load_math500()
    assert len(math) == 500 and all(t.gold_answer for t in math)
    code = load_humaneval()
    assert len(code) == 164 and code[0].id == "HumanEval/0"
    assert code[0].code_tests.entry_point and "def check" in code[0].code_tests.test_code
    assert code[0].code_tests.program_prefix == code[0].prompt
    with pytest.raises(InvalidArgumentError, match="split"):
        load_gsm8k("dev")
