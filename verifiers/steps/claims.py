"""Checkable claims in a step, and their verdicts with sympy.

Before claims are looked for, a step's text is rewritten into plain arithmetic: markdown
(``**Step 1:**``, ``__``, backticks, a leading bullet ``-``/``*``/``1.``) and math delimiters
(``$``, ``\\(``, ``\\[``) are dropped; LaTeX operators become symbols (``5 \\times 6``,
``8 \\cdot 2`` -> ``*``; ``20 \\div 5`` -> ``/``; ``\\frac{a}{b}`` -> ``(a)/(b)``
(``1 \\frac{1}{2}`` -> the mixed number ``1 1/2``); ``\\sqrt{a}`` -> ``(a)^(1/2)``;
``\\left(`` -> ``(``; braces -> parentheses); operator words too (``7 times 3``, ``multiplied by``,
``divided by``, ``plus``, ``minus``); and "3 bags of 5 =" reads as ``3 * 5 =`` (only before
an ``=``: "= 20 sets of 3 eggs" describes the result).

Claims found in a step's text:

- GSM8K calculator annotations ``<<48/2=24>>``: ``48/2 = 24``;
- equations in the text (annotations removed): maximal runs of numbers, operators
  (``+ - * / × ÷ ^ ( )``), ``$``, ``%``, thousands separators and single-letter variables
  that contain ``=`` (``a``/``I`` before a word are words, not variables). A chain
  ``a = b = c`` gives the claims ``a = b`` and ``b = c``. Words end a run, so in "Natalia
  sold 48/2 = 24 clips" the claim is ``48/2 = 24``; a side that is empty (``hours = 8``) or
  cut by a word after an operator (``25 + shoe size 5 = 30``) gives no claim. ``20% of 50``
  reads as ``20/100*50`` and ``3 x 4`` as ``3*4``.

Verdict of ``lhs = rhs`` (:func:`check_claim`), with exact rationals: each side is read by
``grpo.verifiers.math.arith`` first — the math verifier's number reader, so ``1.5e3``,
``1 1/2`` (a mixed number) and ``0.\\overline{3}`` mean the same in both verifiers — and by
sympy only when a side has variables:

- both sides numbers: equal exactly -> True (a right side ``4%`` after a left side without
  ``%`` may also read as 4); else when the right side is written with ``k`` decimals and
  ``|lhs - rhs| <= 0.5·10^-k`` (the value rounded as written) -> True; else False;
- with variables: ``lhs - rhs`` simplifies to 0 -> True (an identity); otherwise None (an
  equation to solve, not a claim that can be refuted);
- unparsable side -> None (unverifiable); a side over ``arith.MAX_DIGITS`` digits, or with
  such a part, is never computed: the bounds of each *whole* side decide
  (:func:`holds_by_size`): refuted when they prove the values differ (``9^{9999^{9999}} = 1``
  is false), unverifiable otherwise (``10^100000 - 10^100000 = 0``, ``10^10^10 / 10^10^10 =
  1``: the size of a part says nothing of the whole);
- a right side ``4%`` read both ways is refuted only when both readings are.

Expressions are parsed by ``sympy.parse_expr`` (in ``symbolic``, imported on the first claim
that needs it) only after the text is reduced to the characters above, and every single letter
is bound to a plain Symbol, so no sympy function or Python name can be reached.
"""

from __future__ import annotations

import itertools
import math
import re
from fractions import Fraction

from grpo.verifiers.math.arith import (
    Magnitude,
    NotExactError,
    TooLargeError,
    evaluate,
    log10_abs,
    magnitudes_differ,
)

__all__ = ["Claim", "check_claim", "find_claims", "holds_by_size"]

Claim = tuple[str, str]
"""``(lhs, rhs)`` texts of one equation."""

_ANNOTATION = re.compile(r"<<([^<>]*)>>")
_WORD = re.compile(r"[A-Za-z]{2,}")
_ARTICLE = re.compile(r"\b[aAI]\b(?=\s+[A-Za-z]{2,})")  # "a minute", "I think": words
_PERCENT_OF = re.compile(r"(\d+(?:\.\d+)?)\s*%\s*of\b")
_TIMES_X = re.compile(r"(?<=[\d)])\s*[x×]\s*(?=[\d($])")
_RUN = re.compile(r"[0-9A-Za-z.,+\-–−*/×÷()^$%=!\s]+")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d.])")
_PARTIAL = re.compile(r"^(?:[+*/^×÷]|[-–−]\s)")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d])")
_DECIMALS = re.compile(r"\d\.(\d+)")
_BREAK = "\x00"  # replaces words so that they end a run


