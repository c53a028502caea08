"""Text normalization of an extracted answer before it is parsed into sympy.

Applied in order by :func:`normalize_answer`:

- Unicode: zero-width characters (U+200B-U+200D, U+2060, U+FEFF) and soft hyphens removed;
  NFKC-free mapping of math symbols to LaTeX: ``√x``/``√(..)`` -> ``\\sqrt{..}``, ``°`` ->
  ``^\\circ``, ``∞`` -> ``\\infty``, ``π`` -> ``\\pi``, ``−`` -> ``-``, ``×``/``·`` ->
  ``\\times``/``\\cdot``, ``÷`` -> ``\\div``, ``≤``/``≥``/``≠``, vulgar fractions
  (``½`` -> ``\\frac{1}{2}``, any character with a Unicode fraction value).
- LaTeX: ``\\dfrac``/``\\tfrac`` -> ``\\frac``; ``\\left``/``\\right`` dropped; ``\\text{..}``,
  ``\\textbf{..}``, ``\\mathrm{..}``, ``\\mbox{..}`` unwrapped (so ``\\text{13}`` is 13);
  ``\\!``, ``\\,``, ``\\;``, ``~`` spacing dropped; surrounding ``$`` dropped.
- Numbers: a thousands-separated integer (``1,000``, ``115,000``; groups of exactly three
  digits after a leading group not starting with 0) loses its commas — ``0,1`` stays a list;
  a dollar sign before a number is dropped; a trailing period is dropped.
- Units and percent: a unit word after a number (``5 \\text{ cm}``, ``12 dollars``, ``3 cm^2``;
  a fixed list of common units) and a trailing ``%``/``\\%`` are dropped, so ``10\\%`` equals
  10. Degrees (``^\\circ``) are removed by the parser (math-verify).

The output is also what ``Score.extracted_answer`` reports.
"""

from __future__ import annotations

import re
import unicodedata
from fractions import Fraction

__all__ = ["normalize_answer"]

_ZERO_WIDTH = dict.fromkeys(map(ord, "\u200b\u200c\u200d\u2060\ufeff\u00ad"), None)
_SYMBOLS = {
    "∞": r"\infty ",
    "π": r"\pi ",
    "−": "-",
    "–": "-",
    "×": r"\times ",
    "·": r"\cdot ",
    "÷": r"\div ",
    "≤": r"\le ",
    "≥": r"\ge ",
    "≠": r"\ne ",
    "°": r"^\circ ",
    "∪": r"\cup ",
    "∩": r"\cap ",
}
_SQRT_PAREN = re.compile(r"√\s*\(([^()]*)\)")
_SQRT_TOKEN = re.compile(r"√\s*([0-9A-Za-z.]+|\\[A-Za-z]+)")
_UNIT_WORDS = (
    "cm|mm|km|m|meters?|centimeters?|kilometers?|inches|inch|in|feet|foot|ft|yards?|miles?|"
    "units?|sq|square|cubic|degrees?|deg|seconds?|minutes?|hours?|days?|weeks?|months?|years?|"
    "dollars?|cents?|kg|g|grams?|pounds?|lbs?|ounces?|oz|liters?|litres?|ml|gallons?|mph|"
    "percent|people|students|points?|times|ways"
)
_TEXT_UNIT = re.compile(
    rf"(?<=[0-9}}])\s*\\(?:text|mbox|mathrm)\s*\{{\s*(?:{_UNIT_WORDS})(?:\^?[23])?\s*\}}(?:\^\{{?[23]\}}?)?"
)
_BARE_UNIT = re.compile(rf"(?<=[0-9])\s+(?:{_UNIT_WORDS})(?:\^?[23])?\s*$")
_PERCENT = re.compile(r"\\?%\s*$")
_WRAPPERS = re.compile(r"\\(?:text|textbf|textrm|mathrm|mathbf|mbox|operatorname)\s*\{([^{}]*)\}")
_SPACING = re.compile(r"\\[!,;: ]|~")
_THOUSANDS = re.compile(r"(?<![\d.,])(-?[1-9]\d{0,2}(?:,\d{3})+)(?![\d,])(?!\.\d*,)")
_DOLLAR_NUMBER = re.compile(r"\\?\$\s*(?=-?\d)")


def _fraction_char(ch: str) -> str | None:
    """LaTeX for a vulgar-fraction character (``½`` -> ``\\frac{1}{2}``), else None."""
    if unicodedata.category(ch) != "No":
        return None
    value = unicodedata.numeric(ch, None)
    if value is None or float(value).is_integer():
        return None
    frac = Fraction(value).limit_denominator(16)
    return rf"\frac{{{frac.numerator}}}{{{frac.denominator}}}"


def _unicode_to_latex(text: str) -> str:
    text = text.translate(_ZERO_WIDTH)
    text = _SQRT_PAREN.sub(r"\\sqrt{\1}", text)
    text = _SQRT_TOKEN.sub(r"\\sqrt{\1}", text)
    out = []
    for ch in text:
        if ch in _SYMBOLS:
            out.append(_SYMBOLS[ch])
        elif ord(ch) > 127 and (frac := _fraction_char(ch)) is not None:
            out.append(frac)
        else:
            out.append(ch)
    return "".join(out)


def normalize_answer(answer: str) -> str:
    """Normalize an extracted answer's text (rules in the module docstring).

    Args:
        answer: raw answer text (e.g. the content of the last ``\\boxed{}``).

    Returns:
        Normalized text; the empty string when nothing is left.
    """
    text = _unicode_to_latex(answer).strip()
    if len(text) >= 2 and text[0] == "$" and text[-1] == "$":
        text = text.strip("$").strip()
    text = text.replace(r"\dfrac", r"\frac").replace(r"\tfrac", r"\frac")
    text = re.sub(r"\\left(?![A-Za-z])|\\right(?![A-Za-z])", "", text)
    text = _TEXT_UNIT.sub("", text)
    for _ in range(3):  # nested wrappers: \text{\textbf{13}}
        text = _WRAPPERS.sub(r"\1", text)
    text = _SPACING.sub("", text)
    text = _DOLLAR_NUMBER.sub("", text)
    text = _THOUSANDS.sub(lambda m: m.group(1).replace(",", ""), text)
    text = _BARE_UNIT.sub("", text.strip())
    text = _PERCENT.sub("", text).strip()
    if text.endswith(".") and not text.endswith(".."):
        text = text[:-1].rstrip()
    return text
