"""Checkable claims in a step, and their verdicts.

A step's text is first rewritten into plain arithmetic by ``rewrite.plain`` (markdown, LaTeX
environments and operators, number words, operator and relation words, ``of``, units: rules
in its docstring). Claims are then read from it:

- GSM8K calculator annotations ``<<48/2=24>>``: ``48/2 = 24``;
- relations in the text (annotations removed): maximal runs of numbers, operators
  (``+ - * / ^ ( ) !``), ``$``, ``%``, ``π``, ``…``, thousands separators, unit marks,
  single-letter variables and relations (``= ≈ < > ≤ ≥ ≠``, and the weak ``=`` of "is")
  that contain a relation (``a``/``I`` before a word are words, not variables). A chain
  ``a = b > c ≈ d`` gives one claim per neighbouring pair: ``a = b``, ``b > c``, ``c ≈ d``.
  Words end a run, so in "Natalia sold 48/2 = 24 clips" the claim is ``48/2 = 24``; a side
  that is empty (``hours = 8``) or cut by a word after an operator (``25 + shoe size 5 =
  30``), or after an ``of`` that follows a number (``2/5 of the 30 = 12``), gives no claim;
  a weak ``=`` gives one only when its left side computes something (has an operator);
- a step that starts with a relation (``&= 90 + 14`` in an ``align`` block, ``= 104`` on a
  line of its own) continues the previous step: its left side is the previous step's last
  side (:func:`step_claims`'s ``carry``);
- units: when both sides carry units (unit marks, a trailing unit word, ``$``), the claim is
  checked only when every unit of the right side is one of the left side's (``5 cm × 3 cm =
  15 cm²``, ``3 hours × $15 = $45``), and not when the left side is a bare number: ``2 days
  = 48 hours`` and ``12 eggs = 144 eggs`` are conversions or descriptions, not arithmetic;
- a step ending in ``?`` asks, it does not claim: it has no claims.

Verdict of a claim (:func:`check_claim`), with exact rationals: each side is read by
``grpo.verifiers.math.arith`` first — the math verifier's number reader, so ``1.5e3``,
``1 1/2`` (a mixed number) and ``0.\\overline{3}`` mean the same in both verifiers — and by
sympy (``symbolic``) only when a side has variables, ``π`` or an irrational root:

- ``=``, both sides numbers: equal exactly -> True (a right side ``4%`` after a left side
  without ``%`` may also read as 4); else when the right side is written with ``k`` decimals
  and ``|lhs - rhs| <= 0.5·10^-k`` (the value rounded as written) -> True; else False;
- ``≈`` (also a number written with ``…`` after its decimals): within the precision shown.
  The side that is a plain number (the right one when both are) sets a unit: ``10^-k`` for
  ``k`` decimals, ``10^z`` for an integer ending in ``z`` zeros (``≈ 300``: hundreds), /100
  for a percent, ``1/q`` for a simple fraction ``p/q`` on the right (``π ≈ 22/7`` holds,
  ``≈ 25/7`` does not). The claim holds when the other side rounds or truncates to it at
  that unit: ``|l - r| <= unit/2``, or ``|l - r| < unit`` with ``|r| <= |l|``
  (``\\sqrt{5} ≈ 2.24`` and ``≈ 2.23`` hold, ``≈ 2.31`` does not). With no plain number on
  either side, each decimal written on the right allows its own relative precision (``π ×
  25 ≈ 3.14 × 25``); with no decimal either, it is unverifiable;
- ``< > ≤ ≥ ≠``: decided exactly (sympy for irrational sides);
- with variables: an ``=`` whose ``lhs - rhs`` simplifies to 0 holds (an identity); any other
  claim with variables is None (an equation to solve, not a claim that can be refuted);
- unparsable side -> None (unverifiable); a side over ``arith.MAX_DIGITS`` digits, or with
  such a part, is never computed: the bounds of each *whole* side decide
  (:func:`holds_by_size`): an ``=`` is refuted when they prove the values differ
  (``9^{9999^{9999}} = 1`` is false) and unverifiable otherwise (``10^100000 - 10^100000 =
  0``); an order or ``≠`` is decided when the bounds and signs prove it;
- a right side ``4%`` read both ways is refuted only when both readings are.

Expressions are parsed by ``sympy.parse_expr`` (in ``symbolic``, imported on the first claim
that needs it) only after the text is reduced to the characters above, and every single letter
is bound to a plain Symbol, so no sympy function or Python name can be reached.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from fractions import Fraction
from typing import NamedTuple

from grpo.verifiers.math.arith import (
    Magnitude,
    NotExactError,
    TooLargeError,
    evaluate,
    log10_abs,
    magnitudes_differ,
)
from grpo.verifiers.steps.rewrite import (
    ANGLE,
    ARGUMENT_SEPARATOR,
    FUNCTIONS,
    POISON,
    UNIT_MARKS,
    WEAK_EQ,
    plain,
)

__all__ = ["RELATIONS", "Claim", "check_claim", "find_claims", "holds_by_size", "step_claims"]

RELATIONS = "=≈<>≤≥≠"
"""The relations a claim may state (after ``rewrite.plain``)."""


class Claim(NamedTuple):
    """One claim: ``lhs rel rhs`` (``rel`` one of :data:`RELATIONS`)."""

    lhs: str
    rhs: str
    rel: str = "="

    def __str__(self) -> str:
        return f"{self.lhs} {self.rel} {self.rhs}"


_ANNOTATION = re.compile(r"<<([^<>]*)>>")
_WORD = re.compile(r"[A-Za-z]{2,}")
_ARTICLE = re.compile(r"\b[aAI]\b(?=\s+[A-Za-z]{2,})")  # "a minute", "I think": words
_TIMES_X = re.compile(r"(?<=[\d)])\s*[x×]\s*(?=[\d($])")
_RUN = re.compile(
    r"[0-9A-Za-z.,+\-*/()^$%!\s"
    + RELATIONS
    + WEAK_EQ
    + POISON
    + "π…"
    + UNIT_MARKS
    + "".join(FUNCTIONS.values())
    + ARGUMENT_SEPARATOR
    + ANGLE
    + "]+"
)
_SPLIT = re.compile("([" + RELATIONS + WEAK_EQ + "])")
_UNIT = re.compile("[" + UNIT_MARKS + "]")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.])\d{1,3}(?: \d{3})+(?![\d.])")
_PARTIAL = re.compile(r"^(?:[+*/^]|-\s)|[+\-*/^(]$")
_THOUSANDS = re.compile(r"\d{1,3}(?:,\d{3})+(?![\d])")
_DECIMALS = re.compile(r"\d\.(\d+)")
_DECIMAL_NUMBER = re.compile(r"\d+\.\d+")
_OPERATOR = re.compile(r"[+*/^]|(?<=[\d)π\s])-|[\d)]\s*\(")  # 2(21): a product too
_HAS_VALUE = re.compile(r"[\dπ]")
_BREAK = "\x00"  # replaces words so that they end a run
_TRAILING_WORD = re.compile(r"\s*([A-Za-z]{2,})")
_OF_BEFORE = re.compile(r"\bof\b[\sA-Za-z]*$", re.IGNORECASE)
_END_OF_STEP = re.compile(r"[\s.,;:!)]*$")
_NEGATED = re.compile(
    r"\b(?:not\s+true|is\s+false|impossible|contradiction|absurd|not\s+possible)\b", re.IGNORECASE
)
_STOP_WORDS = frozenset(
    [
        "and",
        "or",
        "so",
        "then",
        "the",
        "of",
        "to",
        "for",
        "each",
        "is",
        "are",
        "was",
        "in",
        "on",
        "at",
        "as",
        "if",
        "but",
        "more",
        "less",
        "fewer",
        "total",
        "left",
        "remaining",
        "extra",
        "additional",
        "altogether",
        "together",
        "overall",
        "all",
        "only",
        "than",
        "not",
        "now",
        "also",
        "since",
        "because",
        "thus",
        "hence",
        "therefore",
        "which",
        "that",
        "this",
        "it",
        "per",
    ]
)
_BARE_FRACTION = re.compile(r"^\(?\s*(\d+)\s*/\s*(\d+)\s*\)?$")
_BARE_PERCENT = re.compile(r"^\d+(?:\.\d+)?\s*%$")
_PREPOSITION_BEFORE = re.compile(
    r"\b(?:of|by|from|than|to|with|per|in|on|at|for|into|over)\s*$", re.IGNORECASE
)
_ELLIPSIS_NUMBER = re.compile(r"^\$?\s*-?\d+\.\d+\s*…$")
_SIMPLE_FRACTION = re.compile(r"^\(*\s*(-?)\s*\(*(\d+)\)*\s*/\s*\(*(\d+)\s*\)*$")
_PLAIN_NUMBER = re.compile(r"^\$?\s*([-+]?)\s*\$?\s*(\d+)(?:\.(\d+))?\s*(%?)$")


def _mask_words(text: str) -> str:
    """Replace words of 2+ letters by run breakers (``3 x 4`` keeps its ``x`` as ``*``)."""
    text = _TIMES_X.sub(lambda m: m.group(0).replace("x", "*").replace("×", "*"), text)
    text = _ARTICLE.sub(_BREAK, text)
    return _WORD.sub(lambda m: _BREAK * len(m.group(0)), text)


def _units_of(side: str, table: list[frozenset[str]]) -> frozenset[str]:
    names: set[str] = set()
    for mark in _UNIT.findall(side):
        k = ord(mark) - 0xE000
        if k < len(table):
            names |= table[k]
    if "$" in side:
        names.add("dollar")
    return frozenset(names)


def _clean(side: str) -> str:
    side = _UNIT.sub(" ", side)
    return " ".join(side.split()).rstrip(".").strip().lstrip("!")


def _units_allow(lhs: str, rel: str, lu: frozenset[str], ru: frozenset[str]) -> bool:
    """Whether a claim whose sides carry units ``lu``/``ru`` is arithmetic (module docstring)."""
    if rel in "=≈" and lu and not _OPERATOR.search(_clean(lhs)):
        return False  # "12 eggs = 144 eggs", "2 hours = 2 x 60": a conversion or a description
    return not lu or not ru or ru <= lu


def _portion(side: str) -> bool:
    """A bare proper fraction or percent (``2/5``, ``(1/3)``, ``50%``): a portion of something
    named elsewhere when it stands before a weak ``=``."""
    m = _BARE_FRACTION.match(side)
    if m is not None:
        return int(m.group(1)) < int(m.group(2))
    return _BARE_PERCENT.match(side) is not None


def _claims_in_run(
    run: str,
    table: list[frozenset[str]],
    trailing: frozenset[str],
    after_preposition: bool = False,
) -> tuple[list[Claim], str | None]:
    """The claims of one run, and its last side when the run ends in one (else None).

    ``trailing``: the unit named right after the run; ``after_preposition``: the run follows
    "of", "by", ... (its first side is the object of a phrase: no weak claim from it)."""
    run = run.replace("–", "-").replace("−", "-")
    run = _THOUSANDS.sub(lambda m: m.group(0).replace(",", ""), run)
    run = _SPACE_THOUSANDS.sub(lambda m: m.group(0).replace(" ", ""), run)
    claims: list[Claim] = []
    tail: str | None = None
    pieces = run.split(",")
    for n, piece in enumerate(pieces):
        parts = _SPLIT.split(piece)
        sides, rels = parts[0::2], parts[1::2]
        raw = list(sides)
        sides = [_clean(s) for s in sides]
        if sides and sides[-1].endswith("!"):
            sides[-1] = sides[-1].rstrip("!")  # "3+4 = 7!" ends a sentence; "5! = 120" stays
        for i, rel in enumerate(rels):
            lhs, rhs = sides[i], sides[i + 1]
            if not lhs or not rhs or _PARTIAL.search(lhs) or _PARTIAL.search(rhs):
                continue
            if POISON in lhs or POISON in rhs:
                continue  # a function, a Greek letter, an unknown command: not computable
            if not _HAS_VALUE.search(lhs + rhs):
                continue
            if rel == WEAK_EQ:
                if not _OPERATOR.search(lhs) or _portion(lhs):
                    continue  # "box 2 is 5*3", "2/5 is equal to 12.8 ha": not "2 = 5*3"
                if after_preposition and n == 0 and i == 0:
                    continue  # "an increase of 50% of 8 is 1.5*8"
                rel = "="
            last = n == len(pieces) - 1 and i + 1 == len(rels)
            rhs_units = _units_of(raw[i + 1], table) | (trailing if last else frozenset())
            if not _units_allow(raw[i], rel, _units_of(raw[i], table), rhs_units):
                continue
            if rel == "=" and _ELLIPSIS_NUMBER.match(rhs):
                rel = "≈"  # 1.41421…: the decimals shown, truncated
            claims.append(Claim(lhs, rhs.rstrip("…").strip(), rel))
        last_side = sides[-1]
        if n == len(pieces) - 1 and rels and last_side and not _PARTIAL.search(last_side):
            tail = None if POISON in last_side else last_side.rstrip("…").strip()
    return claims, tail


def _continues_from_left(text: str, masked: str, start: int) -> bool:
    """True when the run's left side is the tail of an expression cut by words: an operator
    before them (``25 + shoe size 5 = 30``), or an ``of`` after a number (``2/5 of the 30``)."""
    i = start - 1
    while i >= 0 and (masked[i].isspace() or masked[i] == _BREAK):
        i -= 1
    if i < 0 or masked[i + 1 : start].count(_BREAK) == 0:
        return False
    if masked[i] in "+-*/(^":
        return True
    return masked[i] in "0123456789)%" and bool(_OF_BEFORE.search(text[i + 1 : start]))


def _trailing_unit(text: str, end: int) -> frozenset[str]:
    """The unit named by the word right after a run (``= 48 hours``), if any."""
    from grpo.verifiers.steps.rewrite import unit_names

    m = _TRAILING_WORD.match(text, end)
    if m is None or m.group(1).lower() in _STOP_WORDS:
        return frozenset()
    return unit_names(m.group(1))


def step_claims(step: str, carry: str | None = None) -> tuple[list[Claim], str | None]:
    """The claims of one step's text, and its last side for the next step.

    Args:
        step: the text of one step.
        carry: the previous step's last side (from this function), used as the left side
            when this step starts with a relation (``&= 104`` after ``x &= 90 + 14``).

    Returns:
        ``(claims, tail)``: claims in order (annotations first, then relations of the text,
        duplicates once); ``tail`` is the last side of the step's last relation run when the
        run ends the step, else None.
    """
    if step.rstrip().rstrip("$").rstrip().endswith("?") or _NEGATED.search(step):
        return [], None  # a question, or a claim the step itself calls false
    claims: list[Claim] = []
    for note in _ANNOTATION.finditer(step):
        claims.extend(_claims_in_run(note.group(1), [], frozenset())[0])
    text, table = plain(_ANNOTATION.sub(lambda m: " " * len(m.group(0)), step))
    if carry is not None:
        head = text.lstrip()
        if head[:1] in RELATIONS:
            text = f"{carry} {head}"
    masked = _mask_words(text)
    tail: str | None = None
    for run in _RUN.finditer(masked):
        body = run.group(0)
        if not _SPLIT.search(body):
            continue
        after = bool(_PREPOSITION_BEFORE.search(text, 0, run.start()))
        found, run_tail = _claims_in_run(body, table, _trailing_unit(text, run.end()), after)
        if found and _continues_from_left(text, masked, run.start()):
            found = found[1:]  # its left side is the tail of an expression cut by a word
        claims.extend(found)
        tail = run_tail if _END_OF_STEP.match(masked, run.end()) else None
    return list(dict.fromkeys(claims)), tail


def find_claims(step: str) -> list[Claim]:
    """Return the checkable claims of one step's text (rules in the module docstring).

    Args:
        step: the text of one step.

    Returns:
        :class:`Claim` tuples ``(lhs, rhs, rel)`` in order: annotations first, then the
        relations of the text.
    """
    return step_claims(step)[0]


_FUNCTION_CHARS = "".join(FUNCTIONS.values())
_NOT_ARITH = re.compile("[π" + _FUNCTION_CHARS + "]")
_MAX_ARGUMENT = 10**6  # a function argument beyond it (sin(10^9999)) is not computed


class _TooLargeForSympy(ValueError):
    """A side with ``π`` or a function holds a part too large to hand to sympy."""


def _innermost_call(text: str) -> tuple[int, int] | None:
    """``(start, end)`` of a function call ``F(...)`` whose argument holds no other call, or
    None when ``text`` has no call (an unclosed one counts as none: the parser refuses it)."""
    for start, char in enumerate(text):
        if char in _FUNCTION_CHARS and text.startswith("(", start + 1):
            depth = 0
            for i in range(start + 1, len(text)):
                if text[i] in _FUNCTION_CHARS:
                    break  # a call inside: look further on for the innermost
                depth += (text[i] == "(") - (text[i] == ")")
                if depth == 0:
                    return start, i + 1
    return None


_FUNCTION_NAMES = {char: name for name, char in FUNCTIONS.items()}
_FLOAT_FUNCTIONS: dict[str, Callable[..., float]] = {
    "sin": math.sin, "cos": math.cos, "tan": math.tan, "cot": lambda x: 1 / math.tan(x),
    "sec": lambda x: 1 / math.cos(x), "csc": lambda x: 1 / math.sin(x), "arcsin": math.asin,
    "arccos": math.acos, "arctan": math.atan, "sinh": math.sinh, "cosh": math.cosh,
    "tanh": math.tanh, "ln": math.log, "exp": math.exp, "lg": math.log10,
    "logbase": lambda x, b: math.log(x, b),
}  # fmt: skip


def _float_of(argument: str) -> float | None:
    """The float value of a call's argument (no call inside), or None when it has variables
    or cannot be read; raises :class:`_TooLargeForSympy` when it is too large."""
    try:
        exact = evaluate(argument).exact
        if abs(exact) > _MAX_ARGUMENT:
            raise _TooLargeForSympy(argument)
        value = float(exact)
    except _TooLargeForSympy:
        raise
    except TooLargeError as exc:
        raise _TooLargeForSympy(argument) from exc
    except NotExactError:  # irrational but not huge (the reader's own bound): sympy, 15 digits
        from grpo.verifiers.steps import symbolic

        try:
            value = float(symbolic.to_sympy(argument).evalf(15))
        except Exception:
            return None
    except (ValueError, OverflowError, ZeroDivisionError):
        return None
    if abs(value) > _MAX_ARGUMENT:
        raise _TooLargeForSympy(argument)
    return value


def _float_call(name: str, values: list[float | None]) -> str:
    """The call's float value as text for the size check (``1`` when unknown or undefined);
    raises :class:`_TooLargeForSympy` when it overflows a float."""
    if any(v is None for v in values):
        return "1"
    try:
        result = _FLOAT_FUNCTIONS[name](*values)
    except OverflowError as exc:
        raise _TooLargeForSympy(name) from exc
    except (ValueError, ZeroDivisionError, TypeError):
        return "1"
    if abs(result) > 1e300:
        raise _TooLargeForSympy(name)
    return f"{result:.6e}".replace("e+", "e")


def _size_check(side: str) -> None:
    """Refuse (raise :class:`_TooLargeForSympy`) a side whose function arguments exceed
    ``_MAX_ARGUMENT`` in size, whose calls overflow a float (``exp(exp(exp(100)))``), or whose
    value (each call replaced by its float value, ``π`` by 3.1416) is too large for the exact
    reader: sympy would build or reduce such a number for ever."""
    text = side.replace("π", "3.1416").replace("$", "")
    for _ in range(50):  # innermost calls first, each replaced by its float value
        call = _innermost_call(text)
        if call is None:
            break
        start, end = call
        name = _FUNCTION_NAMES[text[start]]
        values = [_float_of(a) for a in text[start + 2 : end - 1].split(ARGUMENT_SEPARATOR)]
        text = f"{text[:start]}({_float_call(name, values)}){text[end:]}"
    else:
        raise _TooLargeForSympy(side)  # 50 nested calls
    try:
        evaluate(text)
    except TooLargeError as exc:
        raise _TooLargeForSympy(side) from exc
    except ValueError:
        pass


def _exact(side: str) -> Fraction | Magnitude | None:
    """The side read by the shared number reader: its exact value, the bounds of its whole
    value when it is too large to compute (``arith.Magnitude``), or None (use sympy). A side
    with ``π`` or a function goes to sympy only when :func:`_size_check` passes."""
    if _NOT_ARITH.search(side):
        _size_check(side)
        return None
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


def _order_by_size(left: Fraction | Magnitude, right: Fraction | Magnitude) -> int | None:
    """-1, 0 or 1 as ``left`` is below, equal to or above ``right``, when exact values or the
    bounds and signs of too-large sides prove it; None otherwise."""
    if isinstance(left, Fraction) and isinstance(right, Fraction):
        return (left > right) - (left < right)
    ml = left if isinstance(left, Magnitude) else Magnitude.of(left)
    mr = right if isinstance(right, Magnitude) else Magnitude.of(right)
    sl = ml.sign if ml.nonzero else (0 if ml.hi == -math.inf else None)
    sr = mr.sign if mr.nonzero else (0 if mr.hi == -math.inf else None)
    if sl is None or sr is None or (sl == 0 and ml.nonzero) or (sr == 0 and mr.nonzero):
        return None
    if sl != sr:
        return 1 if sl > sr else -1
    if sl == 0:
        return 0
    if ml.lo > mr.hi + 1e-9:
        return sl
    if mr.lo > ml.hi + 1e-9:
        return -sl
    return None


def _rel_holds(order: int, rel: str) -> bool:
    return {
        "<": order < 0,
        ">": order > 0,
        "≤": order <= 0,
        "≥": order >= 0,
        "≠": order != 0,
        "=": order == 0,
    }[rel]


def _precision(text: str) -> tuple[Fraction, Fraction] | None:
    """(value, unit of the last place shown) of a plain number, or None when ``text`` is not
    one. ``2.24`` -> unit 1/100; ``300`` -> 100; ``28`` -> 1; ``33.3%`` -> 1/1000; a simple
    fraction ``22/7`` -> 1/7 (shown to the nearest seventh)."""
    fraction = _SIMPLE_FRACTION.match(text)
    if fraction is not None and int(fraction.group(3)):
        numerator, denominator = int(fraction.group(2)), int(fraction.group(3))
        negative = -1 if fraction.group(1) == "-" else 1
        return Fraction(negative * numerator, denominator), Fraction(1, denominator)
    m = _PLAIN_NUMBER.match(text)
    if m is None:
        return None
    sign, whole, decimals, percent = m.groups()
    value = Fraction(f"{whole}.{decimals}" if decimals else whole)
    if decimals:
        unit = Fraction(1, 10 ** len(decimals))
    else:
        zeros = len(whole) - len(whole.rstrip("0")) if whole.strip("0") else 0
        unit = Fraction(10**zeros)
    if percent:
        value, unit = value / 100, unit / 100
    return (-value if sign == "-" else value), unit


def _within(value: Fraction, shown: Fraction, unit: Fraction) -> bool:
    """``shown`` is ``value`` rounded or truncated at ``unit``."""
    gap = abs(value - shown)
    return gap <= unit / 2 or (gap < unit and abs(shown) <= abs(value) and value * shown >= 0)


def _approx(lhs: str, rhs: str) -> bool | None:
    for number, other in ((rhs, lhs), (lhs, rhs)):
        shown = _precision(number)
        if number is lhs and _SIMPLE_FRACTION.match(lhs):
            shown = None  # a fraction on the left is the value approximated, not a precision
        if shown is not None:
            value = _numeric(other)
            return None if value is None else _within(value, shown[0], shown[1])
    left, right = _numeric(lhs), _numeric(rhs)
    written = [Fraction(n) for n in _DECIMAL_NUMBER.findall(rhs)]
    if left is None or right is None or not any(written) or right == 0:
        return None
    # each decimal written on the right may be off by a unit of its last place (relative)
    tolerance = sum(
        Fraction(1, 10 ** len(n.split(".")[1])) / abs(Fraction(n))
        for n in _DECIMAL_NUMBER.findall(rhs)
        if Fraction(n)
    )
    return abs(left - right) <= abs(right) * tolerance


def _numeric(side: str) -> Fraction | None:
    """The side's value as a fraction (exact, or 40 significant digits from sympy for
    irrational sides); None for variables, sizes too large, or unparsable text."""
    exact = _exact(side)
    if isinstance(exact, Fraction):
        return exact
    if isinstance(exact, Magnitude):
        return None
    from grpo.verifiers.steps import symbolic

    return symbolic.numeric(side)


def _decide(lhs: str, rhs: str, rel: str) -> bool | None:
    if rel == "≈":
        return _approx(lhs, rhs)
    left, right = _exact(lhs), _exact(rhs)
    if rel == "=":
        if isinstance(left, Fraction) and isinstance(right, Fraction):
            return _holds_exact(left, right, rhs)
        if left is not None and right is not None:
            return holds_by_size(left, right, _half_unit(rhs))
        if isinstance(left, Magnitude) or isinstance(right, Magnitude):
            return None  # a side too large to compute against one with variables
        from grpo.verifiers.steps import symbolic  # sympy: imported on the first such claim

        return symbolic.holds(lhs, rhs, _half_unit(rhs))
    if left is not None and right is not None:
        order = _order_by_size(left, right)
        return None if order is None else _rel_holds(order, rel)
    if isinstance(left, Magnitude) or isinstance(right, Magnitude):
        return None
    from grpo.verifiers.steps import symbolic

    order = symbolic.order(lhs, rhs)
    return None if order is None else _rel_holds(order, rel)


def check_claim(lhs: str, rhs: str, rel: str = "=") -> bool | None:
    """Decide ``lhs rel rhs``: True (holds), False (refuted) or None (cannot be checked).

    Args:
        lhs: left side, plain arithmetic (as :func:`find_claims` gives it).
        rhs: right side.
        rel: one of :data:`RELATIONS`.

    Rules are in the module docstring. A right side ending in ``%`` while the left side has
    none (``18/450*100 = 4%``) may also be read as the bare number, and a trigonometric
    argument written as a bare number (``\\sin 30``, marked ``rewrite.ANGLE``) in degrees or
    in radians: refuted only when both readings are. Raises nothing for bad input: an
    unparsable side (or an unknown relation) gives None.
    """
    try:
        if ANGLE in lhs + rhs:  # \sin 30: true in degrees or in radians is true
            readings = [
                check_claim(lhs.replace(ANGLE, unit), rhs.replace(ANGLE, unit), rel)
                for unit in ("", "*π/180")
            ]
            return True if True in readings else (False if readings == [False, False] else None)
        verdict = _decide(lhs, rhs, rel)
        if verdict is not True and rhs.endswith("%") and "%" not in lhs:
            bare = _decide(lhs, rhs[:-1], rel)
            # refuted only when both readings are: an unverifiable one may be the true one
            verdict = (
                True if bare is True else (False if bare is False and verdict is False else None)
            )
    except Exception:
        return None
    return verdict