_MARKDOWN = re.compile(r"\*\*|__|`|^\s*(?:[-*•]|\d+[.)])\s+")
_DELIMITERS = re.compile(r"\\[()\[\]]|\$\$")
_MATH_SPAN = re.compile(r"\$([^$]*=[^$]*)\$")
_LATEX_MIXED = re.compile(r"(?<![\d.])(\d+)\s*\\[dt]?frac\s*\{(\d+)\}\s*\{(\d+)\}")
_LATEX_SQRT = re.compile(r"\\sqrt\s*\{([^{}]*)\}")
_LATEX_FRAC = re.compile(r"\\[dt]?frac\s*\{([^{}]*)\}\s*\{([^{}]*)\}")
_LATEX_OPS = (
    (re.compile(r"\\(?:times|cdot|ast)(?![A-Za-z])"), " * "),
    (re.compile(r"\\div(?![A-Za-z])"), " / "),
    (re.compile(r"\\(?:left|right|displaystyle)(?![A-Za-z])|\\[,;!: ]|\\quad"), " "),
    (re.compile(r"\\%"), "%"),
    (re.compile(r"\\text\s*\{[^{}]*\}"), " "),
)
_WORD_OPS = (
    (re.compile(r"\b(?:multiplied\s+by|times)\b", re.IGNORECASE), " * "),
    (re.compile(r"\bdivided\s+by\b", re.IGNORECASE), " / "),
    (re.compile(r"\bplus\b", re.IGNORECASE), " + "),
    (re.compile(r"\bminus\b", re.IGNORECASE), " - "),
)
# "3 bags of 5 = 15": only before an "=" ("20 sets of 3 eggs" after one is a description)
_GROUPS_OF = re.compile(r"(\d+(?:\.\d+)?)\s+[A-Za-z]{2,}\s+of\s+(\$?\d+(?:\.\d+)?)(?=\s*=)")


def _plain(step: str) -> str:
    """Rewrite a step into plain arithmetic (rules in the module docstring)."""
    text = _MARKDOWN.sub(" ", step)
    text = _DELIMITERS.sub(" ", text)
    text = _MATH_SPAN.sub(lambda m: f" {m.group(1)} ", text)  # $8 \cdot 2 = 16$; $5 stays money
    text = text.replace("$", "\x01")
    text = _LATEX_MIXED.sub(r"\1 \2/\3", text)  # 1 \frac{1}{2}: the mixed number 1 1/2
    for _ in range(3):
        text = _LATEX_FRAC.sub(r"((\1)/(\2))", text)
        text = _LATEX_SQRT.sub(r"((\1)^(1/2))", text)
    for pattern, repl in _LATEX_OPS:
        text = pattern.sub(repl, text)
    text = text.replace("{", "(").replace("}", ")")
    for pattern, repl in _WORD_OPS:
        text = pattern.sub(repl, text)
    text = _GROUPS_OF.sub(r"\1 * \2", text)
    return text.replace("\x01", "$")


def _mask_words(text: str) -> str:
    """Replace words of 2+ letters (and then the "of" of a percent) by a run breaker."""
    text = _PERCENT_OF.sub(
        lambda m: f"{m.group(1)}/100*" + " " * (len(m.group(0)) - len(m.group(1)) - 5), text
    )
    text = _TIMES_X.sub(lambda m: m.group(0).replace("x", "*").replace("×", "*"), text)
    text = _ARTICLE.sub(_BREAK, text)
    return _WORD.sub(lambda m: _BREAK * len(m.group(0)), text)


def _claims_in_run(run: str) -> list[Claim]:
    run = run.replace("–", "-").replace("−", "-")
    run = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), run)
    run = _SPACE_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), run)
    claims: list[Claim] = []
    for piece in run.split(","):
        sides = [" ".join(s.split()).rstrip(".").strip().lstrip("!") for s in piece.split("=")]
        if sides and sides[-1].endswith("!"):
            sides[-1] = sides[-1].rstrip("!")  # "3+4 = 7!" ends a sentence; "5! = 120" stays
        for lhs, rhs in itertools.pairwise(sides):
            complete = not (_PARTIAL.match(lhs) or _PARTIAL.match(rhs))
            if lhs and rhs and complete and any(ch.isdigit() for ch in lhs + rhs):
                claims.append((lhs, rhs))
    return claims


def _continues_from_left(text: str, start: int) -> bool:
    """True when an operator precedes the run, past masked words (``25 + shoe size 5 = 30``)."""
    i = start - 1
    while i >= 0 and (text[i].isspace() or text[i] == _BREAK):
        i -= 1
    return i >= 0 and text[i] in "+-–−*/×÷(^" and text[i + 1 : start].count(_BREAK) > 0


