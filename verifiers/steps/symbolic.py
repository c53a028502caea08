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

__all__ = ["holds", "to_sympy"]

_MAX_EXPONENT_CHARS = 4
_SYMBOLS = {c: sympy.Symbol(c) for c in string.ascii_letters}
# The only names parsed text can reach: number constructors and the bound single letters.
_GLOBALS = {
    "Integer": sympy.Integer,
    "Float": sympy.Float,
    "Rational": sympy.Rational,
    "Symbol": sympy.Symbol,
    "__builtins__": {},
}
_TRANSFORMS = (*standard_transformations, implicit_multiplication, convert_xor, rationalize)


def to_sympy(side: str) -> sympy.Expr:
    """Parse one side of a claim (already reduced to plain arithmetic by ``claims``).

    Raises:
        ValueError: an exponent of more than 4 digits, or text that is not an expression.
        SyntaxError, TypeError and sympy's own errors for text it cannot parse.
    """
    text = side.replace("$", "").replace("×", "*").replace("÷", "/").replace("%", "/100")
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
    and None otherwise (an equation to solve); without, True when the difference is 0 or (the
    right side written with decimals) at most ``half_unit``, None when it is not a real
    number, False otherwise.

    Raises:
        the errors of :func:`to_sympy` (``claims.check_claim`` turns them into None).
    """
    left, right = to_sympy(lhs), to_sympy(rhs)
    if left.free_symbols or right.free_symbols:
        return True if sympy.simplify(left - right) == 0 else None
    difference = left - right
    if difference == 0:
        return True
    if not difference.is_number or not difference.is_real:
        return None
    if half_unit:
        allowance = sympy.Rational(half_unit.numerator, half_unit.denominator)
        return bool(abs(difference) <= allowance)
    return False
