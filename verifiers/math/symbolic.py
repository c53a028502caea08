"""The sympy side of leaf comparison: LaTeX leaves that are not exact arithmetic.

Imported lazily by ``grpo.verifiers.math.compare`` (and preloaded by the worker pool), so that
importing extraction, normalization or the answer model never loads sympy. Parsing is done by
latex2sympy2_extended (math-verify's LaTeX engine) with no timeout of its own: the pool's
hard wall-clock limit bounds it.

:func:`leaves_equal` decides two expressions, in order (the symbol ``i`` is first read as the
imaginary unit when the other side is a non-real number: ``i`` vs ``\\sqrt{-1}``):

1. both are numbers (no free symbols): infinities must be identical; otherwise exact values
   must be equal exactly (the difference simplifies to 0, or is below 1e-30 of their magnitude
   at 50 digits); when either side holds a decimal (``Float``), ``|g - a| <= rel_tol ·
   max(|g|, |a|)`` only if a decimal may approximate the other side (``_approximates``: not
   when both are rationals and the exact side has a finite decimal expansion, so
   ``1234568.0`` vs ``1234567`` is not equal);
2. free symbols on one side only, after that side is simplified (``x - x`` is 0; ``12`` vs
   ``x^5 - 1``) -> not equal;
3. both symbolic: ``simplify(g - a) == 0`` -> equal; a non-zero constant difference -> not
   equal; else both sides are evaluated at six probe points (negative, fractional and
   positive, every symbol of either side): they must agree at each (``_zero_everywhere``).
"""

from __future__ import annotations

import functools
import logging
import math
import re
import sys
from typing import Any

import sympy
from latex2sympy2_extended import latex2sympy

__all__ = [
    "SympyParseError",
    "leaves_equal",
    "magnitude",
    "magnitude_of",
    "proportional",
    "to_sympy",
]

logging.getLogger("latex2sympy2_extended").setLevel(logging.ERROR)

_EXACT_REL = sympy.Float("1e-30", 50)
_PROBES = tuple(
    sympy.Float(p, 40) for p in ("-1.2917", "-0.6183", "0.3541", "0.7312", "1.3719", "2.4111")
)
_PROBE_REL = sympy.Float("1e-30", 40)
_DECIMAL = re.compile(r"(?<![\d.])(\d+)\.(\d+)(?![\d.]|[eE][+-]?\d)")
_E_NOTATION = re.compile(r"(?<![A-Za-z\d.\\])(\d+(?:\.\d+)?)[eE]([+-]?\d+)(?![A-Za-z\d])")


class SympyParseError(ValueError):
    """latex2sympy could not read the text, or it is not an expression."""


@functools.lru_cache(maxsize=4096)
def to_sympy(text: str) -> Any:
    """Parse a leaf's normalized LaTeX into a sympy expression (cached per worker).

    ``2e4`` is read as ``2\\times10^{4}`` first (the number reader's rule), never ``2·e·4``.

    Raises:
        SympyParseError: the parser failed, recursed too deep, or returned no expression.
    """
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 3000))
    prepared = _E_NOTATION.sub(r"(\1\\times10^{\2})", text)
    try:
        value = latex2sympy(prepared)
    except RecursionError as exc:
        raise SympyParseError("expression nested too deeply") from exc
    except Exception as exc:
        raise SympyParseError(f"cannot parse {text[:80]!r}: {str(exc)[:120]}") from exc
    if not isinstance(value, sympy.Expr):
        raise SympyParseError(f"{text[:80]!r} is not a single expression")
    return value


def _is_number(value: Any) -> bool:
    return isinstance(value, sympy.Expr) and not value.free_symbols


def _infinite(value: Any) -> bool:
    return bool(value.has(sympy.oo, -sympy.oo, sympy.zoo, sympy.nan))


def magnitude(value: Any) -> float | None:
    """``log10 |value|`` of a finite non-zero number, else None.

    The modulus and its logarithm stay in sympy Floats (any exponent), so ``10^{400}\\pi`` is
    about 400.5, never a Python float overflow read as infinitely large.
    """
    if not _is_number(value) or _infinite(value):
        return None
    try:
        v = sympy.Abs(value).evalf(30)
        if not isinstance(v, sympy.Float) or v == 0 or not v.is_finite:
            return None
        size = float(sympy.log(v, 10).evalf(30))
    except (TypeError, ValueError, OverflowError):
        return None
    return size if math.isfinite(size) else None


