"""Equivalence of a normalized answer and a gold answer, decided with sympy.

Runs inside a :class:`~grpo.verifiers.sdk.pool.WorkerPool` worker (never in a server thread):
parsing is done by math-verify / latex2sympy2_extended with their signal-based timeouts
turned off (``parsing_timeout=None``, ``timeout_seconds=None``); the pool's hard wall-clock
limit replaces them.

Decision, in order:

1. The normalized texts are equal -> equivalent.
2. Both sides parse to plain numbers (no free symbols, no sets): exact values must be equal
   exactly (the difference simplifies to 0 or evaluates below 1e-30 of their magnitude at 50
   digits); when either side holds a decimal (``Float``), ``|g - a| <= rel_tol * max(|g|, |a|)``
   (default 1e-6). A relative test separates ``1/2004!`` from ``1/2006!`` and ``1/2^99`` from
   ``1/2^98``, which math-verify's 6-decimal rounding would call equal.
3. A plain number against an expression in free variables (``12`` vs ``x^5 - 1``,
   ``9`` vs ``\\text{Evelyn}``) -> not equivalent, without calling math-verify.
4. Otherwise math-verify's ``verify(gold, target)``: symbolic equality, sets (order-free),
   open vs closed intervals, tuples (ordered), matrices, equations (``x=3`` vs ``3``),
   multiple-choice letters.
"""

from __future__ import annotations

import sys
from typing import Any

import sympy
from math_verify import parse, verify
from math_verify.parser import ExprExtractionConfig, LatexExtractionConfig

__all__ = ["AnswerParseError", "answers_equivalent", "parse_answer"]

_CONFIG = (LatexExtractionConfig(boxed_match_priority=0), ExprExtractionConfig())
_EXACT_REL = sympy.Float("1e-30", 50)


class AnswerParseError(ValueError):
    """The text could not be parsed into a sympy expression."""


def parse_answer(text: str) -> list[Any]:
    """Parse normalized answer text into math-verify's ``[sympy object, text]`` list.

    Raises:
        AnswerParseError: nothing could be parsed (or the parser recursed too deep).
    """
    try:
        parsed = parse(f"${text}$", extraction_config=list(_CONFIG), parsing_timeout=None)  # type: ignore[arg-type]
    except RecursionError as exc:
        raise AnswerParseError("expression nested too deeply") from exc
    if not parsed or not isinstance(parsed[0], sympy.Basic | sympy.MatrixBase):
        raise AnswerParseError(f"cannot parse {text[:80]!r}")
    return list(parsed)


def _plain_number(value: Any) -> bool:
    return (
        isinstance(value, sympy.Expr)
        and not isinstance(value, sympy.Symbol)
        and bool(value.is_number)
        and not value.has(sympy.oo, -sympy.oo, sympy.zoo, sympy.nan)
    )


def _symbolic(value: Any) -> bool:
    return isinstance(value, sympy.Expr) and bool(value.free_symbols)


def _numbers_equal(gold: sympy.Expr, answer: sympy.Expr, rel_tol: float) -> bool:
    """Exact comparison for exact values, relative tolerance when a decimal is involved."""
    diff = sympy.nsimplify(0) + gold - answer
    if diff.is_zero is True:
        return True
    if isinstance(diff, sympy.Rational):
        return False
    g = complex(gold.evalf(50))  # type: ignore[arg-type]
    a = complex(answer.evalf(50))  # type: ignore[arg-type]
    if gold.has(sympy.Float) or answer.has(sympy.Float):
        scale = max(abs(g), abs(a))
        return abs(g - a) <= rel_tol * scale if scale > 0 else g == a
    d = abs(diff.evalf(50))
    scale = max(abs(gold.evalf(50)), abs(answer.evalf(50)))
    return bool(d == 0 or d <= _EXACT_REL * scale)


def answers_equivalent(gold: str, answer: str, rel_tol: float = 1e-6) -> bool:
    """Decide whether normalized ``answer`` is equivalent to normalized ``gold``.

    Args:
        gold: normalized gold answer text (``normalize_answer``).
        answer: normalized extracted answer text.
        rel_tol: relative tolerance for comparisons that involve a decimal.

    Returns:
        True when equivalent (rules in the module docstring).

    Raises:
        AnswerParseError: gold or answer cannot be parsed (and the texts differ).
    """
    if gold == answer:
        return True
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    gold_parsed = parse_answer(gold)
    answer_parsed = parse_answer(answer)
    g, a = gold_parsed[0], answer_parsed[0]
    if _plain_number(g) and _plain_number(a):
        return _numbers_equal(g, a, rel_tol)
    if _plain_number(g) != _plain_number(a) and _symbolic(g) != _symbolic(a):
        return False  # a number never equals an expression in free variables
    return bool(verify(gold_parsed, answer_parsed, timeout_seconds=None))
