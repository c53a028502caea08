"""Equivalence of two answers in the answer model (``grpo.verifiers.math.answer``).

:func:`answers_equal` consumes the model, so several boxes, a list in the gold and matrix
entries are types, not special cases:

- an :class:`Equation` that assigns a bare variable equals its right side (``y = 5`` vs
  ``5``); any other equation never equals a non-equation (``2x = 4`` vs ``4``, ``x^2 = 16``
  vs ``16`` are not equal); two equations are equal when they assign equal values to the
  same variable (``z = 7`` vs ``x = 7`` is not equal, nor ``a=1, b=2`` vs ``a=2, b=1``) or
  are proportional (``2y = 4x + 6`` vs ``y = 2x + 3``); two names of one function's value
  (``f(x)`` and ``y``, ``f(x)`` and ``g(x)``) compare their right sides;
- :class:`Items` vs :class:`Items`: the same number of items, matched one to one in any
  order (a list keeps multiplicity: ``1, 1, 2`` vs ``1, 2`` is not equal); when either side
  is a set ``\\{..\\}``, repeats count once first (``\\{1, 1, 2\\}`` = ``\\{1, 2\\}``);
  a one-item collection equals its item (``\\{5\\}`` vs ``5``); assignments against
  unnamed values are matched in order (``a=1, b=2`` vs ``1, 2`` is equal, vs ``2, 1`` not);
- :class:`Tuple` vs :class:`Tuple`: same length, in order; a two-item ``( )`` tuple equals the
  open :class:`Interval` with those endpoints; a tuple equals a one-row or one-column
  :class:`Matrix` with the same entries (a vector);
- :class:`Interval`: same closedness at both ends, equal endpoints; :class:`Union` and
  :class:`Intersection`: their parts matched one to one; :class:`Difference`: equal wholes and
  equal removed parts; when one side is an interval, union, intersection or difference and
  that fails, both sides as sympy sets of the real line (``grpo.verifiers.math.realsets``,
  imported lazily): ``\\mathbb{R} \\setminus \\{0\\}`` equals ``(-\\infty, 0) \\cup (0,
  \\infty)`` and ``x \\ne 0``;
- :class:`BaseNumber`: the same digits in the same base; against a plain numeral, the same
  digits when the *gold* carries the base (``1011_2`` vs ``1011``) — a gold without a base
  equals a based answer only in base ten (``1011`` vs ``1011_2`` is not equal: the gold may be
  decimal); the value in another base never (``1011_2`` vs ``11``);
- :class:`Ratio`: two ratios of as many terms are equal when proportional (``1:2`` vs ``2:4``;
  a ratio of zeros equals nothing); a two-term ratio ``a:b`` equals the number ``a/b``
  (``1:2`` vs ``\\frac{1}{2}``, as math-verify reads it); a longer one never equals a number;
- :class:`Matrix`: same shape, equal entries (``bmatrix`` and ``pmatrix`` alike; a transpose
  differs);
- :class:`Text`: equal words; never equal to a number;
- :class:`Scalar` leaves: equal normalized texts; else both read exactly by
  ``grpo.verifiers.math.arith`` (no sympy): exact values equal, or, when a decimal was
  written, ``|g - a| <= rel_tol · max(|g|, |a|)``; a value over ``arith.MAX_DIGITS`` digits
  (or with such a part) is not computed: it differs when the bounds of the whole values
  prove it (``arith.magnitudes_differ``: ``9^{9^{9^9}}`` vs 1), else the comparison is
  undecided (``10^{10^{10}} - 10^{10^{10}}`` vs 0); a percent on one side only may be read
  as written or divided by 100 (``50%`` vs ``0.5``); else sympy
  (``grpo.verifiers.math.symbolic``, imported here lazily).

Errors: :class:`AnswerParseError` (``side`` = ``"gold"`` or ``"answer"``) for an unreadable
leaf, :class:`UndecidedError` when the values are well-formed but could not be compared
(values too large to compute and not provably different, a sympy failure).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import get_args

from grpo.verifiers.math.answer import (
    Answer,
    AnswerSyntaxError,
    BaseNumber,
    Difference,
    Equation,
    Intersection,
    Interval,
    Items,
    Matrix,
    Ratio,
    Relations,
    Scalar,
    Text,
    Time,
    Tuple,
    Union,
    read_answer,
)
from grpo.verifiers.math.arith import (
    ArithSyntaxError,
    Magnitude,
    NotExactError,
    TooLargeError,
    Value,
    evaluate,
    magnitudes_differ,
)

__all__ = ["AnswerParseError", "UndecidedError", "answers_equal"]


class AnswerParseError(ValueError):
    """A leaf cannot be read; ``side`` says whose (``"gold"`` or ``"answer"``)."""

    def __init__(self, side: str, message: str) -> None:
        super().__init__(f"{side}: {message}")
        self.side = side


class UndecidedError(RuntimeError):
    """Both values are well-formed, but the verifier could not compare them."""


def answers_equal(
    gold: Answer | str | int | Fraction,
    answer: Answer | str | int | Fraction,
    rel_tol: float | None = None,
) -> bool:
    """Decide whether ``answer`` is equivalent to ``gold`` (rules in the module docstring).

    Args:
        gold: the gold answer: its model (``read_answer``), or its text (``"3/4"``,
            ``"\\frac{3}{4}"``, ``"x = 2"``), normalized and read here
            (``normalize_answer``, then ``read_answer``); an ``int`` or a ``Fraction`` is
            read as its text.
        answer: the response's final answer, in the same forms (the answer itself, not a
            whole response: ``extract_answer`` finds it in one).
        rel_tol: None for the MATH convention on approximations (a written decimal never
            equals a value no finite decimal is, unless the gold is that decimal); a float
            for the opt-in tolerance rule (``_Comparer._values_equal``).

    Returns:
        True when equivalent.

    Raises:
        TypeError: a side is none of these (a float, whose decimal text is ambiguous, a list,
            None...); the message names the side and its type.
        AnswerParseError: a side's text is empty or cannot be read, or a leaf cannot be
            parsed (``side`` names it).
        UndecidedError: the two values could not be compared.
    """
    return _Comparer(rel_tol).equal(_model_of("gold", gold), _model_of("answer", answer))


_NODES = get_args(Answer)


def _model_of(side: str, value: object) -> Answer:
    """The answer model of ``value`` (a model, text, an ``int`` or a ``Fraction``).

    Raises:
        TypeError: another type. AnswerParseError: text that cannot be read.
    """
    if isinstance(value, _NODES):
        return value  # type: ignore[return-value]
    if isinstance(value, bool) or not isinstance(value, str | int | Fraction):
        raise TypeError(
            f"answers_equal: {side} must be answer text (str), an int, a Fraction or an answer "
            f"model (read_answer), got {type(value).__name__} {value!r:.60}"
        )
    from grpo.verifiers.math.normalize import normalize_answer

    try:
        return read_answer(normalize_answer(str(value)))
    except AnswerSyntaxError as exc:
        raise AnswerParseError(side, f"{exc} (text {str(value)!r:.60})") from None


class _Comparer:
    def __init__(self, rel_tol: float | None) -> None:
        self.rel_tol = rel_tol
        self.cache: dict[tuple[int, int], bool] = {}

    def equal(self, g: Answer, a: Answer) -> bool:
        if isinstance(g, Equation) or isinstance(a, Equation):
            return self._equations(g, a)
        if isinstance(g, _SETS) or isinstance(a, _SETS):
            return self._sets(g, a)
        return self._structural(g, a)

    def _structural(self, g: Answer, a: Answer) -> bool:
        if isinstance(g, Intersection | Difference) or isinstance(a, Intersection | Difference):
            if type(g) is not type(a):
                return False
            if isinstance(g, Difference) and isinstance(a, Difference):
                return self.equal(g.whole, a.whole) and self.equal(g.removed, a.removed)
            assert isinstance(g, Intersection) and isinstance(a, Intersection)
            return len(g.parts) == len(a.parts) and self._match(g.parts, a.parts)
        named = self._named_tuple(g, a)
        if named is not None:
            return named
        if isinstance(g, Items | Union) or isinstance(a, Items | Union):
            return self._collections(g, a)
        if isinstance(g, Ratio) and isinstance(a, Time):
            return self._ratio(g, Ratio(a.terms))  # a ratio asked: 5:10 is 1:2
        if isinstance(g, Time) or isinstance(a, Time):
            # a clock time asked: never a ratio (4:00 vs 8:00), equal times only
            return isinstance(g, Time) and isinstance(a, Time) and bool(g.minutes & a.minutes)
        if isinstance(g, Relations) or isinstance(a, Relations):
            return self._relations(g, a)
        if isinstance(g, BaseNumber) or isinstance(a, BaseNumber):
            return _based(g, a)
        if isinstance(g, Ratio) or isinstance(a, Ratio):
            return self._ratio(g, a)
        if isinstance(g, Scalar) and isinstance(a, Scalar):
            return self._leaf(g, a)
        if isinstance(g, Text) or isinstance(a, Text):
            return _words(g) is not None and _words(g) == _words(a)
        if isinstance(g, Tuple | Interval | Matrix) or isinstance(a, Tuple | Interval | Matrix):
            return self._ordered(g, a)
        return False

    def _named_tuple(self, g: Answer, a: Answer) -> bool | None:
        """A tuple against assignments of as many different variables, in order:
        ``(2, -1)`` vs ``x=2, y=-1``; a tuple gold against a list of plain values, in order
        (``(2, -1)`` vs ``2, -1``; never ``-1, 2``). None when the two are not of that shape."""
        if (
            isinstance(g, Tuple)
            and isinstance(a, Items)
            and not a.braces
            and len(a.items) > 1
            and all(isinstance(x, Scalar) for x in a.items)
        ):  # x = \boxed{2} and y = \boxed{-1}: the values of the point, in its order
            return len(g.items) == len(a.items) and all(
                self.equal(x, y) for x, y in zip(g.items, a.items, strict=True)
            )
        for t, n in ((g, a), (a, g)):
            if not (isinstance(t, Tuple) and isinstance(n, Items)):
                continue
            names = [_name(x.variable) for x in n.items if isinstance(x, Equation) and x.variable]
            if len(names) != len(n.items) or len(set(names)) != len(names):
                continue
            if len(t.items) != len(n.items):
                return False
            pairs = zip(t.items, n.items, strict=True)
            if t is g:
                return all(self.equal(x, y) for x, y in pairs)
            return all(self.equal(y, x) for x, y in pairs)
        return None

    def _relations(self, g: Answer, a: Answer) -> bool:
        """Chains of relations: the same terms and relations, read either way
        (``0 < a < b < 1`` is ``1 > b > a > 0``)."""
        if not (isinstance(g, Relations) and isinstance(a, Relations)):
            return False
        if len(g.terms) != len(a.terms):
            return False
        flip = {"lt": "gt", "gt": "lt", "le": "ge", "ge": "le", "ne": "ne"}
        readings = [(a.terms, a.kinds)]
        readings.append((a.terms[::-1], tuple(flip[k] for k in a.kinds[::-1])))
        return any(
            kinds == g.kinds and all(self._leaf(x, y) for x, y in zip(g.terms, terms, strict=True))
            for terms, kinds in readings
        )

    def _sets(self, g: Answer, a: Answer) -> bool:
        """Part by part first; else both as sympy sets of the real line (``realsets``)."""
        if self._structural(g, a):
            return True
        from grpo.verifiers.math import realsets

        return bool(self._sympy(realsets.sets_equal, g, a))

    def _ratio(self, g: Answer, a: Answer) -> bool:
        if isinstance(g, Ratio) and isinstance(a, Ratio):
            if len(g.terms) != len(a.terms):
                return False
            zero = Scalar("0")
            if all(self._leaf(t, zero) for t in g.terms) or all(
                self._leaf(zero, t) for t in a.terms
            ):
                return False  # 0:0 is no ratio; it would be proportional to every one
            n = len(g.terms)
            return all(
                self._leaf(
                    Scalar(rf"({g.terms[i].text})\cdot({a.terms[j].text})"),
                    Scalar(rf"({g.terms[j].text})\cdot({a.terms[i].text})"),
                )
                for i in range(n)
                for j in range(i + 1, n)
            )
        ratio, other = (g, a) if isinstance(g, Ratio) else (a, g)
        assert isinstance(ratio, Ratio)
        if not isinstance(other, Scalar) or len(ratio.terms) != 2:
            return False
        value = Scalar(rf"\frac{{{ratio.terms[0].text}}}{{{ratio.terms[1].text}}}")
        return self._leaf(value, other) if ratio is g else self._leaf(other, value)

    def _equations(self, g: Answer, a: Answer) -> bool:
        if isinstance(g, Equation) and isinstance(a, Equation):
            if (g.variable and _name(g.variable) == _name(a.variable)) or _same_lhs(g, a):
                return self.equal(g.rhs, a.rhs)  # (a, b) = (1, 2) vs (a, b) = (1, 2) too
            if _function_values(g.variable, a.variable):
                return self.equal(g.rhs, a.rhs)  # f(x) = 3x - 2 vs y = 3x - 2
            if g.variable and a.variable and (_constant(g.rhs) or _constant(a.rhs)):
                return False  # z = 7 vs x = 7: another variable's value
            # proportional: y = 2x + 3 vs x = (y - 3)/2, 2y = 4x + 6 vs y = 2x + 3
            if isinstance(g.rhs, Scalar) and isinstance(a.rhs, Scalar):
                from grpo.verifiers.math import symbolic

                return self._sympy(symbolic.proportional, (g.lhs, g.rhs.text), (a.lhs, a.rhs.text))
            return False
        if isinstance(g, Equation):
            return bool(g.variable) and self.equal(g.rhs, a)
        assert isinstance(a, Equation)
        return bool(a.variable) and self.equal(g, a.rhs)

    def _collections(self, g: Answer, a: Answer) -> bool:
        gi, ai = _members(g), _members(a)
        if _is_set(g) or _is_set(a):  # a set: duplicates count once (\{1, 1, 2\} = \{1, 2\})
            gi, ai = self._distinct(gi), self._distinct(ai)
        if len(gi) == 1 and len(ai) == 1 and (gi[0] is not g or ai[0] is not a):
            return self.equal(gi[0], ai[0])
        if isinstance(g, Items | Union) != isinstance(a, Items | Union):
            return False
        if type(g) is not type(a) or len(gi) != len(ai):
            return False
        if _named(gi) != _named(ai):
            # a=1, b=2 vs 2, 1: unnamed values answer the named variables in their order
            return all(self.equal(x, y) for x, y in zip(gi, ai, strict=True))
        return self._match(gi, ai)

    def _distinct(self, items: tuple[Answer, ...]) -> tuple[Answer, ...]:
        """The items without repeats (the first of equal items kept)."""
        kept: list[Answer] = []
        for item in items:
            if not any(self.equal(k, item) for k in kept):
                kept.append(item)
        return tuple(kept)

    def _match(self, gi: tuple[Answer, ...], ai: tuple[Answer, ...]) -> bool:
        """A one-to-one matching of equal items exists (augmenting paths, Kuhn)."""
        owner: dict[int, int] = {}

        def place(i: int, seen: set[int]) -> bool:
            for j in range(len(ai)):
                if j in seen or not self.equal(gi[i], ai[j]):
                    continue
                seen.add(j)
                if j not in owner or place(owner[j], seen):
                    owner[j] = i
                    return True
            return False

        return all(place(i, set()) for i in range(len(gi)))

    def _ordered(self, g: Answer, a: Answer) -> bool:
        for t, i in ((g, a), (a, g)):
            pair = _open_pair(t, i)
            if pair is not None:
                (t_lo, t_hi), (i_lo, i_hi) = pair
                if t is g:  # gold first, always
                    return self.equal(t_lo, i_lo) and self.equal(t_hi, i_hi)
                return self.equal(i_lo, t_lo) and self.equal(i_hi, t_hi)
        ge, ae = _entries(g), _entries(a)
        if ge is None or ae is None:
            if isinstance(g, Interval) and isinstance(a, Interval):
                return (
                    g.lo_closed == a.lo_closed
                    and g.hi_closed == a.hi_closed
                    and self._leaf(g.lo, a.lo)
                    and self._leaf(g.hi, a.hi)
                )
            return False
        gshape, gitems = ge
        ashape, aitems = ae
        vectors = isinstance(g, Tuple) != isinstance(a, Tuple) and _vector_pair(gshape, ashape)
        if gshape != ashape and not vectors:
            return False
        return len(gitems) == len(aitems) and all(
            self.equal(x, y) for x, y in zip(gitems, aitems, strict=True)
        )

    def _leaf(self, g: Scalar, a: Scalar) -> bool:
        if g.text == a.text and g.percent == a.percent:
            return True
        gv = _exact(g.text, "gold")
        av = _exact(a.text, "answer")
        if isinstance(gv, Value) and isinstance(av, Value):
            return any(
                self._values_equal(x, y, _rounded(g, gv), _rounded(a, av))
                for x in _readings(gv.exact, g.percent, a.percent)
                for y in _readings(av.exact, a.percent, g.percent)
            )
        if isinstance(gv, TooLargeError) or isinstance(av, TooLargeError):
            return self._huge(g, a, gv, av)
        from grpo.verifiers.math import symbolic

        texts = [(x, y) for x in _texts(g, a) for y in _texts(a, g)]
        return any(self._sympy(symbolic.leaves_equal, x, y, self.rel_tol) for x, y in texts)

    def _values_equal(
        self, g: Fraction, a: Fraction, g_rounded: int | None, a_rounded: int | None
    ) -> bool:
        """Exact values exactly, and one rule for approximations.

        ``*_rounded`` is the side's decimal places when it is a written decimal (-1: a decimal
        without a point, ``1e-4``, or a percent), else None.

        - MATH convention (``rel_tol`` None, the default): a written decimal is the rational
          it spells and compares exactly, so it never equals a value no finite decimal is
          (``1.73205`` vs ``\\sqrt{3}``, ``0.333333`` vs ``\\frac13``: 0), unless the gold
          is itself that decimal (``0.33`` vs ``0.33``; ``\\frac13`` vs a gold ``0.33``: 0,
          the gold asks for the decimal).
        - Tolerance (opt-in ``rel_tol``): a written decimal on either side equals a value no
          finite decimal is when ``|g - a| <= rel_tol · max(|g|, |a|)`` and below one unit in
          the decimal's last written place (``0.333333`` vs ``\\frac13``: 1).

        Either way, values that finite decimals write compare exactly (``1234568.0`` vs
        1234567, ``0.10000001`` vs ``0.1``: 0).
        """
        if g == a:
            return True
        if self.rel_tol is None:
            return False
        for places, other in ((a_rounded, g), (g_rounded, a)):
            if places is None or _finite_decimal(other):
                continue
            d = abs(g - a)
            if d > Fraction(str(self.rel_tol)) * max(abs(g), abs(a)):
                continue
            if places < 0 or d < Fraction(1, 10**places):
                return True
        return False

    def _huge(
        self,
        g: Scalar,
        a: Scalar,
        gv: Value | TooLargeError | None,
        av: Value | TooLargeError | None,
    ) -> bool:
        """A side too large to compute exactly: not equal only when magnitudes prove it.

        Each side is its exact value, the bounds of its *whole* value
        (``TooLargeError.magnitude``: a part's size says nothing of ``10^{10^{10}} -
        10^{10^{10}}``), or, for a side that is not exact arithmetic, sympy's ``log10 |value|``
        of it. They are not equal when ``arith.magnitudes_differ`` proves it for every reading
        of a percent on one side (``x%`` as ``x`` or ``x/100``).

        Raises:
            UndecidedError: the magnitudes do not prove a difference (similar sizes, a sum that
                may cancel, both huge and alike, a symbolic side without a numeric size).
        """
        readings: list[list[Fraction | Magnitude]] = []
        for scalar, value, other, side in ((g, gv, a, "gold"), (a, av, g, "answer")):
            if isinstance(value, TooLargeError):
                size: Fraction | Magnitude = value.magnitude
            elif isinstance(value, Value):
                size = value.exact
            else:
                from grpo.verifiers.math import symbolic

                log10 = self._sympy(symbolic.magnitude_of, scalar.text, side)
                if log10 is None:
                    raise UndecidedError("a value too large to compute against a symbolic one")
                slack = 1e-6 * abs(log10) + 1e-6  # sympy's 30 digits, with room
                size = Magnitude(log10 - slack, log10 + slack)
            readings.append(list(_size_readings(size, scalar.percent, other.percent)))
        if all(magnitudes_differ(x, y) for x in readings[0] for y in readings[1]):
            return False
        raise UndecidedError("a value too large to compute exactly, not provably different")

    def _sympy(self, fn, *args):  # type: ignore[no-untyped-def]
        from grpo.verifiers.math import symbolic

        try:
            return fn(*args)
        except symbolic.SympyParseError as exc:
            raise AnswerParseError(getattr(exc, "side", "answer"), str(exc)) from exc
        except (RecursionError, MemoryError):
            raise
        except Exception as exc:  # a sympy crash: the verifier's failure, not the response's
            raise UndecidedError(f"sympy failed: {type(exc).__name__}: {exc}"[:300]) from exc


_SETS = (Interval, Union, Intersection, Difference)
_NUMERAL = re.compile(r"^[0-9A-Za-z]+$")


def _based(g: Answer, a: Answer) -> bool:
    """Base subscripts (rules in the module docstring)."""
    if isinstance(g, BaseNumber) and isinstance(a, BaseNumber):
        return g.base == a.base and g.digits == a.digits
    if isinstance(g, BaseNumber):
        return _digits(a) == g.digits
    assert isinstance(a, BaseNumber)
    return a.base == 10 and _digits(g) == a.digits


def _digits(s: Answer) -> str | None:
    """A plain numeral's digits, upper-cased without leading zeros (``ABA`` reads as words)."""
    if isinstance(s, Text):
        text = s.words
    elif isinstance(s, Scalar) and not s.percent:
        text = s.text
    else:
        return None
    if not _NUMERAL.match(text):
        return None
    return text.upper().lstrip("0") or "0"


