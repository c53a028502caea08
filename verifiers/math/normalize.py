"""Text normalization of an extracted answer (and of the gold) before it is read into the
answer model (``grpo.verifiers.math.answer``).

Applied in order by :func:`normalize_answer` (each with an example):

- Unicode: zero-width characters (U+200B-U+200D, U+2060, U+FEFF) and soft hyphens removed;
  math symbols mapped to LaTeX: ``√8`` -> ``\\sqrt{8}``, ``30°`` -> ``30^\\circ``, ``∞``,
  ``π``, ``−3`` -> ``-3``, ``×``/``·``/``÷``, ``≤``/``≥``/``≠``, ``∪``/``∩``, ``∅``;
  vulgar fractions ``½`` -> ``\\frac{1}{2}``; full-width digits ``１２`` -> ``12`` (NFKC on
  digits only).
- Markdown and delimiters: ``**17**`` and `` `17` `` -> ``17``; surrounding ``$``,
  ``\\(..\\)`` and ``\\[..\\]`` dropped; a nested ``\\boxed{5}`` -> ``5``;
  ``\\displaystyle`` dropped.
- LaTeX: ``\\dfrac``/``\\tfrac`` -> ``\\frac``; ``\\left``/``\\right`` dropped;
  ``\\sqrt(3)`` -> ``\\sqrt{3}``; braceless arguments ``\\frac 59`` -> ``\\frac{5}{9}``,
  ``\\frac{270}7`` -> ``\\frac{270}{7}``, ``11\\sqrt2`` -> ``11\\sqrt{2}``;
  ``\\text{and}``/``\\text{or}`` -> `` and ``/`` or ``;
  ``\\text{..}``, ``\\textbf{..}``, ``\\mathrm{..}``, ``\\mbox{..}`` unwrapped after units are
  removed (so ``\\text{13}`` is 13); ``\\!``, ``\\,``, ``\\;``, ``~`` spacing dropped; empty
  sets ``\\varnothing``, ``\\{\\}`` -> ``\\emptyset``.
- Numbers: ``1{,}234``, ``1,\\!234`` and ``1\\,234`` -> ``1,234``, then a thousands-separated
  integer (``1,000``, ``115,000``; groups of exactly three digits after a leading group not starting
  with 0) loses its commas — ``0,1`` stays a list; SI-style ``1 000 000`` loses its spaces
  (three-digit groups only: ``12 345/678`` is not one number); a leading ``\\approx``, ``≈``,
  ``about``, ``approximately`` before a number is dropped; ``\\$2,450`` -> ``2450`` (a dollar sign
  before a number is dropped); scale words ``3 \\text{ thousand}`` -> ``3\\times10^{3}``
  (hundred, thousand, million, billion, trillion); a trailing period is dropped.
- Sets and relations: ``ℝ``, ``\\R``, ``\\mathbf{R}``, ``\\Bbb R`` -> ``\\mathbb{R}`` (also Z, N,
  Q, C); ``<=``/``>=``/``!=`` -> ``\\le``/``\\ge``/``\\ne`` (``5!=120`` stays a factorial);
  ``\\lor``/``\\vee``/``∨`` -> `` or ``, ``\\land``/``\\wedge``/``∧`` -> `` and ``;
  ``\\colon`` -> ``:``; a ``$`` left inside the text (joined ``$4$ and $6$`` segments) is a
  space.
- Number words: a whole answer ``six`` -> ``6`` (zero to twenty, and the tens to eighty).
- Units: words after a number are a unit and are dropped: ``12 \\text{ cm}`` -> ``12``,
  ``5\\text{ cm}^2`` -> ``5``, ``12 apples`` -> ``12``, ``30^\\circ`` -> ``30``,
  ``72^\\circ F`` / ``72 °F`` / ``72^o F`` -> ``72``; a known unit is noted
  (:func:`normalize_with_units`, ``grpo.verifiers.math.units``) so that two answers with
  different units differ; ``\\%`` -> ``%`` (kept: the answer model reads a percent).

The output is also what ``Score.extracted_answer`` reports. Pure text functions, no sympy.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Callable
from fractions import Fraction

from grpo.verifiers.math.units import canonical_unit

__all__ = ["normalize_answer", "normalize_with_units", "number_from_words", "writes_trig_degrees"]

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_SYMBOLS = {
    "∞": r"\infty ",
    "π": r"\pi ",
    "−": "-",
    "–": "-",
    "×": r"\times ",
    "·": r"\cdot ",
    "⋅": r"\cdot ",
    "÷": r"\div ",
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "°": r"^\circ ",
    "∪": r"\cup ",
    "∩": r"\cap ",
    "∅": r"\emptyset ",
    "θ": r"\theta ",
    "α": r"\alpha ",
    "β": r"\beta ",
    "ℝ": r"\mathbb{R}",
    "ℤ": r"\mathbb{Z}",
    "ℕ": r"\mathbb{N}",
    "ℚ": r"\mathbb{Q}",
    "ℂ": r"\mathbb{C}",
    "∖": r"\setminus ",
    "∨": " or ",
    "∧": " and ",
}
_SQRT_PAREN = re.compile(r"√\s*\(([^()]*)\)")
_SQRT_TOKEN = re.compile(r"√\s*([0-9A-Za-z.]+|\\[A-Za-z]+)")
_LATEX_SQRT_PAREN = re.compile(r"\\sqrt\s*\(([^()]*)\)")
_BARE_ARG = r"(\d|[A-Za-z](?![A-Za-z])|\{[^{}]*\})"  # one digit, one letter or a braced group
_FRAC_BARE = re.compile(rf"\\frac\s*{_BARE_ARG}\s*{_BARE_ARG}")
_SQRT_BARE = re.compile(r"\\sqrt\s*(\d|[A-Za-z](?![A-Za-z]))")
_SCALE = {"hundred": 2, "thousand": 3, "million": 6, "billion": 9, "trillion": 12}
_CONNECTORS = {"and", "or"}
_TEXT_CMD = (
    r"\\(?:text|textbf|textrm|textit|textnormal|textsf|texttt|mathrm|mathbf|mathit|mathsf|mbox"
    r"|operatorname)\s*"
)
_TEXT_WORDS = re.compile(
    r"(?:(?<=[\d})])|(?<=\\pi))(?<!\\text\{[A-Za-z]\})\s*"
    + _TEXT_CMD
    + r"\{\s*([A-Za-z][A-Za-z .'/-]*?(?:\^\{?[23]\}?)?)\s*\}(?:\^\{?[23]\}?)?"
)
_ONES_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen"
)
_ONES = {w: i for i, w in enumerate(_ONES_WORDS.split())}
_TENS_WORDS = "twenty thirty forty fifty sixty seventy eighty ninety"
_TENS = {w: 10 * i for i, w in enumerate(_TENS_WORDS.split(), 2)}
_WORD_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DENOMINATORS = {
    "half": 2, "halves": 2, "third": 3, "quarter": 4, "fourth": 4, "fifth": 5, "sixth": 6,
    "seventh": 7, "eighth": 8, "ninth": 9, "tenth": 10, "twelfth": 12, "hundredth": 100,
}  # fmt: skip
# words that make a phrase after a number an expression, not a unit: "two more than x"
_NOT_A_UNIT_WORDS = (
    "of more less than times plus minus over and or to from by divided multiplied added"
    " subtracted squared cubed half halves percent per"
)
_NOT_A_UNIT = frozenset(_NOT_A_UNIT_WORDS.split())
_WORD_SPLIT = re.compile(r"[\s-]+")
# a rate written as a fraction of units after a number: 60 \frac{\text{km}}{\text{h}}
_FRACTION_UNIT = re.compile(
    r"(?<=[\d}])\s*\\frac\s*\{\s*"
    + _TEXT_CMD
    + r"\{\s*([A-Za-z ]+?)\s*\}\s*\}\s*\{\s*"
    + _TEXT_CMD
    + r"\{\s*([A-Za-z ]+?)\s*\}\s*\}"
)
_WRAPPERS = re.compile(_TEXT_CMD + r"\{([^{}]*)\}")
_SPACING = re.compile(r"\\\\|\\[!,;: ]|~|\\quad|\\qquad")  # "\\\\" (a row break) is kept
# explicit thousands marks, wherever they stand: 1{,}234, 1,\!234, 7,\! 020 (MATH-500), 1\,234
_EXPLICIT_THOUSANDS = re.compile(
    r"(?<=\d)(?:\{,\}|,\\!\s*|\\,|\\!)(?=\d{3}(?!\d))|(?<=\d,)\\!\s*(?=\d{3}(?!\d))"
)
_THIN_THOUSANDS = re.compile(r"(?<=,)\\!")
_BRACED_COMMA = re.compile(r"\{,\}")
_THOUSANDS = re.compile(r"(?<![\d.,])(-?[1-9]\d{0,2}(?:,\d{3})+)(?![\d,])(?!\.\d*,)")
# SI-style groups ("1 000 000"): only three-digit groups, and not a mixed number ("12 345/678")
_SPACE_THOUSANDS = re.compile(r"(?<![\d.,/ ])(-?[1-9]\d{0,2}(?: \d{3})+)(?![\d/.,]| \d)")
_APPROX = re.compile(r"^\s*(?:\\approx|\\sim|≈|~|about|approximately|roughly)\s*(?=-?\.?\d)")
_DOLLAR_NUMBER = re.compile(r"\\?\$\s*(?=-?\.?\d)")
# a degree sign, with the temperature scale after it: 72^\circ F, 72^{\circ}\text{C}, 72 °F
_STRAY_DOLLAR = re.compile(r"(?<!\\)\$")  # math delimiters inside joined segments: "4$ and $6"
_DEGREE = re.compile(
    r"(?:\^\s*(?:\{\s*\\circ\s*\}|\\circ)|\\circ|\\degree|(?<=[\d}])\^\s*\{?o\}?(?![A-Za-z]))"
    r"(?:\s*(?:\\(?:text|mathrm|textrm)\s*\{\s*([FCK])\s*\}|\{\s*([FCK])\s*\}|([FCK])(?![A-Za-z])))?"
)
# a trigonometric function of an angle in degrees: \sin 60^\circ, \cos(30^{\circ})
_ANGLE = r"(-?\d+(?:\.\d+)?)\s*\^\s*(?:\{\s*\\circ\s*\}|\\circ)"
_TRIG_DEGREES = re.compile(
    r"(\\(?:sin|cos|tan|sec|csc|cot)(?:\^\s*\{?\d\}?)?)\s*"
    rf"(?:\(\s*{_ANGLE}\s*\)|\{{\s*{_ANGLE}\s*\}}|{_ANGLE})"
)
# a vector in angle brackets: \langle 2, -3 \rangle is (2, -3)
_ANGLE_BRACKETS = re.compile(r"\\langle(?![A-Za-z])\s*|\s*\\rangle(?![A-Za-z])")
# an interval in the reversed-bracket notation: ]-\infty, 0[, [3, \infty[, ]1, 2]
_REVERSED_INTERVAL = re.compile(r"^\s*([\[\]])([^\[\](),]+),([^\[\](),]+)([\[\]])\s*$")
# a trigonometric function of a bare number: \csc 10, \tan(15); not \sin 2x, \sin 3^\circ
_NUMBER_ARG = r"(-?\d+(?:\.\d+)?)(?![\d.]|\s*[\^A-Za-z\\(])"
_TRIG_BARE = re.compile(
    r"(\\(?:sin|cos|tan|sec|csc|cot)(?:\^\s*\{?\d\}?)?)\s*"
    r"(?:\(\s*(-?\d+(?:\.\d+)?)\s*\)|\{\s*(-?\d+(?:\.\d+)?)\s*\}|" + _NUMBER_ARG + ")"
)
_TRIG_DEGREES_RAW = re.compile(
    r"\\(?:sin|cos|tan|sec|csc|cot)(?:\^\s*\{?\d\}?)?\s*[({]?\s*-?\d+(?:\.\d+)?\s*"
    r"(?:\^\s*\{?\s*\\circ|°)"
)
# spellings of the real line and the other number sets: \R, \mathbf{R}, \Bbb R -> \mathbb{R}
_NUMBER_SETS = re.compile(
    r"\\(?:mathbb|mathbf|Bbb|mathbbm)\s*\{\s*([RZNQC])\s*\}|\\(?:mathbb|Bbb)\s+([RZNQC])(?![A-Za-z])"
    r"|\\([RZNQC])(?![A-Za-z])"
)
_LOGIC = (
    (re.compile(r"\s*\\(?:lor|vee)(?![A-Za-z])\s*"), " or "),
    (re.compile(r"\s*\\(?:land|wedge)(?![A-Za-z])\s*"), " and "),
    (re.compile(r"\s*(?:<=|\\leqslant(?![A-Za-z]))\s*"), r" \\le "),
    (re.compile(r"\s*(?:>=|\\geqslant(?![A-Za-z]))\s*"), r" \\ge "),
    (re.compile(r"\s*\\colon(?![A-Za-z])\s*"), ":"),
    (re.compile(r"\s*(?:(?<![\d)}!])!=|\\not\s*=)\s*"), r" \\ne "),  # not 5!=120
)
_BOX = re.compile(r"\\(?:boxed|fbox)\s*\{")
_COLOR = re.compile(r"\\color\s*\{[A-Za-z]*\}|\\textcolor\s*\{[A-Za-z]*\}")  # \color{blue}{306}
_EMPTY_SET = re.compile(r"\\varnothing|\\emptyset|\\\{\s*\\\}|\\O(?![A-Za-z])")
_NUMBER_END = r"(?:\d|\}|\))"
# words after a number: a unit (dropped), a scale word (kept as a power of ten), a connector
_WORDS_AFTER = re.compile(
    rf"(?<={_NUMBER_END})(\s*)([A-Za-z][A-Za-z.'/-]*(?:\s+[A-Za-z][A-Za-z.'/-]*)*)(\^\{{?[23]\}}?)?"
    r"(?=\s*(?:$|[,;)\]]|\\\}|\\cup))"
)


_SUPER = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ", "0123456789+-=()ni")
_SUB = str.maketrans("₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎", "0123456789+-=()")
# a run of superscript (subscript) characters is one exponent (index): 2³ is 2^{3}, 10²
# is 10^{2}, never the digits 23 or 102; x₁ is x_{1}
_SUPERSCRIPTS = re.compile("[⁰¹²³⁴⁵⁶⁷⁸⁹⁺⁻⁼⁽⁾ⁿⁱ]+")
_SUBSCRIPTS = re.compile("[₀₁₂₃₄₅₆₇₈₉₊₋₌₍₎]+")
_EMOJI_MARKS = frozenset("\ufe0f\ufe0e\u20e3")  # variation selectors, keycap


def _emoji(ch: str) -> bool:
    """An emoji, dingbat or pictograph (``🙂``, ``✅``, ``★``), never a math sign (``△``)."""
    code = ord(ch)
    if ch in _EMOJI_MARKS or code >= 0x1F000:
        return unicodedata.category(ch) in ("So", "Sk", "Mn", "Cf") or ch in _EMOJI_MARKS
    return 0x2600 <= code <= 0x27BF or 0x2B00 <= code <= 0x2BFF


def _fraction_char(ch: str) -> str | None:
    """LaTeX for a vulgar-fraction character (``½`` -> ``\\frac{1}{2}``), else None."""
    if unicodedata.category(ch) != "No":
        return None
    value = unicodedata.numeric(ch, None)
    if value is None or float(value).is_integer():
        return None
    frac = Fraction(value).limit_denominator(16)
    return rf"\frac{{{frac.numerator}}}{{{frac.denominator}}}"


def number_from_words(text: str) -> int | None:
    """The integer an English number phrase writes, or None when the text is not one.

    ``twelve`` 12, ``twenty-five`` and ``twenty five`` 25, ``one hundred and twenty`` 120,
    ``two thousand three hundred`` 2300, ``negative four`` -4. The phrase must be well
    formed: ``five six``, ``twenty twenty``, ``hundred`` alone or ``thousand million`` are
    not numbers.
    """
    tokens = [t for t in _WORD_SPLIT.split(text.lower().strip()) if t]
    sign = 1
    if tokens and tokens[0] in ("negative", "minus"):
        sign, tokens = -1, tokens[1:]
    if not tokens or len(tokens) > 16 or ("zero" in tokens and len(tokens) > 1):
        return None
    total, group, last, scale = 0, 0, "", 10**15
    for token in tokens:
        if token == "and":
            if last != "hundred":
                return None
        elif token in _ONES:
            if last == "ones" or (last == "tens" and _ONES[token] >= 10):
                return None
            group += _ONES[token]
        elif token in _TENS:
            if last in ("ones", "tens") or group % 100:
                return None
            group += _TENS[token]
        elif token == "hundred":
            if last != "ones" or not 1 <= group <= 9:
                return None
            group *= 100
        elif token in _WORD_SCALES:
            if not group or _WORD_SCALES[token] >= scale:
                return None
            scale = _WORD_SCALES[token]
            total, group = total + group * scale, 0
        else:
            return None
        last = (
            token
            if token in ("and", "hundred")
            else "ones"
            if token in _ONES
            else "tens"
            if token in _TENS
            else "scale"
        )
    if last == "and":
        return None
    return sign * (total + group)


def _fraction_from_words(text: str) -> str | None:
    """``one half``, ``a third``, ``two-thirds``, ``three quarters`` as ``\\frac{n}{d}``."""
    tokens = [t for t in _WORD_SPLIT.split(text.lower().strip()) if t]
    if tokens == ["half"]:
        return r"\frac{1}{2}"
    if len(tokens) < 2:
        return None
    last = tokens[-1]
    den = _DENOMINATORS.get(last) or _DENOMINATORS.get(last[:-1] if last.endswith("s") else "")
    if den is None:
        return None
    num = 1 if tokens[:-1] == ["a"] else number_from_words(" ".join(tokens[:-1]))
    if num is None or num < 0:
        return None
    return rf"\frac{{{num}}}{{{den}}}"


def _from_words(text: str, units: list[str]) -> str:
    """A whole answer in number words (``twenty-five`` 25, ``two thirds`` 2/3), or number
    words before a unit or a noun (``eleven apples`` 11, ``fifty percent`` 50%); else the
    text unchanged."""
    value = number_from_words(text)
    if value is not None:
        return str(value)
    fraction = _fraction_from_words(text)
    if fraction is not None:
        return fraction
    words = text.split()
    for cut in range(min(len(words) - 1, 8), 0, -1):
        head, rest = " ".join(words[:cut]), words[cut:]
        percent = [w.lower() for w in rest] == ["percent"]
        if not percent and (not all(w.isalpha() for w in rest) or rest[0].lower() in _NOT_A_UNIT):
            continue
        number = number_from_words(head)
        if number is None:
            continue
        if percent:
            return f"{number}%"
        if any(
            (w.lower() in _NOT_A_UNIT and (i == 0 or w.lower() not in ("squared", "cubed")))
            or number_from_words(w) is not None
            for i, w in enumerate(rest)
        ):
            return text
        _note_unit(units, " ".join(rest))
        return str(number)
    return text


def _unicode_to_latex(text: str) -> str:
    text = text.translate(_ZERO_WIDTH)
    text = _SQRT_PAREN.sub(r"\\sqrt{\1}", text)
    text = _SQRT_TOKEN.sub(r"\\sqrt{\1}", text)
    text = _SUPERSCRIPTS.sub(lambda m: "^{" + m.group(0).translate(_SUPER) + "}", text)
    text = _SUBSCRIPTS.sub(lambda m: "_{" + m.group(0).translate(_SUB) + "}", text)
    out = []
    for ch in text:
        if ch in _SYMBOLS:
            out.append(_SYMBOLS[ch])
        elif _emoji(ch):
            continue  # an emoji or pictograph after the answer (5 🙂): no value
        elif ord(ch) > 127 and ch.isdigit() and unicodedata.digit(ch, None) is not None:
            out.append(str(unicodedata.digit(ch)))
        elif ord(ch) > 127 and (frac := _fraction_char(ch)) is not None:
            out.append(frac)
        else:
            out.append(ch)
    return "".join(out)


def _unbrace(arg: str) -> str:
    return arg[1:-1] if arg.startswith("{") else arg


def _braced_frac(m: re.Match[str]) -> str:
    return rf"\frac{{{_unbrace(m.group(1))}}}{{{_unbrace(m.group(2))}}}"


def _unbox(text: str) -> str:
    """``\\boxed{5}`` -> ``5`` (nested boxes inside an answer)."""
    while (m := _BOX.search(text)) is not None:
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth:
            return text
        text = text[: m.start()] + text[m.end() : i - 1] + text[i:]
    return text


def _strip_delimiters(text: str) -> str:
    for _ in range(3):
        text = text.strip()
        stripped = text.strip("*`").strip()
        if len(stripped) >= 2 and stripped[0] == "$" and stripped[-1] == "$":
            stripped = stripped.strip("$").strip()
        for left, right in ((r"\(", r"\)"), (r"\[", r"\]")):
            if stripped.startswith(left) and stripped.endswith(right):
                stripped = stripped[2:-2].strip()
        if stripped == text:
            break
        text = stripped
    return text


def _power(text: str | None) -> str:
    return "".join(ch for ch in text or "" if ch.isdigit())


def _text_words(units: list[str], m: re.Match[str]) -> str:
    """``\\text{ cm}`` after a number: a unit (dropped, noted); ``\\text{and}``: a connector."""
    if m.group(1).strip() in ("i", "e") or (
        len(m.group(1).strip()) == 1 and re.match(r"\\(?:mathbf|boldsymbol)", m.group(0).strip())
    ):
        return m.group(1).strip()  # 6-5\\mathrm{i}, 3\\mathbf{j}: a symbol, not a unit
    words = m.group(1).strip().lower()
    if words.replace(".", "") in ("am", "pm"):
        return f" {words.replace('.', '')}"
    if words in _CONNECTORS:
        return f" {words} "
    if words in _SCALE:
        return f" {words}"
    _note_unit(units, words, _power(m.group(0).partition("}")[2]))
    return ""


def _words_after(units: list[str], m: re.Match[str]) -> str:
    words = m.group(2).split()
    first = words[0].lower()
    if first.replace(".", "") in ("am", "pm") and len(words) == 1:
        return f" {first.replace('.', '')}"  # 4:00 PM: a clock time keeps its half of the day
    if len(words) == 1 and first in _SCALE:
        return rf"\times10^{{{_SCALE[first]}}}"
    if any(w.lower() in _CONNECTORS for w in words):
        return m.group(0)
    if len(first) == 1 and len(words) == 1:
        return m.group(0)  # "2 x": a variable, not a unit
    if not m.group(1) and len(words) == 1 and re.fullmatch(r"[A-F]+", words[0]):
        return m.group(0)  # "27DA": hexadecimal digits, not a unit
    _note_unit(units, m.group(2), _power(m.group(3)))
    return ""


def _reversed_interval(m: re.Match[str]) -> str:
    """``]a, b[`` -> ``(a, b)``; ``[a, b]`` is left as it is (a bracket facing out is open)."""
    left, right = m.group(1), m.group(4)
    if left == "[" and right == "]":
        return m.group(0)
    return f"{'(' if left == ']' else '['}{m.group(2)},{m.group(3)}{')' if right == '[' else ']'}"


def writes_trig_degrees(text: str) -> bool:
    """The text writes a trigonometric function of an angle in degrees (``\\tan 15^\\circ``,
    ``\\sin 30°``). A scan of the raw text, linear in its length."""
    if "circ" not in text and "°" not in text:
        return False
    return _TRIG_DEGREES_RAW.search(text) is not None


def _trig_degrees(m: re.Match[str]) -> str:
    """``\\sin 60^\\circ`` -> ``\\sin(\\frac{60\\pi}{180})``: an angle in degrees inside a
    trigonometric function is its value in radians (a degree sign elsewhere is a unit)."""
    angle = m.group(2) or m.group(3) or m.group(4)
    return rf"{m.group(1)}(\frac{{{angle}\pi}}{{180}})"


def _fraction_unit(units: list[str], m: re.Match[str]) -> str:
    """``\\frac{\\text{km}}{\\text{h}}`` after a number: a known rate (dropped, noted)."""
    unit = canonical_unit(f"{m.group(1)}/{m.group(2)}")
    if unit is None:
        return m.group(0)
    units.append(unit)
    return ""


def _dollar(units: list[str], m: re.Match[str]) -> str:
    """``\\$`` before a number is dropped; the LaTeX dollar sign notes the unit (a bare ``$``
    may be a math delimiter left inside joined segments)."""
    if m.group(0).startswith("\\"):
        units.append("dollar")
    return ""


def _degree(units: list[str], m: re.Match[str]) -> str:
    """A degree sign (dropped): the unit is ``deg``, or the temperature scale written after it."""
    scale = (m.group(1) or m.group(2) or m.group(3) or "").lower()
    _note_unit(units, f"°{scale}" if scale else "°")
    return ""


def _note_unit(units: list[str], words: str, power: str = "") -> None:
    unit = canonical_unit(words, power)
    if unit is not None:
        units.append(unit)


def _number_set(m: re.Match[str]) -> str:
    return rf"\mathbb{{{m.group(1) or m.group(2) or m.group(3)}}}"


def _thousands(text: str) -> str:
    """``115,000`` -> ``115000``, ``1 000 000`` -> ``1000000`` (module docstring)."""
    text = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), text)
    return _SPACE_THOUSANDS.sub(lambda m: m.group(1).replace(" ", ""), text)


def _outside_brackets(text: str, fn: Callable[[str], str]) -> str:
    """``fn`` applied to the parts of ``text`` outside ``( )``, ``[ ]`` and ``\\{ \\}``: a
    comma inside a tuple, an interval or a set separates items (``(4,500)`` is a pair), never
    thousands. Braces of LaTeX arguments (``\\frac{1,000}{3}``) do not count."""
    if "," not in text and " " not in text:
        return text
    out: list[str] = []
    depth = 0
    chunk = 0
    i = 0
    n = len(text)
    while i < n:
        ch = text[i]
        step = 2 if ch == "\\" and text[i + 1 : i + 2] in ("{", "}") else 1
        opens = ch in "([" or (step == 2 and text[i + 1] == "{")
        closes = ch in ")]" or (step == 2 and text[i + 1] == "}")
        if opens or closes:
            part = text[chunk:i]
            out.append(fn(part) if depth == 0 else part)
            out.append(text[i : i + step])
            depth = depth + 1 if opens else max(depth - 1, 0)
            chunk = i + step
        i += step
    part = text[chunk:]
    out.append(fn(part) if depth == 0 else part)
    return "".join(out)


_UNIT_VECTOR = r"\\(?:mathbf|boldsymbol|vec|hat)\s*\{\s*([ijk])\s*\}"
_COEFFICIENT = r"(?:\d+(?:\.\d+)?|\\frac\{[^{}]*\}\{[^{}]*\})?(?:\\sqrt\{[^{}]*\})?"
_VECTOR_TERM = re.compile(rf"\s*([+-]?)\s*({_COEFFICIENT})\s*(?:\\cdot\s*)?{_UNIT_VECTOR}\s*")


def _unit_vectors(text: str) -> str:
    """A whole answer that sums numeric multiples of the unit vectors ``\\mathbf{i}``,
    ``\\mathbf{j}``, ``\\mathbf{k}`` (each at most once) is the column vector of its
    coefficients: ``2\\mathbf{i} - 3\\mathbf{j}`` is ``(2, -3)`` as a ``pmatrix``; three
    components when ``\\mathbf{k}`` is written. Anything else is left as it is."""
    if "{i}" not in text and "{j}" not in text and "{k}" not in text:
        return text
    body = text.strip()
    coefficients: dict[str, str] = {}
    at = 0
    while at < len(body):
        m = _VECTOR_TERM.match(body, at)
        if m is None or m.end() == at or m.group(3) in coefficients:
            return text
        if at > 0 and not m.group(1):
            return text  # "2\\mathbf{i}3\\mathbf{j}": no sign between two terms
        sign = "-" if m.group(1) == "-" else ""
        coefficients[m.group(3)] = f"{sign}{m.group(2) or '1'}"
        at = m.end()
    names = "ijk" if "k" in coefficients else "ij"
    entries = " \\\\ ".join(coefficients.get(name, "0") for name in names)
    return f"\\begin{{pmatrix}} {entries} \\end{{pmatrix}}"


def normalize_answer(answer: str) -> str:
    """Normalize an extracted answer's text (rules, with examples, in the module docstring).

    Args:
        answer: raw answer text (e.g. the content of a ``\\boxed{}``).

    Returns:
        Normalized text; the empty string when nothing is left.
    """
    return normalize_with_units(answer)[0]


def normalize_with_units(answer: str, degrees: bool = False) -> tuple[str, frozenset[str]]:
    """:func:`normalize_answer`, and the known units it dropped (``grpo.verifiers.math.units``).

    Args:
        answer: raw answer text, e.g. ``"72^\\circ F"``.
        degrees: a trigonometric function of a bare number is of degrees (``\\csc 10`` is
            ``\\csc 10^\\circ``): set when either side writes one of degrees
            (:func:`writes_trig_degrees`); else of radians.

    Returns:
        ``(normalized text, canonical units)``, e.g. ``("72", frozenset({"degF"}))``; the units
        are empty when none was written or none is known (``12 apples``).
    """
    units: list[str] = []
    text = _unicode_to_latex(answer)
    text = _strip_delimiters(_unbox(text))
    text = text.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac")
    text = text.replace(r"\displaystyle", "")
    text = _COLOR.sub("", text)
    text = re.sub(r"\\left(?![A-Za-z])|\\right(?![A-Za-z])", "", text)
    text = _ANGLE_BRACKETS.sub(lambda m: "(" if m.group(0).startswith(r"\langle") else ")", text)
    text = _REVERSED_INTERVAL.sub(_reversed_interval, text)
    text = _LATEX_SQRT_PAREN.sub(r"\\sqrt{\1}", text)
    text = _FRAC_BARE.sub(_braced_frac, text)
    text = _SQRT_BARE.sub(r"\\sqrt{\1}", text)
    text = _NUMBER_SETS.sub(_number_set, text)
    text = _unit_vectors(text)
    for pattern, replacement in _LOGIC:
        text = pattern.sub(replacement, text)
    text = _TRIG_DEGREES.sub(_trig_degrees, text)
    if degrees:
        text = _TRIG_BARE.sub(_trig_degrees, text)
    text = _DEGREE.sub(functools.partial(_degree, units), text)
    text = _EMPTY_SET.sub(r"\\emptyset", text)
    text = _FRACTION_UNIT.sub(functools.partial(_fraction_unit, units), text)
    text = _TEXT_WORDS.sub(functools.partial(_text_words, units), text)
    for _ in range(3):  # nested wrappers: \text{\textbf{13}}
        text = _WRAPPERS.sub(r"\1", text)
    text = _EXPLICIT_THOUSANDS.sub("", text)
    text = _THIN_THOUSANDS.sub("", text)
    text = _SPACING.sub(lambda m: m.group(0) if m.group(0) == "\\\\" else " ", text)
    text = _BRACED_COMMA.sub(",", text)
    text = _DOLLAR_NUMBER.sub(functools.partial(_dollar, units), text)
    text = _STRAY_DOLLAR.sub(" ", text)
    text = _outside_brackets(text, _thousands)
    text = _APPROX.sub("", text)
    text = text.replace(r"\%", "%")
    text = _WORDS_AFTER.sub(functools.partial(_words_after, units), text)
    text = " ".join(text.split())
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()
    text = _strip_delimiters(text)
    if text[:1].isalpha():
        text = _from_words(text, units)
    return text, frozenset(units)
