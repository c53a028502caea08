"""Math step verifier: segmentation spans, claims, verdicts, rewards, GSM8K checks."""

from __future__ import annotations

import concurrent.futures as cf
import json
import random
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from grpo.v1 import common_pb2
from grpo.verifiers.sdk import PoolSettings
from grpo.verifiers.steps import (
    StepsConfig,
    StepsVerifier,
    check_claim,
    find_claims,
    segment_steps,
)

VALID, INVALID, UNVERIFIABLE = (
    common_pb2.STEP_STATUS_VALID,
    common_pb2.STEP_STATUS_INVALID,
    common_pb2.STEP_STATUS_UNVERIFIABLE,
)


def _spans(text: str) -> list[str]:
    return [text[s.start : s.end] for s in segment_steps(text)]


def test_arith_format_one_step_per_equation_and_no_final_answer() -> None:
    text = "7+8=15,4+3+1=8:85"
    steps = segment_steps(text)
    assert [(s.start, s.end) for s in steps] == [(0, 6), (7, 14)]
    assert [s.text for s in steps] == ["7+8=15", "4+3+1=8"]


@pytest.mark.parametrize(
    ("text", "pieces"),
    [
        ("a\n\nb = 2\n#### 2", ["a", "b = 2"]),
        ("Step 1: 3+4=7. Step 2: 7*2=14", ["Step 1: 3+4=7.", "Step 2: 7*2=14"]),
        ("He has 3+4=7 eggs. Then 7*2=14! Done", ["He has 3+4=7 eggs.", "Then 7*2=14!", "Done"]),
        ("It costs $3.50 in total.", ["It costs $3.50 in total."]),
        ("x=1,000 and y=2", ["x=1,000 and y=2"]),  # thousands separator, not two equations
        ("  ½ + ½ = 1  ", ["½ + ½ = 1"]),
    ],
)
def test_segmentation(text: str, pieces: list[str]) -> None:
    assert _spans(text) == pieces


@pytest.mark.parametrize(
    ("step", "claims"),
    [
        ("Natalia sold 48/2 = <<48/2=24>>24 clips in May.", [("48/2", "24")]),
        ("Weng earns 12/60 = $<<12/60=0.2>>0.2 a minute", [("12/60", "0.2"), ("12/60", "$ 0.2")]),
        ("3 x 4 = 12 = 6*2", [("3 * 4", "12"), ("12", "6*2")]),
        ("1,200 + 300 = 1,500", [("1200 + 300", "1500")]),
        ("So 20% of 50 = 10", [("20% * 50", "10")]),
        ("the hours = 8", []),
        ("shoe size 25 + shoe size 5 = 30", []),
        ("Max bought 19 – 9 = 10 stamps", [("19 - 9", "10")]),
        (r"$5 \times 6 = 30$", [("5 * 6", "30")]),  # LaTeX operators
        (r"8 \cdot 2 = 16", [("8 * 2", "16")]),
        (r"20 \div 5 = 4", [("20 / 5", "4")]),
        ("7 times 3 = 21", [("7 * 3", "21")]),  # operator words
        ("15 minus 4 = 11", [("15 - 4", "11")]),
        ("3 bags of 5 = 15 apples", [("3 * 5", "15")]),
        ("**Step 2:** 8*3=25", [("8*3", "25")]),  # markdown
        ("- 4+4=8", [("4+4", "8")]),  # a bullet is not a minus
        (r"\frac{3}{4} + \frac{1}{4} = 1", [("((3)/(4)) + ((1)/(4))", "1")]),
    ],
)
def test_find_claims(step: str, claims: list[tuple[str, str]]) -> None:
    found = find_claims(step)
    assert [(c.lhs, c.rhs) for c in found] == claims
    assert all(c.rel == "=" for c in found)