def _exact(text: str, side: str) -> Value | TooLargeError | None:
    """The exact value of a leaf, its size error, or None when it is not exact arithmetic."""
    try:
        return evaluate(text)
    except NotExactError:
        return None
    except TooLargeError as exc:
        return exc
    except ArithSyntaxError as exc:
        if any(ch.isalpha() for ch in text.replace("\\frac", "")):
            return None  # letters: let sympy read it
        raise AnswerParseError(side, str(exc)) from exc


_PLACES = re.compile(r"\.(\d+)")


def _rounded(s: Scalar, value: Value) -> int | None:
    """Decimal places written (the most of any literal), -1 for ``1e-4``; None: no decimal."""
    if not value.decimal:
        return None
    if s.percent:
        return -1
    places = [len(m.group(1)) for m in _PLACES.finditer(s.text)]
    return max(places) if places else -1


def _finite_decimal(value: Fraction) -> bool:
    """The value has a finite decimal expansion (its denominator is 2^a 5^b)."""
    den = value.denominator
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1


def _size_readings(
    size: Fraction | Magnitude, percent: bool, other_percent: bool
) -> tuple[Fraction | Magnitude, ...]:
    """``_readings`` of an exact value or of a Magnitude (``/100`` lowers its bounds by 2)."""
    if isinstance(size, Fraction):
        return _readings(size, percent, other_percent)
    if percent and not other_percent:
        return size, Magnitude(size.lo - 2, size.hi - 2, size.sign, False)
    return (size,)


