"""Property tests of the math check: whole kinds of wrong answers never get reward 1.

Each property is one kind a fresh-user tester found (issue 11, second round): choice letters,
off-by-one integers written as decimals, swapped assignments, unicode superscripts, symbolic
answers that differ off the positive axis or by a constant, sets with repeats. Hypothesis
draws the numbers, letters and polynomials; the check runs in-process (as in a worker).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from grpo.v1 import common_pb2
from grpo.verifiers.math.check import check_answer

OK = common_pb2.SCORE_STATUS_OK
_LETTERS = "ABCDE"
_SUPER = dict(zip("0123456789", "⁰¹²³⁴⁵⁶⁷⁸⁹", strict=True))


def _score(gold: str, answer: str) -> tuple[int, float]:
    status, reward, _, _ = check_answer(gold, rf"The final answer is $\boxed{{{answer}}}$.")
    return status, reward


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=-(10**12), max_value=10**12), st.sampled_from([-2, -1, 1, 2, 7]))
def test_an_integer_written_as_a_decimal_compares_exactly(n: int, k: int) -> None:
    assert _score(str(n), f"{n + k}.0") == (OK, 0.0)
    assert _score(f"{n}.0", str(n + k)) == (OK, 0.0)
    assert _score(str(n), f"{n}.0") == (OK, 1.0)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(_LETTERS),
    st.sampled_from(_LETTERS),
    st.sampled_from(
        ["{0}, {1}", r"\text{{{0} and {1}}}", r"\text{{{0} or {1}}}", "({0}) or ({1})"]
    ),
)
def test_a_hedge_of_several_choices_is_never_a_choice(gold: str, other: str, form: str) -> None:
    if other == gold:
        return
    for first, second in ((gold, other), (other, gold)):
        assert _score(gold, form.format(first, second))[1] == 0.0


@settings(max_examples=30, deadline=None)
@given(st.sampled_from("abcde"), st.integers(min_value=1, max_value=9))
def test_a_lowercase_letter_gold_is_a_symbol_not_a_choice(letter: str, k: int) -> None:
    for answer in (f"{letter} + {k}", f"{letter} - {k}", rf"{k} \cdot {letter}" if k > 1 else "0"):
        assert _score(letter, answer)[1] == 0.0
    assert _score(letter, letter)[1] == 1.0


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.integers(min_value=-50, max_value=50), min_size=2, max_size=3, unique=True),
    st.sampled_from(["x", "a", "p", "m"]),
)
def test_assignments_keep_their_variables(values: list[int], first: str) -> None:
    names = [first, "y" if first != "y" else "z", "w"][: len(values)]
    gold = ", ".join(f"{n}={v}" for n, v in zip(names, values, strict=True))
    rotated = values[1:] + values[:1]  # every variable gets another's value
    wrong = ", ".join(f"{n}={v}" for n, v in zip(names, rotated, strict=True))
    reordered = ", ".join(f"{n}={v}" for n, v in reversed(list(zip(names, values, strict=True))))
    assert _score(gold, wrong) == (OK, 0.0)
    assert _score(gold, reordered) == (OK, 1.0)
    assert _score(f"{names[0]}={values[0]}", f"q={values[0]}") == (OK, 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=2, max_value=12), st.integers(min_value=2, max_value=12))
def test_unicode_superscripts_are_powers_never_digits(base: int, exponent: int) -> None:
    written = str(base) + "".join(_SUPER[d] for d in str(exponent))
    assert _score(str(base**exponent), written) == (OK, 1.0)
    glued = int(f"{base}{exponent}")
    if glued != base**exponent:
        assert _score(str(glued), written) == (OK, 0.0)


_POLY = st.lists(st.integers(min_value=-5, max_value=5), min_size=1, max_size=4)


def _poly(coefficients: list[int], var: str = "x") -> str:
    terms = [f"{c}{var}^{{{i + 1}}}" for i, c in enumerate(coefficients) if c]
    return " + ".join(terms) or "0"


@settings(max_examples=25, deadline=None)
@given(_POLY, st.integers(min_value=-9, max_value=9).filter(bool))
def test_a_symbolic_answer_off_by_a_constant_is_a_decided_zero(coef: list[int], c: int) -> None:
    gold = _poly(coef) + " + y"
    assert _score(gold, f"{gold} + {c}") == (OK, 0.0)
    assert _score(gold, f"y + {_poly(coef)}") == (OK, 1.0)


@settings(max_examples=20, deadline=None)
@given(st.integers(min_value=1, max_value=4))
def test_answers_equal_only_for_positive_x_are_wrong(k: int) -> None:
    odd = 2 * k - 1
    assert _score(f"x^{{{odd}}}", f"|x|^{{{odd}}}") == (OK, 0.0)
    assert _score(f"x^{{{odd}}}", rf"\sqrt{{x^{{{2 * odd}}}}}") == (OK, 0.0)
    assert _score(rf"{2 * k}\ln x", rf"\ln x^{{{2 * k}}}") == (OK, 0.0)
    assert _score("x", rf"x + e^{{-{10 * k}x}}") == (OK, 0.0)
    assert _score(f"x^{{{2 * k}}}", f"|x|^{{{2 * k}}}") == (OK, 1.0)


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(min_value=-20, max_value=20), min_size=1, max_size=5), st.randoms())
def test_sets_ignore_repeats_and_order(items: list[int], rng: object) -> None:
    distinct = sorted(set(items))
    shuffled = items + items[:1]
    rng.shuffle(shuffled)  # type: ignore[attr-defined]
    gold = r"\{" + ", ".join(map(str, distinct)) + r"\}"
    assert _score(gold, r"\{" + ", ".join(map(str, shuffled)) + r"\}") == (OK, 1.0)
    extra = max(distinct) + 1
    assert _score(gold, r"\{" + ", ".join(map(str, [*shuffled, extra])) + r"\}") == (OK, 0.0)


@settings(max_examples=15, deadline=None)
@given(
    st.integers(min_value=10, max_value=60),
    st.sampled_from([r"\sin x", "x", "x^{2}", r"e^{x}", "1"]),
)
def test_a_tiny_extra_term_is_wrong(k: int, term: str) -> None:
    assert _score(r"x^{2} + \cos x", rf"x^{{2}} + \cos x + 10^{{-{k}}} {term}") == (OK, 0.0)


@settings(max_examples=30, deadline=None)
@given(st.integers(min_value=1, max_value=10**6), st.sampled_from([1, 2, 7, 11]))
def test_a_decimal_is_never_close_enough_to_another_finite_decimal(n: int, d: int) -> None:
    exact = f"{n}.{d:02d}"  # n.01 and its neighbour one unit further in the last place
    assert _score(exact, f"{n}.{d + 1:02d}") == (OK, 0.0)
    assert _score(rf"\sqrt{{{n}}}^{{2}}", f"{n}.0000001") == (OK, 0.0)