def find_claims(step: str) -> list[Claim]:
    """Return the checkable claims of one step's text (rules in the module docstring).

    Args:
        step: the text of one step.

    Returns:
        ``(lhs, rhs)`` pairs in order: annotations first, then equations of the text.
    """
    claims: list[Claim] = []
    for note in _ANNOTATION.finditer(step):
        claims.extend(_claims_in_run(note.group(1)))
    text = _mask_words(_plain(_ANNOTATION.sub(lambda m: " " * len(m.group(0)), step)))
    for run in _RUN.finditer(text):
        if "=" in run.group(0):
            found = _claims_in_run(run.group(0))
            if found and _continues_from_left(text, run.start()):
                found = found[1:]  # its left side is the tail of an expression cut by a word
            claims.extend(found)
    return list(dict.fromkeys(claims))


def _exact(side: str) -> Fraction | Magnitude | None:
    """The side read by the shared number reader: its exact value, the bounds of its whole
    value when it is too large to compute (``arith.Magnitude``), or None (use sympy)."""
    text = side.replace("$", "").replace("×", "*").replace("÷", "/")
    try:
        return evaluate(text).exact
    except TooLargeError as exc:
        return exc.magnitude
    except NotExactError:
        return None  # ArithSyntaxError (``2 4/3``) propagates: the claim is unverifiable


def _half_unit(rhs: str) -> Fraction:
    """Half a unit in the last decimal place written on the right side (0: no decimals)."""
    decimals = [len(d) for d in _DECIMALS.findall(rhs)]
    return Fraction(1, 2 * 10 ** max(decimals)) if decimals else Fraction(0)


def _holds_exact(left: Fraction, right: Fraction, rhs: str) -> bool:
    if left == right:
        return True
    half_unit = _half_unit(rhs)
    return bool(half_unit) and abs(left - right) <= half_unit


def holds_by_size(
    left: Fraction | Magnitude, right: Fraction | Magnitude, half_unit: Fraction
) -> bool | None:
    """Decide ``left = right`` (within ``half_unit``) when a side is only known by bounds.

    A side too large to compute is an ``arith.Magnitude``: bounds on ``log10 |value|`` of the
    whole side. With ``half_unit`` 0 the claim is refuted when ``arith.magnitudes_differ``
    proves the values differ, and unverifiable otherwise (``10^100000 - 10^100000 = 0`` may
    cancel, ``9^99999999 = 9^99999999`` is alike). With a rounding allowance, it is refuted
    when the larger side is over ten times the smaller and ``0.9 · 10^lo`` of it exceeds
    ``half_unit`` (``|left - right|`` is at least that), holds when both sides are so small
    that ``|left| + |right| <= half_unit`` (``10^-20000 = 0.00``), and is unverifiable else.

    Returns:
        True (holds), False (refuted) or None (unverifiable); never raises.
    """
    if not half_unit:
        return False if magnitudes_differ(left, right) else None
    ml = left if isinstance(left, Magnitude) else Magnitude.of(left)
    mr = right if isinstance(right, Magnitude) else Magnitude.of(right)
    log_unit = log10_abs(half_unit)  # exact-enough for any number of decimals
    for big, small in ((ml, mr), (mr, ml)):
        if big.lo > small.hi + 1 and big.lo + math.log10(0.9) > log_unit + 1e-9:
            return False
    if max(ml.hi, mr.hi) + math.log10(2) <= log_unit - 1e-9:
        return True
    return None


def _decide(lhs: str, rhs: str) -> bool | None:
    left, right = _exact(lhs), _exact(rhs)
    if isinstance(left, Fraction) and isinstance(right, Fraction):
        return _holds_exact(left, right, rhs)
    if left is not None and right is not None:
        return holds_by_size(left, right, _half_unit(rhs))
    if isinstance(left, Magnitude) or isinstance(right, Magnitude):
        return None  # a side too large to compute against one with variables
    from grpo.verifiers.steps import symbolic  # sympy: imported on the first such claim

    return symbolic.holds(lhs, rhs, _half_unit(rhs))


def check_claim(lhs: str, rhs: str) -> bool | None:
    """Decide ``lhs = rhs``: True (holds), False (refuted) or None (cannot be checked).

    Rules are in the module docstring. A right side ending in ``%`` while the left side has
    none (``18/450*100 = 4%``) may also be read as the bare number. Raises nothing for bad
    input: an unparsable side gives None.
    """
    try:
        verdict = _decide(lhs, rhs)
        if verdict is not True and rhs.endswith("%") and "%" not in lhs:
            bare = _decide(lhs, rhs[:-1])
            # refuted only when both readings are: an unverifiable one may be the true one
            verdict = (
                True if bare is True else (False if bare is False and verdict is False else None)
            )
    except Exception:
        return None
    return verdict