def _readings(value: Fraction, percent: bool, other_percent: bool) -> tuple[Fraction, ...]:
    """``50%`` against a side without ``%``: 50 as written, or 0.5."""
    if percent and not other_percent:
        return value, value / 100
    return (value,)


def _texts(s: Scalar, other: Scalar) -> tuple[str, ...]:
    if s.percent and not other.percent:
        return s.text, f"({s.text})/100"
    return (s.text,)


def _constant(a: Answer) -> bool:
    return isinstance(a, Scalar) and not any(ch.isalpha() for ch in a.text.replace("\\frac", ""))


def _words(a: Answer) -> str | None:
    if isinstance(a, Text):
        return a.words
    if isinstance(a, Scalar) and a.text.replace(" ", "").isalpha():
        return " ".join(a.text.lower().split())
    return None


def _same_lhs(g: Equation, a: Equation) -> bool:
    return g.lhs.replace(" ", "") == a.lhs.replace(" ", "")


def _name(variable: str) -> str:
    """A variable's name without subscript braces: ``x_{1}`` and ``x_1`` are one."""
    return variable.replace("{", "").replace("}", "")


_APPLIED = re.compile(r"^[A-Za-z](?:\^\{?-1\}?)?\(\s*([a-z](?:\s*,\s*[a-z])*)\s*\)$")