@pytest.mark.parametrize(
    ("lhs", "rhs", "verdict"),
    [
        ("48/2", "24", True),
        ("48/2", "25", False),
        ("10/3", "3.33", True),  # decimal written rounded
        ("10/3", "3.3", True),
        ("10/3", "3", False),
        ("10/3", "3.34", False),
        ("$5.50 - $2", "$3.5", True),
        ("18/450*100", "4%", True),
        ("1/2", "50%", True),
        ("(x+1)^2", "x^2+2x+1", True),  # identity
        ("2x+3", "7", None),  # an equation to solve, not refutable
        ("9^99999999", "1", False),  # too large to compute, so never equal to 1
        ("9^99999999", "9^99999999", None),  # too large to compute, same size: unverifiable
        ("1.5e3", "1500", True),  # the math verifier's number reader
        ("1 1/2 + 2", "3 1/2", True),  # mixed numbers
        ("2 4/3", "2", None),  # neither a mixed number nor a product
        ("__import__('os')", "1", None),
        ("(3", "3", None),
    ],
)
def test_check_claim(lhs: str, rhs: str, verdict: bool | None) -> None:
    assert check_claim(lhs, rhs) is verdict


def test_score_rewards_and_spans(steps_verifier: StepsVerifier) -> None:
    response = "Step 1: 3+4=7.\nStep 2: 7*2=15.\nSo I say hi.\n7+8=15,4+3+1=8:85"
    score = steps_verifier.verify(common_pb2.Task(type="math"), response)
    assert score.status == common_pb2.SCORE_STATUS_OK
    got = [(response[s.char_start : s.char_end], s.status, s.reward) for s in score.steps]
    assert got == [
        ("Step 1: 3+4=7.", VALID, 1.0),
        ("Step 2: 7*2=15.", INVALID, -1.0),
        ("So I say hi.", UNVERIFIABLE, 0.0),
        ("7+8=15", VALID, 1.0),
        ("4+3+1=8", VALID, 1.0),
    ]
    assert score.reward == pytest.approx(3 / 4)
    assert "7*2 = 15" in score.steps[1].detail


def test_markdown_steps_are_each_checked(steps_verifier: StepsVerifier) -> None:
    response = "**Step 1:** 4+4=8\n**Step 2:** 8*3=25\n- 5 \\times 6 = 30\n- 1 1/2 + 2 = 3 1/2"
    score = steps_verifier.verify(common_pb2.Task(type="math"), response)
    assert [s.status for s in score.steps] == [VALID, INVALID, VALID, VALID]


def test_no_checkable_step_is_no_answer_not_zero(steps_verifier: StepsVerifier) -> None:
    score = steps_verifier.verify(common_pb2.Task(), "I think it is big.")
    assert score.status == common_pb2.SCORE_STATUS_NO_ANSWER
    assert [s.status for s in score.steps] == [UNVERIFIABLE]


def test_configurable_step_rewards() -> None:
    config = StepsConfig(
        valid_reward=2.0, invalid_reward=-0.5, pool=PoolSettings(workers=1, timeout_s=20)
    )
    with StepsVerifier(config) as verifier:
        score = verifier.verify(common_pb2.Task(), "1+1=2, 2+2=5")
    assert [s.reward for s in score.steps] == [2.0, -0.5]
    with pytest.raises(ValidationError, match="reorder"):
        StepsConfig(valid_reward=-1.0, invalid_reward=1.0)


def test_bad_utf8_is_parse_error(steps_verifier: StepsVerifier) -> None:
    bad = b"1+1=2 \xff".decode("utf-8", "surrogateescape")
    score = steps_verifier.verify(common_pb2.Task(), bad)
    assert score.status == common_pb2.SCORE_STATUS_PARSE_ERROR


_ANNOTATED = re.compile(r"<<([^<>=]*)=([^<>]*)>>(\$?)(-?[\d.]+)")


def _gsm8k_solutions(data_dir: Path, n: int) -> list[str]:
    with (data_dir / "gsm8k" / "test.jsonl").open(encoding="utf-8") as fh:
        rows = [json.loads(line)["answer"] for line in fh]
    return random.Random(4).sample(rows, n)


def test_gsm8k_annotated_steps_are_valid(data_dir: Path, steps_verifier: StepsVerifier) -> None:
    solutions = _gsm8k_solutions(data_dir, 250)
    with cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda s: steps_verifier.verify(common_pb2.Task(), s), solutions))
    annotated = [
        step.status
        for text, score in zip(solutions, scores, strict=True)
        for step in score.steps
        if "<<" in text[step.char_start : step.char_end]
    ]
    assert len(annotated) > 600
    assert sum(s == VALID for s in annotated) / len(annotated) >= 0.99


