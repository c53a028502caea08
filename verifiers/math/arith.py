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
the caller then hands the text to sympy. Hostile sizes never run: a power or factorial whose
result would have more than ``MAX_DIGITS`` digits raises :class:`TooLargeError` carrying an
estimate of ``log10 |value|`` (so ``9^{9^{9^9}}`` is known to differ from 1 without being
computed), and so does any intermediate with more than ``MAX_DIGITS`` digits.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from fractions import Fraction

__all__ = [
    "MAX_DIGITS",
    "ArithSyntaxError",
    "NotExactError",
    "TooLargeError",
    "Value",
    "evaluate",
    "log10_abs",
]

MAX_DIGITS = 10_000
"""Largest number of decimal digits an exact value may have (numerator and denominator)."""
_MAX_BITS = int(MAX_DIGITS * 3.33)
_MAX_FACTORIAL = 3_000  # 3000! has 9,131 digits


class ArithSyntaxError(ValueError):
    """The text is malformed arithmetic (unbalanced brackets, ``2 4/3``, a dangling operator)."""


class NotExactError(ValueError):
    """The text is not exact arithmetic (letters, constants, irrational roots): use sympy."""


class TooLargeError(ValueError):
    """A value would exceed ``MAX_DIGITS`` digits; ``log10`` estimates ``log10 |value|``.

    Attributes:
        log10: estimate of ``log10 |value|`` (may be ``inf``; ``-inf`` for a tiny value).
    """

    def __init__(self, log10: float) -> None:
        super().__init__(f"value too large to compute exactly (about 10^{log10:.3g})")
        self.log10 = log10


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
    value: Fraction | None = None
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
    if exp is not None:
        e = int(exp)
        if abs(e) > MAX_DIGITS:
            raise TooLargeError(float(e))
        value *= Fraction(10) ** e
    return _Token("num", m.group(0), value, bool(frac), m.group(0).isdigit()), m.end()


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


def _check_size(value: Fraction) -> Fraction:
    if value.numerator.bit_length() > _MAX_BITS or value.denominator.bit_length() > _MAX_BITS:
        raise TooLargeError(log10_abs(value))
    return value


def _power(base: Fraction, exponent: Fraction) -> Fraction:
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
    per_unit = log10_abs(base)
    size = abs(e) * max(abs(per_unit), 1e-12) if e.bit_length() < 1000 else math.inf
    if size > MAX_DIGITS:
        raise TooLargeError(size if (e > 0) == (per_unit > 0) else -size)
    return _check_size(base**e)


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
    """Recursive descent over the tokens; values are exact fractions."""

    def __init__(self, tokens: list[_Token]) -> None:
        self.toks = tokens
        self.i = 0
        self.decimal = False
        self.depth = 0

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

    def expr(self) -> Fraction:
        self.depth += 1
        if self.depth > 200:
            raise ArithSyntaxError("expression nested too deeply")
        value = self.term()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text in "+-":
            self.take()
            right = self.term()
            value = _check_size(value + right if tok.text == "+" else value - right)
        self.depth -= 1
        return value

    def term(self) -> Fraction:
        value = self.unary()
        while True:
            tok = self.peek()
            if tok is None:
                return value
            if tok.kind == "op" and tok.text in "*/":
                self.take()
                right = self.unary()
                if tok.text == "/":
                    if right == 0:
                        raise ArithSyntaxError("division by zero")
                    value = _check_size(value / right)
                else:
                    value = _check_size(value * right)
            elif tok.kind in ("open", "frac", "sqrt", "num"):
                if tok.kind == "num":
                    raise ArithSyntaxError("two numbers side by side")
                value = _check_size(value * self.unary())  # juxtaposition: 2(3), 2\sqrt{4}
            else:
                return value

    def unary(self) -> Fraction:
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text in "+-":
            self.take()
            value = self.unary()
            return -value if tok.text == "-" else value
        return self.power()

    def power(self) -> Fraction:
        base = self.postfix()
        tok = self.peek()
        if tok is not None and tok.kind == "op" and tok.text == "^":
            self.take()
            exponent = self.unary()
            return _power(base, exponent)
        return base

    def postfix(self) -> Fraction:
        value = self.atom()
        while (tok := self.peek(skip_space=False)) is not None and tok.kind == "op":
            if tok.text == "!":
                self.take()
                if value.denominator != 1 or value < 0:
                    raise NotExactError("factorial of a non-integer")
                if value > _MAX_FACTORIAL:
                    if value.numerator.bit_length() > 1000:
                        raise TooLargeError(math.inf)
                    n = float(value)
                    raise TooLargeError((n * math.log(n) - n) / math.log(10))
                value = Fraction(math.factorial(int(value)))
            elif tok.text == "%":
                self.take()
                value = value / 100
            else:
                break
        return value

    def group(self) -> Fraction:
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

    def atom(self) -> Fraction:
        tok = self.take()
        if tok.kind == "num":
            assert tok.value is not None
            self.decimal = self.decimal or tok.decimal
            if tok.integer:
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
            den = self.group()
            if den == 0:
                raise ArithSyntaxError("division by zero")
            return _check_size(num / den)
        if tok.kind == "sqrt":
            index = 2
            if (nxt := self.peek()) is not None and nxt.kind == "open" and nxt.text == "[":
                self.take()
                idx = self.expr()
                if self.take().text != "]" or idx.denominator != 1 or not 2 <= idx <= 64:
                    raise NotExactError("root index")
                index = int(idx)
            radicand = self.group()
            root = _exact_root(radicand, index)
            if root is None:
                raise NotExactError("irrational root")
            return root
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
        TooLargeError: a value would exceed ``MAX_DIGITS`` digits (``log10`` estimate given).
    """
    tokens = _tokens(text)
    if not any(t.kind != "space" for t in tokens):
        raise ArithSyntaxError("empty expression")
    parser = _Parser(tokens)
    value = parser.expr()
    if parser.peek() is not None:
        raise ArithSyntaxError(f"unexpected {parser.peek().text!r}")  # type: ignore[union-attr]
    percent = bool(tokens) and tokens[-1].kind == "op" and tokens[-1].text == "%"
    return Value(value, parser.decimal, percent)
