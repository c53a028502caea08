"""Exact reading of numbers and arithmetic, shared by the math and steps verifiers.

One reader, so that both verifiers read the same text as the same number (``1.5e3`` is 1500
in a ``\\boxed{}`` and in a step). :func:`evaluate` turns plain-text or LaTeX arithmetic into
an exact :class:`fractions.Fraction`, without sympy (pure Python, microseconds):

- numbers: ``12``, ``-3``, ``2.50``, ``.5``, e-notation ``2e4``/``1.5E-3`` (a digit right after
  the ``e``, no letter after), repeating decimals ``0.\\overline{6}`` = 2/3, ``0.1\\overline{6}``
  = 1/6;
- mixed numbers: an integer, a space, then a proper fraction of integers: ``3 1/2`` = 7/2,
  ``3\\frac{1}{2}`` and ``1 \\frac{3}{4}``; an integer before an improper one (``2 4/3``) is
  neither a mixed number nor a product and raises :class:`ArithSyntaxError`;
- operators: ``+ -``, ``* × · \\times \\cdot`` and juxtaposition (``2(3)``), ``/ ÷ \\div`` and
  ``\\frac{a}{b}`` (also ``\\frac12``), ``^``/``**`` (right-associative), postfix ``!``, a
  trailing ``%`` on a number (/100), ``\\sqrt{..}``/``\\sqrt[n]{..}`` of exact powers;
- brackets ``( ) [ ] { }``.

Anything else (a letter, ``\\pi``, ``\\sqrt{2}``, a function) raises :class:`NotExactError`:
the caller then hands the text to sympy.

Hostile sizes never run. A value (the whole expression or any part of it) that would have
more than ``MAX_DIGITS`` digits in its numerator or denominator is not computed: it becomes
a :class:`Magnitude`, sound bounds on ``log10 |value|`` (with its sign and whether it is an
integer when known), decided before any big number is built. Magnitudes are combined soundly
by every operation, so the bounds always hold for the value they describe:

- ``*``, ``/``, integer and rational powers, roots, ``!`` and ``%`` add, subtract or scale the
  bounds (``10^{10^{10}} / 10^{10^{10}}`` is 1 within float slack, not ``10^{10^{10}}``);
  anything times an exact 0 is 0 (``0 \\cdot 10^{10^{10}}``); ``1^x`` is 1, ``0^x`` is 0 for
  a positive ``x``;
- ``+``/``-`` keep the bounds of a side that dominates the other by a factor over 10, or of
  two sides of the same sign; otherwise (``10^{10^{10}} - 10^{10^{10}}``, which may cancel)
  only an upper bound is left and the value may be 0;
- what cannot be bounded (an unknown sign under an even root, a power of a value that may be
  0, a factorial of a value not known to be a non-negative integer) has no bounds at all;
- an irrational part (``\\sqrt{2}``, ``2^{1/2}``) is carried on as its bounds too, so that
  ``9^{9^{9^9}} + \\sqrt{2}`` is still known to be huge; a text with such a part and no part
  over the limit raises :class:`NotExactError` (sympy decides it, as before).

:func:`evaluate` raises :class:`TooLargeError` with the Magnitude of the *whole* expression,
and :func:`magnitudes_differ` says when two values are provably different from their bounds
alone (``9^{9^{9^9}}`` vs 1 is, ``10^{10^{10}} - 10^{10^{10}}`` vs 0 is not).
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "MAX_DIGITS",
    "ArithSyntaxError",
    "Magnitude",
    "NotExactError",
    "TooLargeError",
    "Value",
    "evaluate",
    "log10_abs",
    "magnitudes_differ",
]

MAX_DIGITS = 10_000
"""Largest number of decimal digits an exact value may have (numerator and denominator)."""
_MAX_BITS = int(MAX_DIGITS * 3.33)
_MAX_FACTORIAL = 3_000  # 3000! has 9,131 digits


class ArithSyntaxError(ValueError):
    """The text is malformed arithmetic (unbalanced brackets, ``2 4/3``, a dangling operator)."""


class NotExactError(ValueError):
    """The text is not exact arithmetic (letters, constants, irrational roots): use sympy."""


@dataclass(frozen=True)
class Magnitude:
    """Sound bounds on a value that is too large (or too small) to hold exactly.

    The value ``v`` satisfies ``10^lo <= |v| <= 10^hi``. An infinite bound is beyond float
    range: ``hi = inf`` is no upper bound, ``lo = inf`` means ``|v|`` is larger than any
    float power of ten, ``lo = -inf`` means ``v`` may be 0 (a value with ``lo > -inf`` is
    never 0).

    Attributes:
        lo: lower bound of ``log10 |v|``.
        hi: upper bound of ``log10 |v|``.
        sign: +1 when ``v >= 0``, -1 when ``v <= 0``, 0 when unknown.
        integer: ``v`` is known to be an integer.
    """

    lo: float
    hi: float
    sign: int = 0
    integer: bool = False

    @classmethod
    def of(cls, value: Fraction) -> Magnitude:
        """The bounds of an exact value (``lo = hi = -inf`` for 0), widened by float error."""
        if value == 0:
            return cls(-math.inf, -math.inf, 0, True)
        num, den = abs(value.numerator), value.denominator
        ln, ld = _log10_int(num), _log10_int(den)
        err = 1e-12 * (1.0 + ln + ld)  # log10 of either part is good to ~1e-15 relative
        mid = ln - ld
        return cls(mid - err, mid + err, 1 if value > 0 else -1, den == 1)

    @property
    def nonzero(self) -> bool:
        """The value is provably not 0."""
        return self.lo > -math.inf


_UNKNOWN = Magnitude(-math.inf, math.inf, 0, False)
"""A value with no bounds at all (it may be 0, or anything)."""


class TooLargeError(ValueError):
    """The value would exceed ``MAX_DIGITS`` digits; ``magnitude`` bounds the whole value.

    Attributes:
        magnitude: sound bounds on ``log10 |value|`` of the whole expression evaluated (no
            bounds at all when an operation could not bound it: ``10^{10^{10}} -
            10^{10^{10}}`` may be 0).
    """

    def __init__(self, magnitude: Magnitude) -> None:
        super().__init__(
            "value too large to compute exactly "
            f"(log10 |value| in [{magnitude.lo:.4g}, {magnitude.hi:.4g}])"
        )
        self.magnitude = magnitude


_MARGIN = 1.0
"""Orders of magnitude two bounds must be apart, on top of float slack, to refute equality."""


def magnitudes_differ(a: Fraction | Magnitude, b: Fraction | Magnitude) -> bool:
    """True when the bounds alone prove ``a != b``; False means "not proven", not equal.

    Exact values (Fractions) compare exactly. Otherwise ``a`` and ``b`` differ when their
    ``log10 |.|`` bounds are more than ``_MARGIN`` (a factor of 10) apart, when one is exactly
    0 and the other is provably non-zero, or when both are provably non-zero with opposite
    known signs. A value with no bounds (``10^{10^{10}} - 10^{10^{10}}``) never differs.
    """
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return a != b
    ma = a if isinstance(a, Magnitude) else Magnitude.of(a)
    mb = b if isinstance(b, Magnitude) else Magnitude.of(b)
    for zero, other in ((a, mb), (b, ma)):
        if isinstance(zero, Fraction) and zero == 0:
            return other.nonzero
    if ma.nonzero and mb.nonzero and ma.sign * mb.sign == -1:
        return True
    return ma.lo > mb.hi + _MARGIN or mb.lo > ma.hi + _MARGIN


@dataclass(frozen=True)
class Value:
    """An exactly evaluated expression.

    Attributes:
        exact: the value as a fraction.
        decimal: a decimal literal (``2.5``, ``1e-3``) was written in the text, so the
            writer may have rounded (the math verifier then allows a relative tolerance).
        percent: the text ended in ``%`` (the value is already divided by 100).
    """

    exact: Fraction
    decimal: bool = False
    percent: bool = False


def log10_abs(value: Fraction) -> float:
    """``log10 |value|`` of a non-zero fraction (exact enough for magnitude comparisons).

    Raises:
        ValueError: ``value`` is zero.
    """
    if value == 0:
        raise ValueError("log10 of zero")
    num, den = abs(value.numerator), value.denominator
    return _log10_int(num) - _log10_int(den)


def _log10_int(n: int) -> float:
    bits = n.bit_length()
    if bits < 1000:
        return math.log10(n)
    shift = bits - 64
    return math.log10(n >> shift) + shift * math.log10(2)


_NUMBER = re.compile(
    r"(?P<int>\d+)?(?:\.(?P<frac>\d*))?"
    r"(?:\\overline\{(?P<rep>\d+)\}|\\overline(?P<rep1>\d))?"
    r"(?:[eE](?P<exp>[+-]?\d+)(?![A-Za-z]))?"
)
_COMMAND = re.compile(r"\\([A-Za-z]+)")
_SPACE = " \t\n\r~"
_TIMES = {"*", "×", "·", "⋅", "∗"}
_DIVIDE = {"/", "÷"}
_OPEN = {"(": ")", "[": "]", "{": "}"}
_IGNORED_COMMANDS = {"left", "right", "displaystyle", "big", "Big", "bigg", "Bigg"}
_TIMES_COMMANDS = {"times", "cdot", "ast"}


@dataclass
class _Token:
    kind: str  # "num", "op", "open", "close", "frac", "sqrt", "space"
    text: str
    value: Fraction | Magnitude | None = None
    decimal: bool = False
    integer: bool = False  # an integer literal (for mixed numbers)


def _number(text: str, i: int) -> tuple[_Token, int] | None:
    m = _NUMBER.match(text, i)
    if m is None or m.end() == i or (m.group("int") is None and not m.group("frac")):
        return None
    whole = m.group("int") or "0"
    frac = m.group("frac") or ""
    rep = m.group("rep") or m.group("rep1")
    if m.group("exp") is not None and m.group("int") is None:
        return None
    value = Fraction(int(whole + frac), 10 ** len(frac)) if frac else Fraction(int(whole))
    if rep:
        # 0.1\overline{6}: the repeating block adds rep / (10^len(frac) * (10^len(rep) - 1))
        value += Fraction(int(rep), 10 ** len(frac) * (10 ** len(rep) - 1))
    exp = m.group("exp")
    number: Fraction | Magnitude = value
    if exp is not None and value != 0:  # 0e20000 is 0
        number = _scaled_by_ten(value, exp)
    return _Token("num", m.group(0), number, bool(frac), m.group(0).isdigit()), m.end()


def _scaled_by_ten(value: Fraction, exp: str) -> Fraction | Magnitude:
    """``value · 10^exp`` of e-notation; its bounds when over ``MAX_DIGITS`` digits."""
    digits = exp.lstrip("+-").lstrip("0") or "0"
    negative = exp.startswith("-")
    m = Magnitude.of(value)
    if len(digits) > 300:  # |exp| >= 10^300 (and int() of 4300+ digits is refused)
        if negative:
            return _bounded(-math.inf, -1e300 + m.hi, m.sign, False)
        return _bounded(1e300 + m.lo, math.inf, m.sign, False)
    e = -int(digits) if negative else int(digits)
    if abs(e) > 3 * MAX_DIGITS:  # do not even build 10^e
        return _bounded(m.lo + e, m.hi + e, m.sign, False)
    return _check_size(value * Fraction(10) ** e)


def _tokens(text: str) -> list[_Token]:
    out: list[_Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch in _SPACE:
            j = i
            while j < n and text[j] in _SPACE:
                j += 1
            out.append(_Token("space", text[i:j]))
            i = j
            continue
        if ch.isdigit() or (ch == "." and i + 1 < n and text[i + 1].isdigit()):
            found = _number(text, i)
            if found is None:
                raise ArithSyntaxError(f"bad number at {text[i : i + 10]!r}")
            out.append(found[0])
            i = found[1]
            continue
        if ch == "\\":
            if text.startswith("\\{", i) or text.startswith("\\}", i):
                raise NotExactError("a set, not arithmetic")
            if text.startswith("\\%", i):
                out.append(_Token("op", "%"))
                i += 2
                continue
            if i + 1 < n and text[i + 1] in ",;:! ":
                i += 2  # LaTeX spacing
                continue
            m = _COMMAND.match(text, i)
            if m is None:
                raise ArithSyntaxError(f"bad command at {text[i : i + 10]!r}")
            name = m.group(1)
            i = m.end()
            if name in _IGNORED_COMMANDS:
                continue
            if name in _TIMES_COMMANDS:
                out.append(_Token("op", "*"))
            elif name == "div":
                out.append(_Token("op", "/"))
            elif name in ("frac", "dfrac", "tfrac", "cfrac"):
                out.append(_Token("frac", name))
                if re.match(r"\d\d(?!\d)", text[i : i + 3]):  # \frac12
                    for digit in text[i : i + 2]:
                        out.extend(
                            [
                                _Token("open", "{"),
                                _Token("num", digit, Fraction(int(digit)), integer=True),
                                _Token("close", "}"),
                            ]
                        )
                    i += 2
            elif name == "sqrt":
                out.append(_Token("sqrt", name))
            else:
                raise NotExactError(f"\\{name} is not exact arithmetic")
            continue
        if ch in _OPEN:
            out.append(_Token("open", ch))
        elif ch in ")]}":
            out.append(_Token("close", ch))
        elif ch == "*" and text.startswith("**", i):
            out.append(_Token("op", "^"))
            i += 2
            continue
        elif ch in _TIMES:
            out.append(_Token("op", "*"))
        elif ch in _DIVIDE:
            out.append(_Token("op", "/"))
        elif ch in "+-^!%":
            out.append(_Token("op", ch))
        elif ch in "−–":
            out.append(_Token("op", "-"))
        else:
            raise NotExactError(f"{ch!r} is not exact arithmetic")
        i += 1
    return out


Number = Fraction | Magnitude
"""An intermediate value: exact, or only bounded (over ``MAX_DIGITS`` digits)."""


def _check_size(value: Fraction) -> Number:
    """``value`` itself, or its bounds when a part has more than ``MAX_DIGITS`` digits."""
    if value.numerator.bit_length() > _MAX_BITS or value.denominator.bit_length() > _MAX_BITS:
        return Magnitude.of(value)
    return value


def _magnitude(x: Number) -> Magnitude:
    return x if isinstance(x, Magnitude) else Magnitude.of(x)


def _is_zero(x: Number) -> bool:
    return isinstance(x, Fraction) and x == 0


def _slack(x: float) -> float:
    return 1e-9 * abs(x) + 1e-9 if math.isfinite(x) else 0.0


def _bounded(lo: float, hi: float, sign: int, integer: bool) -> Magnitude:
    """A Magnitude with its bounds widened by float rounding slack (nan bounds: none)."""
    if math.isnan(lo) or math.isnan(hi):
        return Magnitude(-math.inf, math.inf, sign, integer)
    return Magnitude(lo - _slack(lo), hi + _slack(hi), sign, integer)


def _lo_sum(a: float, b: float) -> float:
    """A lower bound of ``log10`` of a product: ``-inf`` wins (a factor may be 0)."""
    return -math.inf if -math.inf in (a, b) else a + b


def _hi_sum(a: float, b: float) -> float:
    """An upper bound of ``log10`` of a product: ``inf`` wins (a factor has no bound)."""
    return math.inf if math.inf in (a, b) else a + b


def _exp10(x: float, upper: bool) -> float:
    """``10^x`` in floats (never OverflowError). From ``x = 308`` on it is ``inf`` as an upper
    bound and ``1e308`` as a lower one: a bound of ``inf`` is only ever claimed for a value
    that really is beyond every float."""
    if x < 308:
        return 10.0**x
    return math.inf if upper else 1e308


def _int_range(n: int) -> tuple[float, float]:
    """Float bounds of an integer (past ``2^1023``: from ``2^1023`` to ``inf``)."""
    if n.bit_length() <= 1023:
        return float(n), float(n)
    least = math.ldexp(1.0, 1023)  # |n| >= 2^1023
    return (least, math.inf) if n > 0 else (-math.inf, -least)


def _interval_product(a: tuple[float, float], b: tuple[float, float]) -> tuple[float, float]:
    """Bounds of ``x·y`` for ``x`` in ``a``, ``y`` in ``b``; ``0·inf`` gives no bounds."""
    products = [x * y for x in a for y in b]
    if any(math.isnan(p) for p in products):
        return -math.inf, math.inf
    return min(products), max(products)


def _value_range(m: Magnitude) -> tuple[float, float]:
    """Bounds of the value itself (not its log) of a Magnitude, in floats."""
    low = _exp10(m.lo, upper=False) if m.lo > -math.inf else 0.0
    high = _exp10(m.hi, upper=True)
    if m.sign > 0:
        return low, high
    if m.sign < 0:
        return -high, -low
    return -high, high


def _negate(x: Number) -> Number:
    return -x if isinstance(x, Fraction) else Magnitude(x.lo, x.hi, -x.sign, x.integer)


def _add(a: Number, b: Number) -> Number:
    """``a + b``. Bounds are kept when one side dominates by over a factor of 10 or both
    have the same sign; otherwise the sum may cancel (to 0) and only an upper bound is left.
    """
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a + b)
    if _is_zero(a):
        return b
    if _is_zero(b):
        return a
    ma, mb = _magnitude(a), _magnitude(b)
    integer = ma.integer and mb.integer
    for big, small in ((ma, mb), (mb, ma)):
        if big.lo > small.hi + 1:  # |small| < |big| / 10: |a + b| = |big| (1 ± r)
            r = 10.0 ** -(big.lo - small.hi)
            lo = _lo_sum(big.lo, math.log10(1 - r))
            return _bounded(lo, _hi_sum(big.hi, math.log10(1 + r)), big.sign, integer)
    hi = _hi_sum(max(ma.hi, mb.hi), math.log10(2))
    if ma.sign != 0 and ma.sign == mb.sign:  # no cancellation: |a + b| >= max(|a|, |b|)
        return _bounded(max(ma.lo, mb.lo), hi, ma.sign, integer)
    return _bounded(-math.inf, hi, 0, integer)


def _multiply(a: Number, b: Number) -> Number:
    """``a · b``; an exact 0 times anything is 0."""
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a * b)
    if _is_zero(a) or _is_zero(b):
        return Fraction(0)
    ma, mb = _magnitude(a), _magnitude(b)
    lo, hi = _lo_sum(ma.lo, mb.lo), _hi_sum(ma.hi, mb.hi)
    return _bounded(lo, hi, ma.sign * mb.sign, ma.integer and mb.integer)


def _divide(a: Number, b: Number) -> Number:
    """``a / b``.

    Raises:
        ArithSyntaxError: ``b`` is exactly 0.
    """
    if _is_zero(b):
        raise ArithSyntaxError("division by zero")
    if isinstance(a, Fraction) and isinstance(b, Fraction):
        return _check_size(a / b)
    mb = _magnitude(b)
    if not mb.nonzero:
        return _UNKNOWN  # the divisor may be 0
    if _is_zero(a):
        return Fraction(0)
    ma = _magnitude(a)
    lo, hi = _lo_sum(ma.lo, -mb.hi), _hi_sum(ma.hi, -mb.lo)
    return _bounded(lo, hi, ma.sign * mb.sign, False)


def _power(base: Number, exponent: Number) -> Number:
    """``base ^ exponent``, exact when both are exact and the result is small enough.

    Raises:
        NotExactError: an irrational power of exact values (``2^{1/2}``).
        ArithSyntaxError: 0 to a negative power.
    """
    if isinstance(exponent, Fraction):
        if exponent == 0:
            return Fraction(1)
        if isinstance(base, Fraction):
            return _power_exact(base, exponent)
        return _power_of_magnitude(base, exponent)
    if isinstance(base, Fraction):
        return _power_to_magnitude(base, exponent)
    if not base.nonzero or (base.sign != 1 and not exponent.integer):
        return _UNKNOWN  # 0 to an unknown power, or a negative base to a non-integer one
    lo, hi = _interval_product(_value_range(exponent), (base.lo, base.hi))
    integer = base.integer and exponent.integer and exponent.sign == 1
    return _bounded(lo, hi, 1 if base.sign == 1 else 0, integer)


def _power_exact(base: Fraction, exponent: Fraction) -> Number:
    if exponent.denominator != 1:
        root = _exact_root(base, exponent.denominator)
        if root is None:
            raise NotExactError("irrational power")
        base, exponent = root, Fraction(exponent.numerator)
    e = exponent.numerator
    if base in (0, 1) or e == 0:
        if base == 0 and e < 0:
            raise ArithSyntaxError("division by zero")
        return Fraction(1) if e == 0 else base
    if base == -1:
        return Fraction(-1 if e % 2 else 1)
    # digits of the larger part of base^e, known before it is built (1.0001^{10^6} has
    # 4 million digits although its value is about 10^43)
    part = max(_log10_int(abs(base.numerator)), _log10_int(base.denominator))
    if e.bit_length() >= 1000 or abs(e) * part > MAX_DIGITS:
        m = Magnitude.of(base)
        lo, hi = _interval_product(_int_range(e), (m.lo, m.hi))
        sign = 1 if base > 0 or e % 2 == 0 else -1
        return _bounded(lo, hi, sign, base.denominator == 1 and e > 0)
    return _check_size(base**e)


def _irrational_power(base: Fraction, exponent: Fraction) -> Magnitude:
    """Bounds of an irrational power ``base^(p/q)`` of exact values (none when not real)."""
    p, q = exponent.numerator, exponent.denominator
    if base < 0 and q % 2 == 0:
        return _UNKNOWN  # not a real number: sympy's, unless a part is too large
    sign = 1 if base > 0 or p % 2 == 0 else -1
    m = Magnitude.of(abs(base))
    lo, hi = _interval_product(_value_range(Magnitude.of(exponent)), (m.lo, m.hi))
    return _bounded(lo, hi, sign, False)


def _power_of_magnitude(base: Magnitude, exponent: Fraction) -> Number:
    """A bounded base to an exact non-zero power (a root when it is a fraction)."""
    p, q = exponent.numerator, exponent.denominator
    if not base.nonzero and exponent < 0:
        return _UNKNOWN  # the base may be 0
    if q == 1:
        sign = 1 if p % 2 == 0 else base.sign
    elif base.sign == 1:
        sign = 1
    elif base.sign == -1 and q % 2 == 1:
        sign = 1 if p % 2 == 0 else -1
    else:
        return _UNKNOWN  # an even root of a value that may be negative
    e = Magnitude.of(exponent)
    ef = _value_range(e)
    lo, hi = _interval_product(ef, (base.lo, base.hi))
    return _bounded(lo, hi, sign, base.integer and q == 1 and p > 0)


def _power_to_magnitude(base: Fraction, exponent: Magnitude) -> Number:
    """An exact base to a bounded power.

    Raises:
        ArithSyntaxError: 0 to a provably negative power.
    """
    if base == 1:
        return Fraction(1)
    if base == 0:
        if exponent.nonzero and exponent.sign == 1:
            return Fraction(0)
        if exponent.nonzero and exponent.sign == -1:
            raise ArithSyntaxError("division by zero")
        return _UNKNOWN
    if base < 0 and not exponent.integer:
        return _UNKNOWN  # parity or realness unknown
    if base == -1:
        return Magnitude(0.0, 0.0, 0, True)  # 1 or -1
    per_unit = Magnitude.of(abs(base))
    lo, hi = _interval_product(_value_range(exponent), (per_unit.lo, per_unit.hi))
    integer = base.denominator == 1 and exponent.integer and exponent.sign == 1
    return _bounded(lo, hi, 1 if base > 0 else 0, integer)


_LOG10_E = math.log10(math.e)
_LOG10_2PI = math.log10(2 * math.pi)


def _log10_factorial(log10_n: float, upper: bool) -> float:
    """Robbins' lower bound ``log10 (sqrt(2 pi n) (n/e)^n)`` of ``log10 n!`` (``n >= 1``).

    Past ``n = 10^300``: ``inf`` as an upper bound, the value at ``10^300`` as a lower one.
    """
    if log10_n > 300:
        if upper:
            return math.inf
        log10_n = 300.0
    n = 10.0**log10_n
    return n * (log10_n - _LOG10_E) + 0.5 * (_LOG10_2PI + log10_n)


def _factorial(value: Number) -> Number:
    """``value!`` of a non-negative integer; its bounds past ``_MAX_FACTORIAL``.

    Raises:
        NotExactError: ``value`` is exact and not a non-negative integer (sympy's Gamma).
    """
    if isinstance(value, Fraction):
        if value.denominator != 1 or value < 0:
            raise NotExactError("factorial of a non-integer")
        if value <= _MAX_FACTORIAL:
            return Fraction(math.factorial(int(value)))
    m = _magnitude(value)
    if not (m.integer and m.sign == 1):
        return _UNKNOWN  # maybe not a non-negative integer
    # n! >= 1; Robbins: log10 n! <= lower bound + 1/(12 n ln 10) < lower bound + 0.04
    lo = max(0.0, _log10_factorial(m.lo, upper=False)) if m.lo >= 0 else 0.0
    hi = _log10_factorial(max(m.hi, 0.0), upper=True) + 0.04
    return _bounded(lo, hi, 1, True)


def _exact_root(value: Fraction, n: int) -> Fraction | None:
    """The exact n-th root of ``value`` when it is rational, else None."""
    if n > 64 or (value < 0 and n % 2 == 0):
        return None
    sign = -1 if value < 0 else 1
    roots = []
    for part in (abs(value.numerator), value.denominator):
        r = round(part ** (1.0 / n)) if part.bit_length() < 1000 else _int_root(part, n)
        for cand in (r - 1, r, r + 1):
            if cand >= 0 and cand**n == part:
                roots.append(cand)
                break
        else:
            return None
    return sign * Fraction(roots[0], roots[1])


def _int_root(n: int, k: int) -> int:
    lo, hi = 0, 1 << (n.bit_length() // k + 1)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if mid**k <= n:
            lo = mid
        else:
            hi = mid - 1
    return lo


class _Parser:
    """Recursive descent over the tokens; values are exact fractions or Magnitudes.

    ``huge``: a part was too large to compute (a Magnitude made from exact values, or one
    provably beyond ``MAX_DIGITS`` digits either way). ``inexact``: a part is irrational or
    not exact arithmetic (``\\sqrt{2}``, ``2^{1/2}``, ``(1/2)!``); it is carried on as bounds
    (or none), so that a huge part later in the text is still seen and never reaches sympy.
    """

    def __init__(self, tokens: list[_Token]) -> None:
        self.toks = tokens
        self.i = 0
        self.decimal = False
        self.depth = 0
        self.huge = False
        self.inexact = False

    def apply(self, fn: Callable[..., Number], *args: Number) -> Number:
        """``fn(*args)``, noting a part too large to compute (``huge``)."""
        result = fn(*args)
        if isinstance(result, Magnitude) and not any(isinstance(a, Magnitude) for a in args):
            self.huge = True
        return self.sized(result)

    def sized(self, value: Number) -> Number:
        """``value``, noting ``huge`` when it is provably beyond ``MAX_DIGITS`` digits."""
        if isinstance(value, Magnitude) and (value.lo > MAX_DIGITS or value.hi < -MAX_DIGITS):
            self.huge = True
        return value

    def power_of(self, base: Number, exponent: Number) -> Number:
        """``base ^ exponent``; an irrational power of exact values as its bounds."""
        try:
            return self.apply(_power, base, exponent)
        except NotExactError:
            assert isinstance(base, Fraction) and isinstance(exponent, Fraction)
            self.inexact = True
            return self.sized(_irrational_power(base, exponent))

    def peek(self, skip_space: bool = True) -> _Token | None:
        j = self.i
        while skip_space and j < len(self.toks) and self.toks[j].kind == "space":
            j += 1
        return self.toks[j] if j < len(self.toks) else None

    def take(self) -> _Token:
        while self.i < len(self.toks) and self.toks[self.i].kind == "space":
            self.i += 1
        if self.i >= len(self.toks):
            raise ArithSyntaxError("unexpected end")
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expr(self) -> Number:
        self.depth += 1
        if self.depth > 200:
            raise ArithSyntaxError("expression nested too deeply")
        value = self.term()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text in "+-":
            self.take()
            right = self.term()
            value = self.apply(_add, value, right if tok.text == "+" else _negate(right))
        self.depth -= 1
        return value

    def term(self) -> Number:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok is None:
                return value
            if tok.kind == "op" and tok.text in "*/":
                self.take()
                right = self.unary()
                value = self.apply(_divide if tok.text == "/" else _multiply, value, right)
            elif tok.kind in ("open", "frac", "sqrt", "num"):
                if tok.kind == "num":
                    raise ArithSyntaxError("two numbers side by side")
                # juxtaposition: 2(3), 2\sqrt{4}
                value = self.apply(_multiply, value, self.unary())
            else:
                return value

    def unary(self) -> Number:
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text in "+-":
            self.take()
            value = self.unary()
            return _negate(value) if tok.text == "-" else value
        return self.power()

    def power(self) -> Number:
        base = self.postfix()
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text == "^":
            self.take()
            exponent = self.unary()
            return self.power_of(base, exponent)
        return base

    def postfix(self) -> Number:
        value = self.atom()
        while (tok := self.peek(skip_space=False)) is not None and tok.kind == "op":
            if tok.text == "!":
                self.take()
                try:
                    value = self.apply(_factorial, value)
                except NotExactError:  # Gamma of a non-integer: no bounds
                    self.inexact = True
                    value = _UNKNOWN
            elif tok.text == "%":
                self.take()
                value = self.apply(_divide, value, Fraction(100))
            else:
                break
        return value

    def group(self) -> Number:
        tok = self.take()
        if tok.kind != "open":
            raise ArithSyntaxError("expected a braced group")
        value = self.expr()
        close = self.take()
        if close.kind != "close" or close.text != _OPEN[tok.text]:
            raise ArithSyntaxError("unbalanced brackets")
        return value

    def _fraction_literal(self, j: int) -> tuple[int, int, int] | None:
        """``\\frac{a}{b}`` or ``a/b`` of integer literals at token ``j``: (a, b, end)."""
        t = self.toks
        kinds = [x.kind for x in t[j : j + 7]]
        if kinds == ["frac", "open", "num", "close", "open", "num", "close"]:
            a, b = t[j + 2], t[j + 5]
            if a.integer and b.integer and t[j + 1].text == "{" and t[j + 4].text == "{":
                return int(a.text), int(b.text), j + 7
            return None
        if kinds[:3] == ["num", "op", "num"] and t[j].integer and t[j + 2].integer:
            if t[j + 1].text != "/":
                return None
            after = t[j + 3] if j + 3 < len(t) else None
            if after is None or after.kind in ("space", "close") or after.text in "+-=":
                return int(t[j].text), int(t[j + 2].text), j + 3
        return None

    def mixed(self, whole: Fraction) -> Fraction | None:
        """After an integer literal: ``3 1/2``, ``3\\frac{1}{2}`` as 7/2, else None.

        Raises:
            ArithSyntaxError: the fraction after the integer is improper (``2 4/3``).
        """
        j = self.i
        spaced = j < len(self.toks) and self.toks[j].kind == "space"
        if spaced:
            j += 1
        found = self._fraction_literal(j)
        if found is None or (not spaced and self.toks[j].kind != "frac"):
            return None
        num, den, end = found
        if den == 0:
            raise ArithSyntaxError("division by zero")
        if num >= den:
            raise ArithSyntaxError(
                f"{whole} {num}/{den}: an integer before an improper fraction is neither a "
                "mixed number nor a clear product"
            )
        self.i = end
        return whole + Fraction(num, den)

    def atom(self) -> Number:
        tok = self.take()
        if tok.kind == "num":
            assert tok.value is not None
            self.decimal = self.decimal or tok.decimal
            if isinstance(tok.value, Magnitude):
                self.huge = True  # e-notation past the limit: 1e99999
            if tok.integer and isinstance(tok.value, Fraction):
                mixed = self.mixed(tok.value)
                if mixed is not None:
                    return mixed
            return tok.value
        if tok.kind == "open":
            value = self.expr()
            close = self.take()
            if close.kind != "close" or close.text != _OPEN[tok.text]:
                raise ArithSyntaxError("unbalanced brackets")
            return value
        if tok.kind == "frac":
            num = self.group()
            return self.apply(_divide, num, self.group())
        if tok.kind == "sqrt":
            index = 2
            if (nxt := self.peek()) is not None and nxt.kind == "open" and nxt.text == "[":
                self.take()
                idx = self.expr()
                if (
                    self.take().text != "]"
                    or not isinstance(idx, Fraction)
                    or idx.denominator != 1
                    or not 2 <= idx <= 64
                ):
                    raise NotExactError("root index")
                index = int(idx)
            radicand = self.group()
            return self.power_of(radicand, Fraction(1, index))
        raise ArithSyntaxError(f"unexpected {tok.text!r}")


def evaluate(text: str) -> Value:
    """Evaluate ``text`` exactly (grammar in the module docstring).

    Args:
        text: plain-text or LaTeX arithmetic, e.g. ``"3 1/2"``, ``"\\frac{7}{2}"``, ``"2e4"``.

    Returns:
        The exact :class:`Value` (with flags: a decimal was written, a trailing percent).

    Raises:
        NotExactError: the text holds something other than exact arithmetic (use sympy).
        ArithSyntaxError: malformed arithmetic (empty, unbalanced, ``2 4/3``).
        TooLargeError: the value, or a part of it, would exceed ``MAX_DIGITS`` digits; its
            ``magnitude`` bounds the value of the *whole* text (module docstring).
    """
    tokens = _tokens(text)
    if not any(t.kind != "space" for t in tokens):
        raise ArithSyntaxError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.peek() is not None:
        raise ArithSyntaxError(f"unexpected {parser.peek().text!r}")  # type: ignore[union-attr]
    if parser.inexact and not parser.huge:
        raise NotExactError("irrational or not exact arithmetic: use sympy")
    if isinstance(value, Magnitude):
        raise TooLargeError(value)
    percent = bool(tokens) and tokens[-1].kind == "op" and tokens[-1].text == "%"
    return Value(value, parser.decimal, percent)