def magnitude_of(text: str, side: str) -> float | None:
    """``log10 |value|`` of a leaf's text when it is a finite non-zero number, else None.

    Raises:
        SympyParseError: the text cannot be parsed (``side`` set).
    """
    return magnitude(_parse(text, side))


def _numbers_equal(gold: Any, answer: Any, rel_tol: float | None) -> bool:
    """Exact numbers exactly (to 1e-30 relative at 50 digits); decimals by one rule.

    With ``rel_tol`` None (the MATH convention) a decimal is the rational it spells, compared
    exactly (``0.5\\pi`` vs ``\\frac{\\pi}{2}``: 1; ``1.73205`` vs ``\\sqrt{3}``, ``3.14``
    vs ``\\pi``: 0). With a ``rel_tol``, a decimal may approximate a value that no finite
    decimal is (``_approximates``) to that relative tolerance.

    The comparison stays in sympy Floats (any exponent), never Python floats, so values past
    1e308 (``\\Gamma(10^9)``) are not infinities that compare equal.
    """
    if _infinite(gold) or _infinite(answer):
        return bool(gold == answer)
    floats = gold.has(sympy.Float) or answer.has(sympy.Float)
    if floats and rel_tol is None:  # only e-notation is left: decimals were made exact
        gold, answer = (
            v.xreplace({f: sympy.Rational(str(f)) for f in v.atoms(sympy.Float)})
            for v in (gold, answer)
        )
        floats = False
    diff = gold - answer
    if diff.is_zero is True:
        return True
    if isinstance(diff, sympy.Rational):
        return False
    g, a = gold.evalf(50), answer.evalf(50)
    d = abs((g - a).evalf(50))
    scale = sympy.Max(abs(g), abs(a))
    for value in (abs(g), abs(a), d):  # complex values compare by modulus of the difference
        if not value.is_finite or not value.is_comparable:
            raise ValueError("a value that cannot be evaluated to 50 digits")
    if floats:
        assert rel_tol is not None
        if not _approximates(gold, answer):
            return False
        return bool(d <= sympy.Float(rel_tol, 50) * scale) if scale > 0 else bool(d == 0)
    return bool(d == 0 or d <= _EXACT_REL * scale)


def _approximates(gold: Any, answer: Any) -> bool:
    """A decimal may approximate only a value that no finite decimal is (an irrational, 1/3).

    Decimals are read as the rationals they spell (``1234568.0`` is 1234568); when both sides
    are then rationals and the side without a decimal has a finite decimal expansion, only
    equality counts (``1234567`` vs ``1234568.0`` is not equal).
    """
    g, a = (
        sympy.nsimplify(v, rational=True) if v.has(sympy.Float) else sympy.simplify(v)
        for v in (gold, answer)
    )  # the exact side simplified: \\sqrt{2}^2 is the rational 2
    if not (isinstance(g, sympy.Rational) and isinstance(a, sympy.Rational)):
        return True
    exact = [v for v, orig in ((g, gold), (a, answer)) if not orig.has(sympy.Float)]
    return any(not _finite_decimal(int(v.q)) for v in exact)


def _finite_decimal(den: int) -> bool:
    for p in (2, 5):
        while den % p == 0:
            den //= p
    return den == 1


def _undefined(value: Any) -> bool:
    return not value.is_number or bool(value.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo))


def _zero_everywhere(gold: Any, answer: Any) -> bool:
    """``simplify(gold - answer) == 0``; else the two agree at every probe point.

    The probe points put every symbol of either side (their union: ``x + 2`` vs ``x + 1``
    differ by a constant) at negative, fractional and positive values (``_PROBES``). Each side
    is evaluated on its own at 40 digits: a point where one side is undefined (``nan``,
    ``zoo``) and the other is not is a disagreement, one where both are is skipped; values
    (complex allowed: ``\\sqrt{x}`` at ``x < 0``) agree when ``|g - a| <= 1e-30 · max(|g|,
    |a|)``, a relative test (``x + e^{-100x}`` vs ``x`` differs at ``x < 0``). Agreement at
    every point is then checked by sympy's ``equals(0)`` on the difference: a difference it
    proves non-zero (``x + 10^{-40} \\sin x`` vs ``x``) is not equal.

    Raises:
        ValueError: no probe point where both sides are defined (the caller's undecided).
    """
    diff = sympy.simplify(gold - answer)
    if diff == 0:
        return True
    if diff.is_number and not _undefined(diff):
        return False  # a non-zero constant: x + 2 vs x + 1
    symbols = sorted(gold.free_symbols | answer.free_symbols, key=str)
    decided = False
    for probe in _PROBES:
        point = {s: probe + sympy.Float("0.1137") * j for j, s in enumerate(symbols)}
        g = gold.evalf(40, subs=point)
        a = answer.evalf(40, subs=point)
        g_undefined, a_undefined = _undefined(g), _undefined(a)
        if g_undefined and a_undefined:
            continue
        if g_undefined or a_undefined:
            return False
        decided = True
        # in sympy Floats at 40 digits: Python floats would hide x (1 + 10^{-25}) vs x
        scale = sympy.Max(abs(g), abs(a)).evalf(40)
        if abs(g - a).evalf(40) > _PROBE_REL * scale:
            return False
    if not decided:
        raise ValueError("no probe point where both sides are defined")
    # the probes cannot see a tiny term (x + 10^{-40} \\sin x); sympy's own zero test can
    return diff.equals(0) is not False


