"""Values too large to compute: a magnitude refutes equality only when it bounds the whole side.

The exact reader (``grpo.verifiers.math.arith``) never computes a value over ``MAX_DIGITS``
digits; it bounds it (``Magnitude``). A fresh-user trial found the size of a *part* taken for
the size of the whole: ``10^{10^{10}} - 10^{10^{10}}`` vs 0 got reward 0 and the step
``10^100000 - 10^100000 = 0`` was invalid. These tests pin that a true identity through a
huge part is never judged wrong (math: ``undecided`` or 1, steps: unverifiable or valid), and
that the refutations that are sound (``9^{9^{9^9}}`` vs 1) stay.
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterator
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grpo.v1 import common_pb2
from grpo.verifiers.math import arith
from grpo.verifiers.math.arith import (
    ArithSyntaxError,
    Magnitude,
    NotExactError,
    TooLargeError,
    evaluate,
    log10_abs,
    magnitudes_differ,
)
from grpo.verifiers.math.check import check_answer
from grpo.verifiers.steps.check import check_steps
from grpo.verifiers.steps.claims import check_claim

OK = common_pb2.SCORE_STATUS_OK
UNDECIDED = common_pb2.SCORE_STATUS_UNDECIDED
VALID, INVALID, UNVERIFIABLE = (
    common_pb2.STEP_STATUS_VALID,
    common_pb2.STEP_STATUS_INVALID,
    common_pb2.STEP_STATUS_UNVERIFIABLE,
)


def _score(gold: str, answer: str) -> tuple[int, float]:
    status, reward, _, _ = check_answer(gold, rf"The answer is $\boxed{{{answer}}}$.")
    return status, reward


def _magnitude(text: str) -> Magnitude:
    with pytest.raises(TooLargeError) as info:
        evaluate(text)
    return info.value.magnitude


# -- the fresh-user trial's strings -------------------------------------------------------


def test_the_reported_math_answers_are_undecided_not_wrong() -> None:
    status, reward, _, detail = check_answer("0", r"\boxed{10^{10^{10}} - 10^{10^{10}}}")
    assert (status, reward) == (UNDECIDED, 0.0), detail
    assert _score("0", r"9^{9^{9^9}} - 9^{9^{9^9}}") == (UNDECIDED, 0.0)
    assert _score("1", r"10^{10^{10}} / 10^{10^{10}}") == (UNDECIDED, 0.0)
    assert _score("1", r"\frac{10^{10^{10}}}{10^{10^{10}}}") == (UNDECIDED, 0.0)


def test_the_reported_steps_are_not_invalid() -> None:
    [(_, _, status, detail)] = check_steps("10^100000 - 10^100000 = 0", 64)
    assert status == UNVERIFIABLE, detail
    assert check_claim("10^100000 - 10^100000", "0") is None
    assert check_claim("9^9^9^9 - 9^9^9^9", "0") is None
    assert check_claim("10^10^10 / 10^10^10", "1") is None
    [(_, _, status, detail)] = check_steps("So 9^9^9^9 - 9^9^9^9 = 0.", 64)
    assert status == UNVERIFIABLE, detail


# -- the same kind, math verifier -----------------------------------------------------------

# (gold, answer): the answer is right, and it encloses a part too large to compute
TRUE_THROUGH_A_HUGE_PART = [
    ("1", r"10^{10^{10}} - 10^{10^{10}} + 1"),  # huge minus huge plus 1
    ("1", r"10^{10^{10}} + 1 - 10^{10^{10}}"),
    ("7", r"(10^{20000} + 7) - 10^{20000}"),
    ("0", r"10^{20000} - 10^{20000}"),
    ("0", r"-10^{20000} + 10^{20000}"),
    ("3", r"\frac{3 \cdot 10^{20000}}{10^{20000}}"),  # a quotient
    ("10", r"\frac{10^{20001}}{10^{20000}}"),
    ("1", r"10^{20000} \cdot 10^{-20000}"),
    ("1", r"(10^{10^{10}})^{0}"),
    ("1", r"2^{10^{20000} - 10^{20000}}"),  # nested powers: an exponent that cancels
    ("1", r"(10^{20000} - 10^{20000})!"),  # inside a function: 0! = 1
    ("2", r"\sqrt{(10^{20000}+2)^2 - 10^{40000} - 4 \cdot 10^{20000}}"),
    ("1", r"(-1)^{10^{20000}}"),
    ("10^{10000}", r"\sqrt{10^{20000}}"),  # both sides over the limit and equal
    ("10^{10^{10}}", r"(10^{10^{5}})^{10^{5}}"),
    ("10^{20000}", r"10^{20000} + 0"),
    ("5", r"50\cdot 10^{20000} \cdot 10^{-20001}"),
    ("1", r"0.5^{10^{20000}} \cdot 2^{10^{20000}}"),
    (r"\sqrt{2}", r"\frac{\sqrt{2} \cdot 10^{20000}}{10^{20000}}"),  # an irrational part
    # sizes past float range written two ways: a bound of inf only when it really is beyond
    (r"2^{10^{305}}", r"(2^{10^{300}})^{10^{5}}"),
    (r"2^{2^{1000}}", r"(2^{2^{990}})^{1024}"),
    (r"10^{10^{16}}", r"1e10000000000000000"),
    (r"10^{10^{301}}", "1e1" + "0" * 301),
    (r"(10^{301})!", r"(10^{301})! \cdot 1"),
]


@pytest.mark.parametrize(("gold", "answer"), TRUE_THROUGH_A_HUGE_PART)
def test_a_true_answer_through_a_huge_part_is_never_wrong(gold: str, answer: str) -> None:
    status, reward = _score(gold, answer)
    assert status in (OK, UNDECIDED)
    assert (status, reward) != (OK, 0.0), (gold, answer)


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("0", r"0 \cdot 10^{10^{10}}"),  # a huge value times 0 is 0
        ("0", r"10^{10^{10}} \cdot 0"),
        ("1", r"1^{10^{20000}}"),
        ("0", r"0^{10^{20000}}"),
        ("0", r"0e20000"),
        ("5", r"10^{10^{10}} \cdot 0 + 5"),
    ],
)
def test_an_exact_value_through_a_huge_part_is_decided(gold: str, answer: str) -> None:
    assert _score(gold, answer) == (OK, 1.0)


@pytest.mark.parametrize(
    ("gold", "answer"),
    [
        ("5", r"10^{10^{10}}"),  # huge vs small: soundly refutable
        ("1", r"9^{9^{9^9}}"),
        ("1", r"(10^{10})!"),
        ("5", r"10^{20000} - 10^{19000}"),  # one term dominates: no cancellation
        ("5", r"10^{20000} + 10^{20000}"),  # same signs: no cancellation
        ("5", r"9^{9^{9^9}} - 1"),
        ("5", r"\sqrt{10^{20000}}"),
        ("5", r"\frac{10^{30000}}{10^{20000}}"),
        ("1", r"0.5^{10^{20000}}"),  # tiny, not 0
        ("0", r"10^{-20000}"),
        ("5", r"-10^{20000}"),
        ("10^{20000}", r"-10^{20000}"),  # both huge: opposite signs
        ("10^{20000}", r"10^{30000}"),  # both huge, provably different
        ("1", r"1.0001^{1000000}"),  # about 10^43, decided before 4 million digits are built
        ("5", "1e" + "9" * 400),  # an exponent past float range
        ("5", "1e-" + "9" * 400),
        ("5", r"9^{9^{9^9}} + \sqrt{2}"),  # an irrational part never hands a huge one to sympy
        ("5", r"\sqrt{2} \cdot 9^{9^{9^9}}"),
        ("5", r"\sqrt{2}^{10^{10}}"),
    ],
)
def test_a_soundly_refutable_huge_answer_is_wrong(gold: str, answer: str) -> None:
    assert _score(gold, answer) == (OK, 0.0)


def test_a_huge_value_inside_a_function_sympy_reads_is_never_wrong() -> None:
    status, reward = _score("0", r"\sin(10^{10^{10}}) - \sin(10^{10^{10}})")
    assert (status, reward) != (OK, 0.0)


def test_a_percent_reading_is_kept_for_huge_values() -> None:
    # 10^{20004} % as 10^{20004} / 100 = 10^{20002}: not provably different from the gold
    assert _score("10^{20002}", r"10^{20004}\%")[0] == UNDECIDED


def test_irrational_parts_without_a_huge_one_still_go_to_sympy() -> None:
    for text in (r"\sqrt{2}", r"2^{1/2}", r"\sqrt{-4}", r"(1/2)!", r"\sqrt{2} \cdot \sqrt{2}"):
        with pytest.raises(NotExactError):
            evaluate(text)
    assert _score(r"\sqrt{2}", r"2^{1/2}") == (OK, 1.0)
    assert _score("2i", r"\sqrt{-4}") == (OK, 1.0)
    m = _magnitude(r"\sqrt{2}^{100001}")
    assert m.lo <= 100001 * math.log10(2) / 2 <= m.hi


def test_a_big_power_is_bounded_without_building_it() -> None:
    start = time.monotonic()
    m = _magnitude(r"1.0001^{1000000}")
    assert time.monotonic() - start < 1.0
    true = 1_000_000 * math.log10(1.0001)
    assert m.lo <= true <= m.hi and m.hi - m.lo < 1e-3


# -- the same kind, steps verifier ----------------------------------------------------------


@pytest.mark.parametrize(
    ("lhs", "rhs", "verdict"),
    [
        ("10^100000 - 10^100000 + 1", "1", None),
        ("(10^100000 + 1) - 10^100000", "1", None),
        ("10^100000 / 10^99999", "10", None),
        ("10^100000 * 10^-100000", "1", None),
        ("2^(10^100000 - 10^100000)", "1", None),
        ("(10^100000 - 10^100000)!", "1", None),
        ("10^100000", "10^100000", None),  # both huge and equal
        ("9^99999999", "9^99999999", None),
        ("10^100000 * 0", "0", True),
        ("0 * 9^9^9^9", "0", True),
        ("1^(10^100000)", "1", True),
        ("10^-20000", "0.00", True),  # rounded to the decimals written
        ("10^-20000", "0.01", False),
        ("9^99999999", "1", False),
        ("9^9999^9999", "1", False),
        ("10^100000 - 10^99000", "5", False),
        ("10^100000 + 10^100000", "5", False),
        ("10^100000", "10^200000", False),  # both huge, provably different
        ("10^100000 / 10^99999 * 0.4", "4%", None),  # 0.04 refuted, 4 undecidable
    ],
)
def test_claims_through_a_huge_part(lhs: str, rhs: str, verdict: bool | None) -> None:
    assert check_claim(lhs, rhs) is verdict


# -- properties -----------------------------------------------------------------------------

_HUGE = st.builds(
    lambda base, extra: rf"{base}^{{{20_000 + extra}}}",
    st.integers(min_value=2, max_value=99),
    st.integers(min_value=0, max_value=10**6),
) | st.sampled_from([r"10^{10^{10}}", r"9^{9^{9^9}}", r"(10^{10})!", r"7^{7^{7}}"])


@settings(max_examples=60, deadline=None)
@given(_HUGE, st.integers(min_value=-(10**6), max_value=10**6), st.integers(0, 5))
def test_identities_through_a_huge_value_are_never_wrong(huge: str, k: int, form: int) -> None:
    answer = [
        rf"{huge} - {huge} + ({k})",
        rf"({k}) + {huge} - {huge}",
        rf"\frac{{({k}) \cdot {huge}}}{{{huge}}}",
        rf"({k}) \cdot {huge} / {huge}",
        rf"({k}) + 0 \cdot {huge}",
        rf"({k})^{{{huge} - {huge} + 1}}",
    ][form]
    status, reward = _score(str(k), answer)
    assert (status, reward) != (OK, 0.0), answer
    if form == 4:
        assert (status, reward) == (OK, 1.0)
    steps = answer.replace(r"\frac{", "(").replace("}{", ")/(").replace("}", ")")
    steps = steps.replace(r"\cdot", "*").replace("{", "(")
    assert check_claim(steps, str(k)) is not False, steps


@settings(max_examples=60, deadline=None)
@given(_HUGE, st.integers(min_value=-(10**6), max_value=10**6))
def test_a_huge_value_against_a_small_one_is_refuted(huge: str, k: int) -> None:
    assert _score(str(k), huge) == (OK, 0.0)
    assert _score(str(k), rf"{huge} + ({k})") == (OK, 0.0)
    plain = huge.replace("{", "(").replace("}", ")")
    assert check_claim(plain, str(k)) is False


@settings(max_examples=80, deadline=None)
@given(
    st.integers(min_value=2, max_value=50),
    st.integers(min_value=1, max_value=99),
    st.integers(min_value=290, max_value=312) | st.integers(min_value=0, max_value=330),
    st.sampled_from([10, 1024, 10**5]) | st.integers(min_value=1, max_value=10**6),
)
def test_one_huge_value_written_two_ways_is_never_wrong(b: int, k: int, i: int, y: int) -> None:
    """``b^{x·y}`` vs ``(b^x)^y``, ``1e{n}`` vs ``10^{n}``: exponents up to and past float
    range (about 10^308), so a bound of ``inf`` is only ever claimed when it is true."""
    x = k * 10**i
    for gold, answer in (
        (rf"{b}^{{{x * y}}}", rf"({b}^{{{x}}})^{{{y}}}"),
        (rf"10^{{{x}}}", f"1e{x}"),
        (rf"10^{{-{x}}}", f"1e-{x}"),
    ):
        assert _score(gold, answer) != (OK, 0.0), (gold, answer)
    assert check_claim(f"{b}^{x * y}", f"({b}^{x})^{y}") is not False


@contextlib.contextmanager
def _small_limits(digits: int) -> Iterator[None]:
    """The exact reader with a tiny size limit, so that bounds meet computable truths."""
    saved = arith.MAX_DIGITS, arith._MAX_BITS, arith._MAX_FACTORIAL
    arith.MAX_DIGITS, arith._MAX_BITS = digits, int(digits * 3.33)
    arith._MAX_FACTORIAL = 7
    try:
        yield
    finally:
        arith.MAX_DIGITS, arith._MAX_BITS, arith._MAX_FACTORIAL = saved


_LEAF = st.integers(min_value=0, max_value=40).map(str) | st.sampled_from(
    ["0.5", "1.25", "12345", "99999", "2e5", "0e7"]
)
_EXPR = st.recursive(
    _LEAF,
    lambda inner: st.one_of(
        st.tuples(inner, st.sampled_from("+-*/"), inner).map(lambda t: f"({t[0]}{t[1]}{t[2]})"),
        st.tuples(inner, inner).map(lambda t: f"({t[0]})^{{{t[1]}}}"),
        st.tuples(inner, st.integers(-3, 5)).map(lambda t: f"({t[0]})^{{{t[1]}}}"),
        inner.map(lambda t: f"-({t})"),
        inner.map(lambda t: f"({t})!"),
        inner.map(lambda t: f"({t})%"),
        inner.map(lambda t: rf"\sqrt{{{t}}}"),
        inner.map(lambda t: rf"\sqrt[3]{{{t}}}"),
    ),
    max_leaves=6,
)


@settings(max_examples=800, deadline=None)
@given(_EXPR)
def test_bounds_always_hold_for_the_whole_value(text: str) -> None:
    """Evaluated with a 4-digit limit, every Magnitude must contain the value the real
    reader computes exactly, with the right sign and integer flags."""
    try:
        truth = evaluate(text).exact
    except (TooLargeError, NotExactError, ArithSyntaxError):
        return
    with _small_limits(4):
        try:
            small = evaluate(text).exact
        except TooLargeError as exc:
            m = exc.magnitude
        except (NotExactError, ArithSyntaxError):
            return
        else:
            assert small == truth
            return
    assert not magnitudes_differ(m, truth), (text, m, truth)
    if truth == 0:
        assert not m.nonzero
        return
    assert m.lo <= log10_abs(truth) <= m.hi, (text, m, float(truth))
    assert m.sign * (1 if truth > 0 else -1) >= 0, (text, m)
    assert not m.integer or truth.denominator == 1, (text, m)


def test_magnitudes_differ_rules() -> None:
    big = Magnitude(20_000.0, 20_000.0, 1, True)
    assert magnitudes_differ(big, Fraction(5))
    assert magnitudes_differ(Fraction(0), big)  # lo > -inf: never 0
    assert not magnitudes_differ(Fraction(0), Magnitude(-math.inf, 20_000.0))  # may cancel
    assert magnitudes_differ(big, Magnitude(20_000.0, 20_000.0, -1))  # opposite signs
    assert not magnitudes_differ(big, Magnitude(20_000.0, 20_000.5, 1))
    assert not magnitudes_differ(Magnitude(math.inf, math.inf), Magnitude(math.inf, math.inf))