def _function_values(g: str, a: str) -> bool:
    """Two names of one function's value: ``f(x)`` and ``y``, ``f(x)`` and ``g(x)`` (the same
    variables), so ``f(x) = 3x - 2`` and ``y = 3x - 2`` state the same function."""
    mg, ma = _APPLIED.match(g.replace(" ", "")), _APPLIED.match(a.replace(" ", ""))
    if mg is not None and ma is not None:
        return mg.group(1) == ma.group(1)
    return (mg is not None and a == "y") or (ma is not None and g == "y")


def _named(items: tuple[Answer, ...]) -> bool:
    """The items assign two or more variables (``a = 1, b = 2``; not the roots ``n = 4, 3``)."""
    names = {_name(x.variable) for x in items if isinstance(x, Equation) and x.variable}
    return len(names) > 1


def _is_set(a: Answer) -> bool:
    return isinstance(a, Items) and a.braces


def _members(a: Answer) -> tuple[Answer, ...]:
    if isinstance(a, Items):
        return a.items
    if isinstance(a, Union):
        return a.parts
    return (a,)


def _entries(a: Answer) -> tuple[tuple[int, int], tuple[Answer, ...]] | None:
    """(shape, entries in row order) of a tuple, an open two-point interval or a matrix."""
    if isinstance(a, Tuple):
        return (1, len(a.items)), a.items
    if isinstance(a, Matrix):
        return (len(a.rows), len(a.rows[0])), tuple(x for row in a.rows for x in row)
    return None


def _open_pair(t: Answer, i: Answer) -> tuple[tuple[Answer, Answer], tuple[Answer, Answer]] | None:
    """A two-item ``( )`` tuple and an open interval: their endpoints, else None."""
    if not (isinstance(t, Tuple) and isinstance(i, Interval)):
        return None
    if t.brackets != "()" or len(t.items) != 2 or i.lo_closed or i.hi_closed:
        return None
    return (t.items[0], t.items[1]), (i.lo, i.hi)


def _vector_pair(s1: tuple[int, int], s2: tuple[int, int]) -> bool:
    """A tuple (1 x n) against a column or row vector of n entries."""
    return (s1[0] == 1 or s1[1] == 1) and (s2[0] == 1 or s2[1] == 1) and max(s1) == max(s2)
