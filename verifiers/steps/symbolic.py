"""The sympy half of a claim's verdict: sides with variables (``2x + x = 3x``), or numbers the
shared reader (``grpo.verifiers.math.arith``) cannot read exactly.

Kept apart from ``claims`` so that importing the steps verifier (its settings, its service
spec, the run orchestrator validating a run's service configs) does not import sympy (~1 CPU
second); the verifier's pool workers preload this module. Rules are in ``claims``' module
docstring.
"""

from __future__ import annotations

import re
import string
from fractions import Fraction

import sympy
from sympy.parsing.sympy_parser import (
    convert_xor,
    implicit_multiplication,
    parse_expr,
    rationalize,
    standard_transformations,
)

from grpo.verifiers.steps.rewrite import ARGUMENT_SEPARATOR, FUNCTIONS

__all__ = ["holds", "numeric", "numeric_gap", "order", "to_sympy"]

_MAX_EXPONENT_CHARS = 4
_MAX_CHARS = 2000  # as the math verifier's answers: longer sides are not parsed
_SYMBOLS: dict[str, sympy.Basic] = {c: sympy.Symbol(c) for c in string.ascii_letters}
_SYMBOLS["pi"] = sympy.pi  # "π" is written "pi" before parsing (words never reach here)
_DIGITS = 40  # significant digits of numeric evaluations
# The only names parsed text can reach: number constructors and the bound single letters.
_FUNCTIONS = {
    "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
    "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan,
    "sinh": sympy.sinh, "cosh": sympy.cosh, "tanh": sympy.tanh, "ln": sympy.log,
    "exp": sympy.exp, "lg": lambda x: sympy.log(x, 10), "logbase": sympy.log,
}  # fmt: skip
_GLOBALS = {
    "Integer": sympy.Integer,
    "Float": sympy.Float,
    "Rational": sympy.Rational,
    "Symbol": sympy.Symbol,
    **_FUNCTIONS,
    "__builtins__": {},
}
_FUNCTION_CHARS = {char: name for name, char in FUNCTIONS.items()}
_TRANSFORMS = (*standard_transformations, implicit_multiplication, convert_xor, rationalize)


def to_sympy(side: str) -> sympy.Expr:
    """Parse one side of a claim (already reduced to plain arithmetic by ``claims``).

    Raises:
        ValueError: a side over 2,000 characters, an exponent of more than 4 digits, or text
            that is not an expression.
        SyntaxError, TypeError and sympy's own errors for text it cannot parse.
    """
    if len(side) > _MAX_CHARS:
        raise ValueError(f"a side of {len(side)} characters is not handed to sympy")
    text = side.replace("$", "").replace("×", "*").replace("÷", "/").replace("%", "/100")
    text = text.replace("π", " pi ")
    for char, name in _FUNCTION_CHARS.items():
        text = text.replace(char, f" {name}")
    text = text.replace(ARGUMENT_SEPARATOR, ",")
    for power in re.finditer(r"(\^|\*\*)\s*\(?\s*([0-9.]+)", text):
        if len(power.group(2)) > _MAX_EXPONENT_CHARS:
            raise ValueError("exponent too large to check")
    expr = parse_expr(
        text, local_dict=dict(_SYMBOLS), global_dict=dict(_GLOBALS), transformations=_TRANSFORMS
    )
    if not isinstance(expr, sympy.Expr):
        raise ValueError(f"{side!r} is not an expression")
    return expr


def holds(lhs: str, rhs: str, half_unit: Fraction) -> bool | None:
    """Decide ``lhs = rhs`` with sympy: with variables, True when ``lhs - rhs`` simplifies to 0
    and None otherwise (an equation to solve); without, True when the sides agree to 30 of
    the 40 digits they are evaluated to or (the right side written with decimals) differ by
    at most ``half_unit``, None when a side is not a real number, False otherwise.

    Raises:
        the errors of :func:`to_sympy` (``claims.check_claim`` turns them into None).
    """
    left, right = to_sympy(lhs), to_sympy(rhs)
    if left.free_symbols or right.free_symbols:
        return True if sympy.simplify(left - right) == 0 else None
    difference = left - right
    if difference == 0:
        return True
    if not difference.is_number:
        return None
    gap, scale = numeric_gap(left, right)
    if gap is None:
        return None
    if half_unit:
        return gap <= half_unit
    # (√7 + √5)^2 = 12 + 2√35: equal at 40 digits is equal (sympy's own evaluation does
    # not expand it); a gap above float-level noise of the scale is a difference
    return gap <= scale * Fraction(1, 10**30)


def numeric_gap(left: sympy.Expr, right: sympy.Expr) -> tuple[Fraction | None, Fraction]:
    """``(|left - right|, max(|left|, |right|, 1))`` evaluated to 40 digits, or ``(None, 1)``
    when either is not a finite real number."""
    values = []
    for expr in (left, right):
        value = sympy.N(expr, _DIGITS)
        if not value.is_real or not value.is_finite:
            return None, Fraction(1)
        values.append(Fraction(str(value)))
    a, b = values
    return abs(a - b), max(abs(a), abs(b), Fraction(1))


def numeric(side: str) -> Fraction | None:
    """The value of a side without variables to 40 significant digits, as a fraction; None
    when it has variables, is not a finite real number, or cannot be parsed. A lone ``e``
    (the only letter) is Euler's number here: ``e^2 ≈ 7.389`` is a numeric claim."""
    try:
        expr = to_sympy(side)
        if expr.free_symbols == {_SYMBOLS["e"]}:
            expr = expr.subs(_SYMBOLS["e"], sympy.E)  # e alone, in an approximation or order
        if expr.free_symbols:
            return None
        value = sympy.N(expr, _DIGITS)
        if not value.is_real or not value.is_finite:
            return None
        return Fraction(str(value))
    except Exception:
        return None


def order(lhs: str, rhs: str) -> int | None:
    """-1, 0 or 1 as ``lhs`` is below, equal to or above ``rhs`` (sides without variables but
    a lone ``e``, as in :func:`numeric`); None when a side has variables or is not a real
    number.

    Numbers further apart than 40 significant digits can blur are ordered numerically; closer
    ones only when sympy proves ``lhs - rhs`` zero (then 0) or its sign.
    """
    a, b = numeric(lhs), numeric(rhs)
    if a is None or b is None:
        return None
    scale = max(abs(a), abs(b), Fraction(1))
    if abs(a - b) > scale * Fraction(1, 10**30):
        return (a > b) - (a < b)
    left, right = (to_sympy(x).subs(_SYMBOLS["e"], sympy.E) for x in (lhs, rhs))
    difference = sympy.simplify(left - right)
    if difference == 0:
        return 0
    if difference.is_positive:
        return 1
    if difference.is_negative:
        return -1
    return None