def test_gsm8k_altered_step_is_flagged(data_dir: Path, steps_verifier: StepsVerifier) -> None:
    rng = random.Random(7)
    altered: list[tuple[str, int]] = []
    for solution in _gsm8k_solutions(data_dir, 120):
        matches = [m for m in _ANNOTATED.finditer(solution) if m.group(2) == m.group(4)]
        if not matches:
            continue
        m = rng.choice(matches)
        wrong = str(int(float(m.group(2))) + rng.choice([1, 2, 10]))
        text = f"{solution[: m.start()]}<<{m.group(1)}={wrong}>>{m.group(3)}{wrong}"
        altered.append((text + solution[m.end() :], m.start()))
    with cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda a: steps_verifier.verify(common_pb2.Task(), a[0]), altered))
    hits = flagged = 0
    for (_, at), score in zip(altered, scores, strict=True):
        invalid = [s for s in score.steps if s.status == INVALID]
        flagged += len(invalid)
        hits += any(s.char_start <= at < s.char_end for s in invalid)
    recall = hits / len(altered)
    precision = hits / flagged
    assert recall >= 0.97 and precision >= 0.95, (recall, precision)


def test_hostile_step_input_returns_in_time() -> None:
    config = StepsConfig(pool=PoolSettings(workers=1, timeout_s=1.5))
    with StepsVerifier(config) as verifier:
        tower = verifier.verify(common_pb2.Task(), "so 9^9999^9999 = 1")
        assert tower.status == common_pb2.SCORE_STATUS_OK  # refuted without being computed
        assert tower.steps[0].status == INVALID
        assert verifier.verify(common_pb2.Task(), "1+1=3").steps[0].status == INVALID
        flood = verifier.verify(common_pb2.Task(), "1+1=2\n" * 50_000)
        assert flood.status == common_pb2.SCORE_STATUS_PARSE_ERROR
        # issue 28's readers on hostile text: nested functions, a number-word flood, huge
        # function arguments; each is decided (or left unverifiable) within the time limit
        for text in (
            "$" + "\\sin(" * 2000 + "1" + ")" * 2000 + " = 0$",
            "one hundred and " * 5000 + "five = 5",
            "$\\sin(9^{9^{9}}) < 2$",
            "$\\exp(\\exp(\\exp(100))) \\approx 5$",
            "$" + "\\frac{" * 2000 + "1" + "}{2}" * 2000 + " = 1$",
        ):
            score = verifier.verify(common_pb2.Task(), text)
            assert score.status in (common_pb2.SCORE_STATUS_OK, common_pb2.SCORE_STATUS_NO_ANSWER)


def test_math_style_step_set(steps_verifier: StepsVerifier) -> None:
    """The hand-written MATH-style set (tests/verifiers/data/steps_math_style.py): LaTeX
    operators, words, markdown, mixed numbers; every step with a claim is valid, and each
    altered copy is flagged at the altered step (issue 11 asks >= 98% of each)."""
    from data.steps_math_style import SOLUTIONS, altered

    with cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda s: steps_verifier.verify(common_pb2.Task(), s), SOLUTIONS))
    claimed = [
        step.status
        for text, score in zip(SOLUTIONS, scores, strict=True)
        for step in score.steps
        if "=" in text[step.char_start : step.char_end]
    ]
    assert len(claimed) >= 120
    assert sum(s == VALID for s in claimed) / len(claimed) >= 0.98
    copies = altered(seed=3)
    with cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda c: steps_verifier.verify(common_pb2.Task(), c[0]), copies))
    hits = flagged = 0
    for (_, start, _end), score in zip(copies, scores, strict=True):
        invalid = [s for s in score.steps if s.status == INVALID]
        flagged += len(invalid)
        hits += any(s.char_start <= start < s.char_end for s in invalid)
    assert hits / len(copies) >= 0.98 and hits / flagged >= 0.98, (hits, flagged, len(copies))


