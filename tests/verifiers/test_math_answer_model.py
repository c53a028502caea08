"""The answer model's set, base, ratio and unit readings (pure functions; sympy only in the
real-set fallback), beside the table rows that exercise them end to end."""

from __future__ import annotations

import pytest

from grpo.verifiers.math import answers_equal, normalize_answer, read_answer
from grpo.verifiers.math.answer import (
    AnswerSyntaxError,
    BaseNumber,
    Difference,
    Intersection,
    Interval,
    Items,
    Ratio,
    Scalar,
    Text,
    Union,
)
from grpo.verifiers.math.normalize import normalize_with_units
from grpo.verifiers.math.realsets import sets_equal, to_set
from grpo.verifiers.math.units import canonical_unit, units_conflict

REALS = Interval(Scalar(r"-\infty"), Scalar(r"\infty"), False, False)


def _read(text: str):  # type: ignore[no-untyped-def]
    return read_answer(normalize_answer(text))


@pytest.mark.parametrize(
    "text",
    [r"\mathbb{R}", r"\R", "ℝ", r"\mathbf{R}", r"\Bbb R", r"\text{all real numbers}", "all reals"],
)
def test_spellings_of_the_real_line_are_one_interval(text: str) -> None:
    assert _read(text) == REALS


def test_words_that_only_mention_real_stay_text() -> None:
    assert _read("real") == Text("real")
    assert isinstance(_read(r"\mathbb{R}^2"), Scalar)  # the plane, not the line


def test_difference_and_not_equal() -> None:
    minus = _read(r"\mathbb{R}\setminus\{0\}")
    assert minus == Difference(REALS, Items((Scalar("0"),), braces=True))
    assert _read(r"\mathbb{R} - \{0\}") == minus
    ne = _read(r"x \neq 0")
    assert isinstance(ne, Union) and len(ne.parts) == 2
    with pytest.raises(AnswerSyntaxError):
        read_answer(r"\mathbb{R} \setminus \{0\} \setminus \{1\}")


def test_connectors_between_conditions_on_one_variable() -> None:
    assert isinstance(_read(r"x<1 \text{ or } x>2"), Union)
    assert isinstance(_read(r"x<1 \lor x>2"), Union)
    assert isinstance(_read(r"x>1 \text{ and } x<3"), Intersection)
    assert isinstance(_read("x<1, x>2"), Items)  # a comma is no connector: a list
    assert isinstance(_read("x<1 or y>2"), Items)  # two variables: not one set
    assert isinstance(_read("1 or 2"), Items)


@pytest.mark.parametrize(
    ("text", "digits", "base"),
    [
        ("1011_2", "1011", 2),
        ("4210_{5}", "4210", 5),
        ("(777)_8", "777", 8),
        ("52_{(8)}", "52", 8),
        (r"101_{\text{two}}", "101", 2),
        ("A3F_{16}", "A3F", 16),
        ("0052_8", "52", 8),
    ],
)
def test_base_subscripts(text: str, digits: str, base: int) -> None:
    assert _read(text) == BaseNumber(digits, base)


@pytest.mark.parametrize("text", ["x_2", "a_{12}", "1021_2", "12_1", "5_{40}"])
def test_subscripts_that_are_not_bases(text: str) -> None:
    assert not isinstance(_read(text), BaseNumber)  # a variable, a digit too big, no base


def test_ratios() -> None:
    assert _read("1:2") == Ratio((Scalar("1"), Scalar("2")))
    assert len(_read("3 : 4 : 5").terms) == 3  # type: ignore[union-attr]
    with pytest.raises(AnswerSyntaxError):
        read_answer("1::2")


@pytest.mark.parametrize(
    ("gold", "answer", "equal"),
    [
        ("1:2", "2:4", True),
        ("1:2", r"\frac{1}{2}", True),
        ("1:2:3", "2:4:6", True),
        ("1:2:3", "1:2:4", False),
        ("1:2", "0:0", False),
        (r"\frac16", "1:2:3", False),
        ("1011_2", "1011", True),
        ("1011_2", "1011_3", False),
        ("1011", "1011_2", False),
        ("11", "11_{10}", True),
    ],
)
def test_ratio_and_base_comparison(gold: str, answer: str, equal: bool) -> None:
    assert answers_equal(_read(gold), _read(answer)) is equal


def test_real_sets_canonicalise_and_refuse_what_is_not_a_real_set() -> None:
    assert sets_equal(_read(r"(-\infty,0)\cup(0,\infty)"), _read(r"x \ne 0")) is True
    assert sets_equal(_read(r"[1,2]\cup[2,3]"), _read("[1,3]")) is True
    assert sets_equal(_read(r"(1,2)\cup(2,3)"), _read("(1,3)")) is False
    assert to_set(_read("[2,1]")) is None  # never read as the empty set
    assert to_set(_read(r"[-\infty, 1]")) is None
    assert to_set(_read("[a, b]")) is None  # symbols: the part-by-part verdict stands
    assert to_set(_read(r"[10^{10^{10}}, \infty)")) is None  # refused, never computed
    assert to_set(_read("1, 2")) is None  # a list is not a set


@pytest.mark.parametrize(
    ("text", "normalized", "units"),
    [
        (r"72^\circ F", "72", {"degF"}),
        (r"72^{\circ}\text{F}", "72", {"degF"}),
        ("72 °F", "72", {"degF"}),
        ("72 degrees Fahrenheit", "72", {"degF"}),
        (r"-40^\circ \mathrm{C}", "-40", {"degC"}),
        ("30°", "30", {"deg"}),
        (r"12 \text{ cm}", "12", {"cm"}),
        (r"5\text{ cm}^2", "5", {"cm^2"}),
        ("5 square feet", "5", {"ft^2"}),
        ("12 apples", "12", set()),
        ("x<=3", r"x \le 3", set()),
        ("5!=120", "5!=120", set()),  # a factorial, not "not equal"
    ],
)
def test_units_are_dropped_and_noted(text: str, normalized: str, units: set[str]) -> None:
    assert normalize_with_units(text) == (normalized, frozenset(units))


def test_units_conflict_only_when_both_are_known_and_differ() -> None:
    assert units_conflict(frozenset({"degF"}), frozenset({"degC"}))
    assert units_conflict(frozenset({"cm"}), frozenset({"m"}))
    assert units_conflict(frozenset({"cm^2"}), frozenset({"cm"}))
    assert not units_conflict(frozenset({"deg"}), frozenset({"degF"}))  # scale omitted
    assert not units_conflict(frozenset(), frozenset({"degC"}))  # a unit may be omitted
    assert canonical_unit("apples") is None
    assert canonical_unit("centimetres") == canonical_unit("cm") == "cm"
