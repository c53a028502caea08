"""The structured answer model: what an answer *is*, filled by extraction, read by comparison.

An answer (and a gold answer) is one of:

- :class:`Scalar` — one expression: ``12``, ``\\frac{7}{2}``, ``2\\sqrt{2}``, ``x^2+1``, ``50%``;
- :class:`Items` — several values: a comma/``and``/``or`` list ``-5, 3`` or ``4 and 6``,
  ``1 \\pm \\sqrt{2}`` (its two values), a set
  ``\\{1, 2\\}``, the empty set ``\\emptyset``, or several different ``\\boxed{}`` answers;
  compared as a multiset (order-free);
- :class:`Tuple` — an ordered tuple or point ``(1, 2)``; a two-item tuple in parentheses may also
  be an open interval;
- :class:`Interval` — ``[1, 2)``, ``(-\\infty, 3]``; also what an inequality in one variable
  means (``x > 3`` is ``(3, \\infty)``, ``2 \\le x < 5`` is ``[2, 5)``);
- :class:`Union` — intervals or sets joined by ``\\cup``; also a disjunction of conditions on
  one variable (``x < 1 \\text{ or } x > 2``, ``x \\ne 0``);
- :class:`Intersection` — a conjunction of conditions on one variable (``x > 1 \\text{ and }
  x < 3``);
- :class:`Difference` — ``A \\setminus B``, ``A \\backslash B``, ``A - \\{..\\}``
  (``\\mathbb{R} \\setminus \\{0\\}``); the real line ``\\mathbb{R}`` ("all real numbers")
  is the :class:`Interval` ``(-\\infty, \\infty)``;
- :class:`BaseNumber` — digits with a base subscript: ``1011_2``, ``4210_{5}``, ``A3F_{16}``;
- :class:`Ratio` — ``1:2``, ``3 : 4 : 5``;
- :class:`Matrix` — ``\\begin{pmatrix}..\\end{pmatrix}`` (also ``bmatrix``, ``matrix``...; not
  ``vmatrix``, a determinant), rows of entries;
- :class:`Equation` — ``lhs = rhs``; an *assignment* when ``lhs`` is a bare variable
  (``y = 5``, ``x_1 = 2``, ``\\theta = \\pi``), which then equals its right side;
- :class:`Text` — words (``Evelyn``, ``yes``), compared case-insensitively.

:func:`read_answer` builds the model from *normalized* text (``normalize``) by splitting at
the top level only (commas and brackets inside ``\\frac{}``, ``f(x, y)`` do not split). Pure
text code: no sympy here; leaves are compared by ``grpo.verifiers.math.compare``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "MAX_ANSWER_CHARS",
    "MAX_ITEMS",
    "Answer",
    "AnswerSyntaxError",
    "BaseNumber",
    "Difference",
    "Equation",
    "Intersection",
    "Interval",
    "Items",
    "Matrix",
    "Ratio",
    "Relations",
    "Scalar",
    "Text",
    "Time",
    "Tuple",
    "Union",
    "is_name",
    "is_set_phrase",
    "read_answer",
]

MAX_ANSWER_CHARS = 2_000
"""Longest normalized answer that is read; longer is a parse error (the response's fault)."""
MAX_ITEMS = 64
"""Most items of a list, set, tuple or matrix; more is a parse error."""
_MAX_DEPTH = 60


class AnswerSyntaxError(ValueError):
    """The text cannot be read as an answer (empty, unbalanced, too long, too many items)."""


@dataclass(frozen=True)
class Scalar:
    """One expression (normalized LaTeX text); ``percent``: it ended in ``%`` (not removed)."""

    text: str
    percent: bool = False


@dataclass(frozen=True)
class Text:
    """Words; ``words`` is lower-cased with single spaces."""

    words: str


@dataclass(frozen=True)
class Items:
    """Several values, compared order-free; ``braces``: written as a set ``\\{..\\}``."""

    items: tuple[Answer, ...]
    braces: bool = False


@dataclass(frozen=True)
class Tuple:
    """An ordered tuple ``(a, b, ..)``; ``brackets`` is its pair of delimiters, e.g. ``()``."""

    items: tuple[Answer, ...]
    brackets: str = "()"


@dataclass(frozen=True)
class Interval:
    """An interval of the real line; endpoints are Scalars (``\\infty`` allowed)."""

    lo: Scalar
    hi: Scalar
    lo_closed: bool
    hi_closed: bool


@dataclass(frozen=True)
class Union:
    """Parts (intervals, sets) joined by ``\\cup``, compared order-free."""

    parts: tuple[Answer, ...]


@dataclass(frozen=True)
class Matrix:
    """Rows of Scalar entries (all rows the same length)."""

    rows: tuple[tuple[Answer, ...], ...]


@dataclass(frozen=True)
class Equation:
    """``lhs = rhs``; ``variable`` is the bare variable on the left (or empty)."""

    lhs: str
    rhs: Answer
    variable: str = ""


@dataclass(frozen=True)
class Intersection:
    """Conditions on one variable joined by ``and``: the set where all hold."""

    parts: tuple[Answer, ...]


@dataclass(frozen=True)
class Difference:
    """``whole \\setminus removed`` (``\\mathbb{R} \\setminus \\{0\\}``)."""

    whole: Answer
    removed: Answer


@dataclass(frozen=True)
class BaseNumber:
    """Digits in a base other than ten's notation: ``1011_2`` is ``BaseNumber("1011", 2)``.

    ``digits`` are upper-cased without leading zeros; every digit is below ``base`` (2-36).
    """

    digits: str
    base: int


@dataclass(frozen=True)
class Ratio:
    """``a : b (: c ..)``, two or more terms (Scalars)."""

    terms: tuple[Scalar, ...]


@dataclass(frozen=True)
class Time:
    """A clock time ``h:mm`` (``4:00``, ``16:30``, ``4:00 pm``): not a ratio.

    ``minutes`` are the readings as minutes after midnight: one with ``am``/``pm`` or an hour
    over 12, else the two halves of the day (``4:00`` is 4:00 or 16:00). ``terms`` are the
    hour and minute as written, for a gold that is a ratio (``1:2`` vs ``5:10``).
    """

    minutes: frozenset[int]
    terms: tuple[Scalar, Scalar] = (Scalar("0"), Scalar("0"))


@dataclass(frozen=True)
class Relations:
    """A chain of relations that is not one interval of one variable: ``0 < a < b < 1``,
    ``2x + 1 > 5``; ``kinds`` are ``lt``, ``le``, ``gt``, ``ge``, ``ne`` between the terms."""

    terms: tuple[Scalar, ...]
    kinds: tuple[str, ...]


_REAL_LINE = Interval(Scalar(r"-\infty"), Scalar(r"\infty"), False, False)

Answer = (
    Scalar
    | Text
    | Items
    | Tuple
    | Interval
    | Union
    | Intersection
    | Difference
    | Matrix
    | Equation
    | BaseNumber
    | Ratio
    | Time
    | Relations
)
"""Any node of the answer model."""

_OPENERS = {"(": ")", "[": "]", "{": "}"}
_LIST_SEPS = (", and ", ", or ", ",", ";", " and ", " or ")  # "1, 2, and 3": one separator
_GREEK = r"\\(?:alpha|beta|gamma|delta|theta|phi|varphi|lambda|mu|omega|sigma|rho|tau|psi)"
_VARIABLE = re.compile(
    r"^(?:[A-Za-z]|\\(?:alpha|beta|gamma|delta|theta|phi|lambda|mu|omega|sigma|rho|tau|psi))"
    r"(?:_\{?[A-Za-z0-9]+\}?)?'?$"
)
# a named quantity on the left of an equation: its value is what the equation states
_NAME = re.compile(
    r"^(?:(?:m\s*)?\\angle\s*\{?[A-Za-z]+\}?|[A-Z]{2,4}|\\overline\{[A-Z]{2,3}\}"
    r"|[A-Za-z](?:'{1,3}|\^\{?-1\}?|_\{?[0-9A-Za-z]+\}?)?\([^()=<>]*\)"
    r"|\[[A-Z]{3,}\]|\\text\{[A-Za-z ]+\}|\\frac\{[A-Z]{2,}\}\{[A-Z]{2,}\}|\|[A-Z]{2}\|"
    r"|\((?:[A-Za-z](?:_\{?[0-9]+\}?)?\s*,\s*)+[A-Za-z](?:_\{?[0-9]+\}?)?\)"
    r"|\\(?:log|ln|lg|sin|cos|tan|sec|csc|cot)(?:_\{?[0-9a-z]+\}?)?\s*"
    r"(?:\{[-\d.]+\}|\([^()=<>]*\)|[\d.]+)(?:\^\s*\{?\\circ\}?)?"
    r"|\\(?:sin|cos|tan|sec|csc|cot)(?:\^\s*\{?2\}?)?\s*(?:\\angle\s*)?"
    rf"(?:{_GREEK}|[A-Za-z](?![A-Za-z])|\{{(?:{_GREEK}|[A-Za-z])\}})\s*)$"
)
_CLOCK = re.compile(r"^([01]?\d|2[0-3]):([0-5]\d)\s*(am|pm)?$", re.IGNORECASE)
_MATRIX = re.compile(
    r"^\\begin\{(pmatrix|bmatrix|Bmatrix|matrix|smallmatrix|array)\}(?:\{[lcr|]*\})?"
    r"(.*)\\end\{\1\}$",
    re.DOTALL,
)
_WORDS = re.compile(r"^[A-Za-z][A-Za-z'-]*(?:\s+[A-Za-z][A-Za-z'-]*)*$")
_LATEX_WORDS = {"pi", "infty", "sqrt", "frac", "emptyset", "cup", "cap", "in", "le", "ge"}
_REALS = r"\mathbb{R}"
# "all real numbers", "the set of all reals", "all real x", "every real number", "x is any real"
_REAL_PHRASE = (
    r"(?:the\s+)?(?:set\s+of\s+)?(?:(?:all|every|any)\s+real"
    r"(?:s|\s+numbers?|\s+values?)?(?:\s+(?:of\s+)?[a-z])?|reals|real\s+numbers)"
)
_REAL_WORDS = re.compile(rf"^{_REAL_PHRASE}$")
# "all positive real numbers", "the nonnegative reals": half-lines
_HALF_LINE = re.compile(
    r"^(?:the\s+)?(?:set\s+of\s+)?(?:all\s+)?(positive|negative|non-?negative|non-?positive)"
    r"\s+real(?:s|\s+numbers?)$"
)
# "all real numbers except 0", "all reals other than x = 1 and x = 2"
_REAL_EXCEPT = re.compile(
    rf"^{_REAL_PHRASE}\s*,?\s*(?:except(?:\s+for)?|other\s+than|but|excluding|without)\s+(.+)$"
)
_SET_BUILDER = (r"\mid", "|", ":")
_BASE_NUMBER = re.compile(
    r"^\(?([0-9A-Za-z]+)\)?_\s*(?:\{\s*\(?\s*([0-9]{1,2}|[a-z]+)\s*\)?\s*\}|([0-9]|[a-z]{3,}))$"
)
_BASE_WORDS = {"two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8}
_BASE_WORDS |= {"nine": 9, "ten": 10, "twelve": 12, "sixteen": 16}
_DIFFERENCE = (r"\setminus", r"\backslash")
_RELATIONS = (
    (r"\neq", "ne"),
    (r"\ne", "ne"),
    (r"\leq", "le"),
    (r"\geq", "ge"),
    (r"\le", "le"),
    (r"\ge", "ge"),
    (r"\lt", "lt"),
    (r"\gt", "gt"),
    ("<=", "le"),
    (">=", "ge"),
    ("<", "lt"),
    (">", "gt"),
)


def is_name(lhs: str) -> bool:
    """A variable (``y``, ``x_1``, ``\\theta``) or a named quantity (``\\angle C``,
    ``m\\angle ABC``, ``AB``, ``\\frac{AB}{CD}``, ``f(3)``, ``f'(x)``, ``f^{-1}(x)``,
    ``P(A)``, ``[ABC]``, ``\\sin\\theta``, ``\\cos A``,
    ``\\text{area}``, a tuple of variables ``(a, b, c)``): what an equation ``lhs = rhs``
    names, so that ``rhs`` is its value. An expression in an unknown (``2x``, ``x^2``,
    ``a + b``) is not a name."""
    lhs = lhs.strip()
    bare = "".join(lhs.split())  # f (-1), \angle C
    return bool(_VARIABLE.match(lhs) or _NAME.match(lhs) or _NAME.match(bare))


def is_set_phrase(text: str) -> bool:
    """Words that name a set of reals ("all real numbers", "all real numbers except 0 and 1",
    "the positive reals"): an answer in words that holds numbers."""
    words = " ".join(text.lower().split()).rstrip(".")
    return bool(_REAL_WORDS.match(words) or _HALF_LINE.match(words) or _REAL_EXCEPT.match(words))


def _time(text: str) -> Time | None:
    """``4:00``, ``16:30``, ``4:00 pm`` as a :class:`Time`; None when not a clock time."""
    m = _CLOCK.match(text)
    if m is None:
        return None
    hour, minute, half = int(m.group(1)), int(m.group(2)), (m.group(3) or "").lower()
    terms = (Scalar(m.group(1)), Scalar(m.group(2)))
    if half:
        if not 1 <= hour <= 12:
            return None
        minutes = (hour % 12 + (12 if half == "pm" else 0)) * 60 + minute
        return Time(frozenset({minutes}), terms)
    readings = {hour * 60 + minute}
    if 1 <= hour <= 12:
        readings |= {(hour % 12) * 60 + minute, (hour % 12 + 12) * 60 + minute}
    return Time(frozenset(readings), terms)


def _top_level(text: str) -> list[tuple[int, int]]:
    """``(index, depth)`` for every character position, tracking (), [], {}, \\{ \\}.

    Raises:
        AnswerSyntaxError: nesting deeper than the limit or a closing bracket too many.
    """
    depth = 0
    out = []
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "{}":
            out.append((i, depth))
            depth += 1 if text[i + 1] == "{" else -1
            out.append((i + 1, depth))
            i += 2
            if depth < 0:
                raise AnswerSyntaxError("a closing brace too many")
            continue
        if ch in "([{":
            depth += 1
            if depth > _MAX_DEPTH:
                raise AnswerSyntaxError("answer nested too deeply")
        elif ch in ")]}":
            depth -= 1
        out.append((i, depth if ch not in "([{" else depth - 1))
        i += 1
    return out


def _split(text: str, separators: tuple[str, ...]) -> list[str]:
    """Split ``text`` at top-level occurrences of any separator (longest first)."""
    if not any(sep in text for sep in separators):
        return [text.strip()]  # the common case, without the depth scan
    parts: list[str] = []
    depths = dict(_top_level(text))
    start = 0
    i = 0
    ordered = sorted(separators, key=len, reverse=True)
    while i < len(text):
        if depths.get(i, 1) == 0:
            for sep in ordered:
                if text.startswith(sep, i) and _separator_ok(text, i, sep):
                    parts.append(text[start:i])
                    i += len(sep)
                    start = i
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    parts.append(text[start:])
    return [p.strip() for p in parts]


def _separator_ok(text: str, i: int, sep: str) -> bool:
    if sep.startswith("\\") and sep[-1].isalpha():
        after = text[i + len(sep) : i + len(sep) + 1]
        return not after.isalpha()
    return not (sep in ("<", ">") and text[i + 1 : i + 2] == "=")


def _balanced_wrap(text: str, left: str, right: str) -> bool:
    """True when ``text`` is ``left ... right`` and the opening bracket closes at the end."""
    if not (text.startswith(left) and text.endswith(right)):
        return False
    depths = _top_level(text)
    inner_end = len(text) - len(right)
    return all(d > 0 for i, d in depths if len(left) <= i < inner_end)


def _interval_brackets(text: str) -> tuple[str, str] | None:
    if len(text) < 2 or text[0] not in "([" or text[-1] not in ")]":
        return None
    depths = _top_level(text)
    if all(d > 0 for i, d in depths if 1 <= i < len(text) - 1):
        return text[0], text[-1]
    return None


def read_answer(text: str) -> Answer:
    """Read normalized answer text into the answer model (rules in the module docstring).

    Args:
        text: normalized text (``normalize_answer``), e.g. ``"-5, 3"``, ``"(1,2]"``.

    Returns:
        The answer node.

    Raises:
        AnswerSyntaxError: empty text, over ``MAX_ANSWER_CHARS``, unbalanced brackets, nesting
            deeper than 60, more than ``MAX_ITEMS`` items.
    """
    text = text.strip()
    if not text:
        raise AnswerSyntaxError("empty answer")
    if len(text) > MAX_ANSWER_CHARS:
        raise AnswerSyntaxError(f"answer longer than {MAX_ANSWER_CHARS} characters")
    depths = _top_level(text)
    if depths and depths[-1][1] != 0:
        raise AnswerSyntaxError("unbalanced brackets")
    return _read(text, 0)


def _items(parts: list[str], level: int) -> tuple[Answer, ...]:
    if len(parts) > MAX_ITEMS:
        raise AnswerSyntaxError(f"more than {MAX_ITEMS} items")
    if any(not p for p in parts):
        raise AnswerSyntaxError("an empty item in a list")
    return tuple(_read(p, level + 1) for p in parts)


def _read(text: str, level: int) -> Answer:
    if level > 12:
        raise AnswerSyntaxError("answer nested too deeply")
    text = text.strip()
    if not text:
        raise AnswerSyntaxError("empty item")
    if text == r"\emptyset":
        return Items((), braces=True)
    if text == _REALS or _REAL_WORDS.match(text.lower()):
        return _REAL_LINE
    half = _HALF_LINE.match(text.lower())
    if half is not None:
        sign = half.group(1).replace("-", "")
        zero, closed = Scalar("0"), sign.startswith("non")
        if sign in ("positive", "nonnegative"):
            return Interval(zero, _REAL_LINE.hi, closed, False)
        return Interval(_REAL_LINE.lo, zero, False, closed)
    except_ = _REAL_EXCEPT.match(text.lower())
    if except_ is not None:
        removed = [re.sub(r"^[a-z]\s*=\s*", "", p) for p in _split(except_.group(1), _LIST_SEPS)]
        return Difference(_REAL_LINE, Items(_items(removed, level), braces=True))
    matrix = _MATRIX.match(text)
    if matrix is None and text[:1] in "[(" and text[-1:] in "])":
        matrix = _MATRIX.match(text[1:-1].strip())  # \left[\begin{array}..\end{array}\right]
    if matrix is not None:
        return _matrix(matrix.group(2), level)
    difference = _difference(text, level)
    if difference is not None:
        return difference
    union = _split(text, (r"\cup",))
    if len(union) > 1:
        return Union(_items(union, level))
    conditions = _conditions(text, level)
    if conditions is not None:
        return conditions
    parts = _split(text, _LIST_SEPS)
    if len(parts) > 1:
        return _list(_items(parts, level))
    equation = _split(text, ("=", r"\in"))
    if len(equation) > 1:
        lhs, rhs = equation[0], equation[-1]
        if not lhs or not rhs:
            raise AnswerSyntaxError("an equation with an empty side")
        variable = lhs if is_name(lhs) else ""
        return Equation(lhs, _read(rhs, level + 1), variable)
    plus_minus = _split(text, (r"\pm", r"\mp"))
    if len(plus_minus) == 2:
        a, b = plus_minus
        if not b:
            raise AnswerSyntaxError("nothing after \\pm")
        if not a:
            return Items((_read(b, level + 1), _read(f"-({b})", level + 1)))
        return Items((Scalar(f"{a}+({b})"), Scalar(f"{a}-({b})")))
    inner_pm = text.count(r"\pm") + text.count(r"\mp")
    if (
        inner_pm == 1
        and len(plus_minus) == 1
        and not re.search(r"\\[pm][mp][A-Za-z]|[,;]|\\\{", text)
    ):
        # \frac{-1 \pm \sqrt{5}}{2}: one \pm inside an expression is its two values
        sign = r"\pm" if r"\pm" in text else r"\mp"
        return Items(tuple(Scalar(text.replace(sign, op)) for op in ("+", "-")))
    clock = _time(text)
    if clock is not None:
        return clock
    ratio = _split(text, (":",))
    if len(ratio) > 1:
        if len(ratio) > MAX_ITEMS or any(not t for t in ratio):
            raise AnswerSyntaxError("a ratio with an empty or too many terms")
        return Ratio(tuple(Scalar(t) for t in ratio))
    try:
        inequality = _inequality(text, level)
    except _NotInterval as exc:
        return exc.relations
    if inequality is not None:
        return inequality[1]
    if _balanced_wrap(text, r"\{", r"\}"):
        built = _set_builder(text[2:-2], level)
        if built is not None:
            return built
        inner = text[2:-2].strip()
        if not inner:
            return Items((), braces=True)
        members: list[Answer] = []
        for item in _items(_split(inner, (",", ";")), level):
            # \{1 \pm \sqrt{5}, -2\}: the two values of a \pm item are members
            members += item.items if isinstance(item, Items) and not item.braces else [item]
        return Items(tuple(members), braces=True)
    brackets = _interval_brackets(text)
    if brackets is not None:
        entries = _split(text[1:-1], (",",))
        if len(entries) == 2 and brackets != ("(", ")"):
            lo, hi = _items(entries, level)
            if isinstance(lo, Scalar) and isinstance(hi, Scalar):
                return Interval(lo, hi, brackets[0] == "[", brackets[1] == "]")
        if len(entries) >= 2:
            return Tuple(_items(entries, level), brackets[0] + brackets[1])
        if brackets == ("(", ")"):
            return _read(text[1:-1], level + 1)
    based = _base_number(text)
    if based is not None:
        return based
    if _WORDS.match(text) and _is_words(text):
        return Text(" ".join(text.lower().split()))
    if text.endswith("%"):
        return Scalar(text[:-1].strip(), percent=True)
    return Scalar(text)


def _is_words(text: str) -> bool:
    """Words, not an expression: a word of 3+ letters or several words (not ``xy``)."""
    runs = re.findall(r"[A-Za-z]+", text)
    if any(w.lower() in _LATEX_WORDS for w in runs):
        return False
    several = len(text.split()) > 1 and all(len(w) >= 2 for w in runs)
    return several or any(len(w) >= 3 for w in runs)


def _list(items: tuple[Answer, ...]) -> Answer:
    """A list whose first item assigns a variable spreads it: ``n=2, 3`` is ``n=2, n=3``."""
    flat: list[Answer] = []
    for item in items:  # x = \pm 2, 3: the two values of the first item are items too
        if isinstance(item, Equation) and isinstance(item.rhs, Items) and not item.rhs.braces:
            flat += [Equation(item.lhs, v, item.variable) for v in item.rhs.items]
        elif isinstance(item, Items) and not item.braces:
            flat += item.items
        else:
            flat.append(item)
    items = tuple(flat)
    first = items[0]
    if isinstance(first, Equation) and first.variable:
        spread = [first]
        for item in items[1:]:
            if isinstance(item, Equation):
                spread.append(item)
            else:
                spread.append(Equation(first.variable, item, first.variable))
        items = tuple(spread)
    return Items(items)


def _matrix(body: str, level: int) -> Matrix:
    rows = [r for r in _split(body, ("\\\\",)) if r.strip()]
    if not rows:
        raise AnswerSyntaxError("an empty matrix")
    cells = [_split(r, ("&",)) for r in rows]
    width = len(cells[0])
    if any(len(r) != width for r in cells):
        raise AnswerSyntaxError("matrix rows of different lengths")
    if len(rows) * width > MAX_ITEMS:
        raise AnswerSyntaxError(f"more than {MAX_ITEMS} matrix entries")
    return Matrix(tuple(_items(r, level) for r in cells))


def _inequality(text: str, level: int) -> tuple[str, Interval | Union] | None:
    """``x > 3``, ``3 < x``, ``2 \\le x < 5`` as ``(variable, interval)``; ``x \\ne 3`` as
    ``(variable, (-\\infty, 3) \\cup (3, \\infty))``; None when not an inequality.

    Raises:
        AnswerSyntaxError: relations without a bare variable, or not one interval.
    """
    seps = tuple(s for s, _ in _RELATIONS)
    pieces = _split(text, seps)
    if len(pieces) < 2:
        return None
    kinds = []
    i = 0
    depths = dict(_top_level(text))
    while i < len(text):
        if depths.get(i, 1) == 0:
            for sep, kind in _RELATIONS:
                if text.startswith(sep, i) and _separator_ok(text, i, sep):
                    kinds.append(kind)
                    i += len(sep)
                    break
            else:
                i += 1
                continue
            continue
        i += 1
    inf = Scalar(r"\infty")
    minus_inf = Scalar(r"-\infty")
    if any(not p for p in pieces):
        raise AnswerSyntaxError("an inequality with an empty side")
    if len(pieces) == 2:
        left, right = pieces
        kind = kinds[0]
        absolute = _absolute_condition(left, right, kind) or _absolute_condition(
            right, left, {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(kind, kind)
        )
        if absolute is not None:
            return absolute
        if _VARIABLE.match(left):
            variable, bound = left, Scalar(right)
        elif _VARIABLE.match(right):
            variable, bound = right, Scalar(left)
            kind = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le"}.get(kind, kind)
        else:
            raise _NotInterval(pieces, kinds)
        if kind == "ne":
            return variable, Union(
                (Interval(minus_inf, bound, False, False), Interval(bound, inf, False, False))
            )
        if kind in ("lt", "le"):
            return variable, Interval(minus_inf, bound, False, kind == "le")
        return variable, Interval(bound, inf, kind == "ge", False)
    if (
        len(pieces) == 3
        and _VARIABLE.match(pieces[1])
        and kinds[0][0] == kinds[1][0]
        and "ne" not in kinds
    ):
        lo, hi = Scalar(pieces[0]), Scalar(pieces[2])
        if kinds[0][0] == "g":
            lo, hi = hi, lo
            return pieces[1], Interval(lo, hi, kinds[1] == "ge", kinds[0] == "ge")
        return pieces[1], Interval(lo, hi, kinds[0] == "le", kinds[1] == "le")
    raise _NotInterval(pieces, kinds)


_ABSOLUTE = re.compile(
    r"^\|\s*([A-Za-z])\s*(?:([+-])\s*(\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\}))?\s*\|$"
)
_CONSTANT = re.compile(r"^(?:\d+(?:\.\d+)?|\\frac\{\d+\}\{\d+\}|\\sqrt\{\d+\})$")


def _absolute_condition(side: str, bound: str, kind: str) -> tuple[str, Interval | Union] | None:
    """``|x| < 2`` is ``(-2, 2)``, ``|x - 3| \\le 1`` is ``[2, 4]``, ``|x| > 2`` is
    ``(-\\infty, -2) \\cup (2, \\infty)``: a bare variable, or it plus or minus a number,
    in bars against a non-negative number; None when not so."""
    m = _ABSOLUTE.match(side.strip())
    if m is None or kind == "ne" or not _CONSTANT.match(bound.strip()):
        return None
    variable, sign, shift = m.groups()
    center = "" if not shift else (shift if sign == "-" else f"-{shift}")
    b = bound.strip()
    lo, hi = Scalar(f"{center}-({b})"), Scalar(f"{center}+({b})" if center else f"({b})")
    closed = kind in ("le", "ge")
    if kind in ("lt", "le"):
        return variable, Interval(lo, hi, closed, closed)
    inf = Scalar(r"\infty")
    return variable, Union(
        (Interval(Scalar(r"-\infty"), lo, False, closed), Interval(hi, inf, closed, False))
    )


class _NotInterval(AnswerSyntaxError):
    """Relations that are not one interval of one variable (:class:`Relations`)."""

    def __init__(self, pieces: list[str], kinds: list[str]) -> None:
        super().__init__("relations that are not one interval of one variable")
        self.relations = Relations(tuple(Scalar(p) for p in pieces), tuple(kinds))


def _conditions(text: str, level: int, variable: str = "") -> Union | Intersection | None:
    """``x < 1 or x > 2`` (a :class:`Union`), ``x > 1 and x < 3`` (an :class:`Intersection`).

    Every part must be an inequality or ``x = c`` on the same bare variable, at least one an
    inequality, all joined by the same connector (``or``/``\\lor``, or ``and``/``\\land``);
    a comma is not a connector here (``x < 1, x > 2`` stays a list). ``variable``, when
    given, must be that variable. None when not so.
    """
    for connector, node in ((" or ", Union), (" and ", Intersection)):
        parts = _split(text, (connector,))
        if len(parts) < 2 or any(len(_split(p, _LIST_SEPS)) > 1 for p in parts):
            continue
        if len(parts) > MAX_ITEMS:
            raise AnswerSyntaxError(f"more than {MAX_ITEMS} conditions")
        variables: set[str] = set()
        sets: list[Answer] = []
        inequalities = 0
        for part in parts:
            try:
                found = _inequality(part, level + 1)
            except AnswerSyntaxError:
                return None
            if found is not None:
                inequalities += 1
                variables.add(found[0])
                sets.append(found[1])
                continue
            sides = _split(part, ("=",))
            if len(sides) != 2 or not _VARIABLE.match(sides[0]) or not sides[1]:
                return None
            variables.add(sides[0])
            sets.append(Items((Scalar(sides[1]),), braces=True))
        if len(variables) != 1 or not inequalities or variable not in ("", *variables):
            return None
        return node(tuple(sets))
    return None


def _difference(text: str, level: int) -> Difference | None:
    """``A \\setminus B``, or ``A - \\{..\\}`` with a set on the right; None when not so."""
    parts = _split(text, _DIFFERENCE)
    if len(parts) == 2:
        if not parts[0] or not parts[1]:
            raise AnswerSyntaxError("a set difference with an empty side")
        return Difference(_read(parts[0], level + 1), _read(parts[1], level + 1))
    if len(parts) > 2:
        raise AnswerSyntaxError("more than one set difference")
    if not text.endswith(r"\}"):
        return None
    minus = _split(text, ("-",))
    if len(minus) == 2 and minus[0] and _balanced_wrap(minus[1], r"\{", r"\}"):
        whole = _read(minus[0], level + 1)
        if isinstance(whole, Interval | Union | Tuple):
            return Difference(whole, _read(minus[1], level + 1))
    return None


def _set_builder(inner: str, level: int) -> Answer | None:
    """``\\{x \\mid x \\ne 0\\}``, ``\\{x : x > 1 \\text{ and } x < 3\\}``,
    ``\\{x \\in \\mathbb{R} \\mid x \\ge 0\\}``: the set the condition on ``x`` describes
    (intersected with the set after ``\\in``); None when ``inner`` is not of that form.

    Raises:
        AnswerSyntaxError: the head names a variable the condition does not constrain.
    """
    for sep in _SET_BUILDER:
        parts = _split(inner, (sep,))
        if len(parts) != 2:
            continue
        head, condition = parts
        variable, _, within = head.partition(r"\in")
        variable = variable.strip()
        if not _VARIABLE.match(variable) or not condition:
            return None
        found: Answer | None = _conditions(condition, level + 1, variable)
        if found is None:
            found = _values_of(condition, variable)
        if found is None:
            try:
                single = _inequality(condition, level + 1)
            except AnswerSyntaxError:
                return None
            if single is None or single[0] != variable:
                return None
            found = single[1]
        if within.strip():
            return Intersection((_read(within.strip(), level + 1), found))
        return found
    return None


def _values_of(condition: str, variable: str) -> Items | None:
    """``x = 3 or x = 4`` (a set-builder's condition naming values only): the set ``\\{3,
    4\\}``; None when not every part is ``variable = value``."""
    parts = _split(condition, (" or ",))
    values: list[Answer] = []
    for part in parts:
        sides = _split(part, ("=",))
        if len(sides) != 2 or sides[0] != variable or not sides[1]:
            return None
        values.append(Scalar(sides[1]))
    return Items(tuple(values), braces=True)


def _base_number(text: str) -> BaseNumber | None:
    """``1011_2``, ``4210_{5}``, ``(777)_8``, ``A3F_{16}``, ``101_{two}``; None when not so.

    Letters are digits only in upper case, or beside a decimal digit (``3af_{16}``), so
    ``a_{12}`` and ``x_2`` stay variables; every digit must be below the base (2-36).
    """
    m = _BASE_NUMBER.match(text)
    if m is None:
        return None
    digits, written = m.group(1), m.group(2) or m.group(3)
    base = _BASE_WORDS.get(written) if written.isalpha() else int(written)
    if base is None or not 2 <= base <= 36:
        return None
    if not any(ch.isdigit() for ch in digits) and not (digits.isupper() and len(digits) > 1):
        return None
    try:
        int(digits, base)
    except ValueError:
        return None
    return BaseNumber(digits.upper().lstrip("0") or "0", base)
