"""Subsets of the real line as sympy sets: the fallback when two set answers differ in form.

``grpo.verifiers.math.compare`` first matches set answers part by part (``(-\\infty, 1) \\cup
(2, \\infty)`` vs ``x < 1 \\text{ or } x > 2``). When that fails and both sides are subsets of
the real line with number endpoints, :func:`sets_equal` builds both as sympy sets, which
canonicalizes them, and compares those: ``(-\\infty, 0) \\cup (0, \\infty)`` equals
``\\mathbb{R} \\setminus \\{0\\}`` and ``x \\ne 0``; ``(-\\infty, 1] \\cup (1, \\infty)`` equals
``\\mathbb{R}``; ``x > 1 \\text{ and } x < 3`` equals ``(1, 3)``.

What converts (:func:`to_set`): an :class:`Interval`, a two-item ``( )`` :class:`Tuple` (an
open interval), a braced :class:`Items` of numbers (a finite set, ``\\emptyset``), a
:class:`Union`, :class:`Intersection` or :class:`Difference` of those, and ``x \\in S``.
Endpoints must be real numbers or ``\\pm\\infty`` (no free symbols, no percent), read as
leaves are: the exact reader ``grpo.verifiers.math.arith`` first (a value over its size limit
is refused, never computed), else latex2sympy2_extended (``symbolic.to_sympy``); each
interval must have ``lo < hi`` (or ``lo = hi``, both closed: a point), so ``[2, 1]`` is
refused rather than read as the empty set. Anything else gives None and the part-by-part
verdict stands.

Imported lazily by ``compare`` (it loads sympy).
"""

from __future__ import annotations

from typing import Any

import sympy

from grpo.verifiers.math.answer import (
    Answer,
    Difference,
    Equation,
    Intersection,
    Interval,
    Items,
    Scalar,
    Tuple,
    Union,
)
from grpo.verifiers.math.arith import ArithSyntaxError, NotExactError, TooLargeError, evaluate
from grpo.verifiers.math.symbolic import SympyParseError, to_sympy

__all__ = ["sets_equal", "to_set"]


def _point(s: Answer) -> Any | None:
    """A real number or ``±oo`` from a Scalar, else None."""
    if not isinstance(s, Scalar) or s.percent:
        return None
    try:  # the exact reader first: sizes are refused before sympy ever computes them
        exact = evaluate(s.text)
        return sympy.Rational(exact.exact.numerator, exact.exact.denominator)
    except TooLargeError:
        return None
    except (NotExactError, ArithSyntaxError):
        pass
    try:
        value = to_sympy(s.text)
    except SympyParseError:
        return None
    if value.free_symbols or value.is_extended_real is not True:
        return None
    return value


def _interval(lo: Answer, hi: Answer, lo_closed: bool, hi_closed: bool) -> Any | None:
    a, b = _point(lo), _point(hi)
    if a is None or b is None:
        return None
    if (lo_closed and a.is_infinite) or (hi_closed and b.is_infinite):
        return None
    order = sympy.Lt(a, b)
    if order is sympy.true:
        return sympy.Interval(a, b, not lo_closed, not hi_closed)
    if sympy.Eq(a, b) is sympy.true and lo_closed and hi_closed and a.is_finite:
        return sympy.FiniteSet(a)
    return None


def to_set(node: Answer) -> Any | None:
    """The sympy set of a real-line answer node (rules in the module docstring), or None.

    Args:
        node: an answer model node.

    Returns:
        A ``sympy.Set``, or None when the node is not a subset of the real line with number
        endpoints.
    """
    if isinstance(node, Interval):
        return _interval(node.lo, node.hi, node.lo_closed, node.hi_closed)
    if isinstance(node, Tuple):
        if node.brackets != "()" or len(node.items) != 2:
            return None
        return _interval(node.items[0], node.items[1], False, False)
    if isinstance(node, Items):
        if not node.braces:
            return None
        points = [_point(item) for item in node.items]
        if any(p is None or p.is_infinite for p in points):
            return None
        return sympy.FiniteSet(*points)
    if isinstance(node, Equation):
        return to_set(node.rhs) if node.variable else None
    if isinstance(node, Union | Intersection):
        parts = [to_set(p) for p in node.parts]
        if any(p is None for p in parts):
            return None
        return sympy.Union(*parts) if isinstance(node, Union) else sympy.Intersection(*parts)
    if isinstance(node, Difference):
        whole, removed = to_set(node.whole), to_set(node.removed)
        if whole is None or removed is None:
            return None
        return sympy.Complement(whole, removed)
    return None


def sets_equal(gold: Answer, answer: Answer) -> bool | None:
    """Whether two real-line answers are the same set; None when either does not convert.

    Both sets are evaluated by sympy into its canonical form (intervals sorted and merged,
    points), so equal sets compare equal; when either is left unevaluated, equal means the
    symmetric difference evaluates to the empty set, and an unevaluated result counts as not
    equal.
    """
    g, a = to_set(gold), to_set(answer)
    if g is None or a is None:
        return None
    if g == a:
        return True
    if _simple(g) and _simple(a):
        return False  # both in sympy's canonical form (sorted, merged): unequal forms differ
    return bool(sympy.SymmetricDifference(g, a) == sympy.EmptySet)


def _simple(s: Any) -> bool:
    """Evaluated to intervals and points only (no unevaluated complement or intersection)."""
    if isinstance(s, sympy.Union):
        return all(isinstance(p, sympy.Interval | sympy.FiniteSet) for p in s.args)
    return isinstance(s, sympy.Interval | sympy.FiniteSet) or s == sympy.EmptySet