def _imaginary_unit(gold: Any, answer: Any) -> tuple[Any, Any]:
    """Read the symbol ``i`` as the imaginary unit when the other side is a non-real number.

    ``i`` vs ``\\sqrt{-1}`` is equal; otherwise ``i`` stays a variable (an index, ``a_i``).
    """
    g_unit = [s for s in gold.free_symbols if str(s) == "i"]
    a_unit = [s for s in answer.free_symbols if str(s) == "i"]
    if g_unit and (_non_real(answer) or (gold.free_symbols == set(g_unit) and _is_number(answer))):
        gold = gold.subs(g_unit[0], sympy.I)
    elif a_unit and (_non_real(gold) or (answer.free_symbols == set(a_unit) and _is_number(gold))):
        answer = answer.subs(a_unit[0], sympy.I)
    return gold, answer


def _non_real(value: Any) -> bool:
    if not _is_number(value) or _infinite(value):
        return False
    try:
        return complex(value.evalf(30)).imag != 0
    except (TypeError, ValueError):
        return False


def leaves_equal(gold: str, answer: str, rel_tol: float | None = None) -> bool:
    """Decide two leaf expressions (rules in the module docstring).

    Args:
        gold, answer: normalized LaTeX of one expression each.
        rel_tol: None for the MATH convention on decimals, else the opt-in tolerance
            (``_numbers_equal``).

    Raises:
        SympyParseError: one side cannot be parsed; ``side`` is set to ``"gold"`` or
            ``"answer"``.
    """
    if rel_tol is None:  # the MATH convention: a decimal is the rational it spells
        gold, answer = _exact_decimals(gold), _exact_decimals(answer)
    g, a = _imaginary_unit(_parse(gold, "gold"), _parse(answer, "answer"))
    if _is_number(g) != _is_number(a):  # the parser does not evaluate: x - x, sin^2 + cos^2
        g, a = (g, sympy.simplify(a)) if _is_number(g) else (sympy.simplify(g), a)
    if _is_number(g) and _is_number(a):
        return _numbers_equal(g, a, rel_tol)
    if _is_number(g) != _is_number(a):
        return False
    return _zero_everywhere(g, a)


def _exact_decimals(text: str) -> str:
    """Decimal literals as exact fractions (``5.0000001`` is ``\\frac{50000001}{10000000}``):
    sympy reads a decimal as a 15-digit float, and ``nsimplify`` would round it."""
    return _DECIMAL.sub(
        lambda m: rf"(\frac{{{m.group(1)}{m.group(2)}}}{{1{'0' * len(m.group(2))}}})", text
    )


def proportional(gold: tuple[str, str], answer: tuple[str, str]) -> bool:
    """Equations ``l1 = r1`` and ``l2 = r2`` with ``l1 - r1 = c (l2 - r2)``, ``c`` a non-zero
    number (``2y = 4x + 6`` and ``y = 2x + 3``).

    Raises:
        SympyParseError: a side cannot be parsed (``side`` set).
    """
    d1 = _parse(gold[0], "gold") - _parse(gold[1], "gold")
    d2 = _parse(answer[0], "answer") - _parse(answer[1], "answer")
    if d1 == 0 or d2 == 0:
        return bool(d1 == d2)
    ratio = sympy.simplify(d1 / d2)
    return bool(ratio.is_number and ratio != 0 and not _infinite(ratio))


def _parse(text: str, side: str) -> Any:
    try:
        return to_sympy(text)
    except SympyParseError as exc:
        exc.side = side  # type: ignore[attr-defined]
        raise