def test_step_kinds_table(steps_verifier: StepsVerifier) -> None:
    """Issue 28's kinds (tests/verifiers/data/steps_kinds.py): alignment environments line by
    line, approximations within the precision shown, inequalities and mixed chains, number
    words, "of", roots, LaTeX thousands, money, units, markdown. Every row's step verdicts are
    as written, and every kind has rows judged valid and rows judged invalid."""
    from data.steps_kinds import ROWS

    letter = {VALID: "V", INVALID: "I", UNVERIFIABLE: "U"}
    with cf.ThreadPoolExecutor(4) as ex:
        scores = list(ex.map(lambda r: steps_verifier.verify(common_pb2.Task(), r.text), ROWS))
    got = ["".join(letter[s.status] for s in score.steps) for score in scores]
    wrong = [(r.kind, r.text, r.expect, g) for r, g in zip(ROWS, got, strict=True) if g != r.expect]
    assert not wrong, wrong
    assert len(ROWS) >= 150
    for kind in {r.kind for r in ROWS}:
        verdicts = "".join(r.expect for r in ROWS if r.kind == kind)
        assert "V" in verdicts and "I" in verdicts, kind


@pytest.mark.parametrize(
    ("step", "claims"),
    [
        (r"$2^6 = 64 > 70$", [("2^6", "64", "="), ("64", "70", ">")]),
        (r"3 \cdot 4 = 12 \le 15", [("3 * 4", "12", "="), ("12", "15", "≤")]),
        (r"\sqrt{5} \approx 2.24", [("((5)^(1/2))", "2.24", "≈")]),
        (r"$\sqrt{2} = 1.41421\ldots$", [("((2)^(1/2))", "1.41421", "≈")]),
        ("Nine plus six equals fifteen", [("9 + 6", "15", "=")]),
        ("2/5 of 30 = 12", [("2/5 * 30", "12", "=")]),
        (r"\sqrt[4]{81} = 3", [("((81)^(1/(4)))", "3", "=")]),
        (r"$1{,}500 + 300 = 1{,}800$", [("1500 + 300", "1800", "=")]),
        ("Box 2 is 5*3 = 15", [("5*3", "15", "=")]),  # a weak "is" needs a computation
        ("2 days = 48 hours", []),  # a conversion, not arithmetic
        ("Is 2 + 2 = 5?", []),  # a question
        (r"$\sinh 1 = \mathrm{arcsinh}(2)$", []),  # a function the reader does not compute
        (r"$a_1 + a_2 = 5$", []),  # indexed variables
        (r"$110_2 = 6$", [("6", "6", "=")]),  # a base subscript
    ],
)
def test_find_claims_relations(step: str, claims: list[tuple[str, str, str]]) -> None:
    assert find_claims(step) == claims


@pytest.mark.parametrize(
    ("lhs", "rhs", "rel", "verdict"),
    [
        ("((5)^(1/2))", "2.24", "≈", True),  # rounded
        ("((5)^(1/2))", "2.23", "≈", True),  # truncated
        ("((5)^(1/2))", "2.25", "≈", False),
        ("1000/3", "300", "≈", True),  # an integer's trailing zeros: its precision
        ("1000/3", "340", "≈", False),
        ("1/3", "33.3%", "≈", True),
        ("π * 25", "3.14 * 25", "≈", True),  # an expression: each decimal's own precision
        ("π * 25", "3.24 * 25", "≈", False),
        ("x", "2.5", "≈", None),
        ("64", "70", ">", False),
        ("((2)^(1/2))", "1.5", "<", True),
        ("3", "3", "≤", True),
        ("3", "3", "<", False),
        ("7", "8", "≠", True),
        ("9^99999999", "1", ">", True),  # too large to compute, its bounds decide
        ("x", "5", ">", None),
        ("(((7)^(1/2)) + ((5)^(1/2)))^2", "12 + 2((35)^(1/2))", "=", True),  # numeric
    ],
)
def test_check_claim_relations(lhs: str, rhs: str, rel: str, verdict: bool | None) -> None:
    assert check_claim(lhs, rhs, rel) is verdict
