"""English number words in a step, rewritten as digits before claims are looked for.

:func:`words_to_digits` rewrites, in place of the words:

- cardinals, as models spell them: ``nine`` -> ``9``, ``twenty-four`` / ``twenty four`` ->
  ``24``, ``one hundred and five`` -> ``105``, ``three thousand two hundred`` -> ``3200``,
  ``two million five hundred thousand`` -> ``2500000``, ``a hundred`` / ``a thousand`` ->
  ``100`` / ``1000`` (``and`` joins only after a scale word and before a smaller part, so
  ``five and six`` stays two numbers);
- a written number times a scale word: ``2.5 million`` -> ``2500000``, ``3 thousand`` ->
  ``3000``, ``3 hundred`` -> ``300`` (``dozen`` stays a unit: ``2 dozen eggs``);
- fractions in words: ``one half``, ``two thirds``, ``three fifths`` -> ``(1/2)``,
  ``(2/3)``, ``(3/5)``; before ``of`` also ``a third of``, ``half of``, ``three quarters
  of`` -> ``(1/3) of``, ``(1/2) of``, ``(3/4) of`` (``two quarters`` alone may be coins);
  ``N and a half`` -> ``(N+1/2)``. Ordinals alone (``the third day``, ``second``) and a
  digit before a fraction word (``48 halves``) stay words.

Words keep their case-insensitive meaning only as whole words (``someone``, ``tone`` and
``often`` are not numbers). Source of the vocabulary: the English short-scale cardinals.
"""

from __future__ import annotations

import re
from fractions import Fraction

__all__ = ["words_to_digits"]

_UNITS = {
    "zero": 0, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "thirteen": 13,
    "fourteen": 14, "fifteen": 15, "sixteen": 16, "seventeen": 17, "eighteen": 18,
    "nineteen": 19,
}  # fmt: skip
_TENS = {
    "twenty": 20, "thirty": 30, "forty": 40, "fifty": 50, "sixty": 60, "seventy": 70,
    "eighty": 80, "ninety": 90,
}  # fmt: skip
_SCALES = {"thousand": 10**3, "million": 10**6, "billion": 10**9, "trillion": 10**12}
_DENOMINATORS = {
    "half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4,
    "fourth": 4, "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6,
    "seventh": 7, "sevenths": 7, "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9,
    "tenth": 10, "tenths": 10,
}  # fmt: skip

_TOKEN = re.compile(r"[A-Za-z]+|\s+|.", re.DOTALL)
_NUMBER_WORDS = {*_UNITS, *_TENS, "hundred", *_SCALES}
_DIGITS_SCALE = re.compile(
    r"(?<![\d.])(\d+(?:\.\d+)?)\s+(thousand|million|billion|trillion|hundred)\b",
    re.IGNORECASE,
)
_AND_A_HALF = re.compile(r"(?<![\d.])(\d+)\s+and\s+a\s+half\b", re.IGNORECASE)
_HALF_OF = re.compile(r"\b(?:one\s+|a\s+)?half\s+(?=of\b)", re.IGNORECASE)
_A_FRACTION_OF = re.compile(
    r"\ba\s+(third|quarter|fourth|fifth|sixth|seventh|eighth|ninth|tenth)\s+(?=of\b)",
    re.IGNORECASE,
)
_SMALL = "one|two|three|four|five|six|seven|eight|nine|ten"
_FRACTION_WORDS = "|".join(sorted(_DENOMINATORS, key=len, reverse=True))
_WORD_FRACTION_OF = re.compile(
    r"\b(" + _SMALL + r")(?:\s+|-)(" + _FRACTION_WORDS + r")\s+(?=of\b)", re.IGNORECASE
)
_WORD_FRACTION = re.compile(
    r"\b(" + _SMALL + r")(?:\s+|-)(half|thirds?|fourths?|fifths?|sixths?|sevenths?|eighths?"
    r"|ninths?|tenths?)\b",
    re.IGNORECASE,
)


_ANY_NUMBER_WORD = re.compile(
    r"\b(?:" + "|".join([*_NUMBER_WORDS, *_DENOMINATORS]) + r")\b", re.IGNORECASE
)


_MAX_PHRASE_WORDS = 24  # "nine hundred ninety-nine trillion ... ninety-nine" has 21 words


def _kind(word: str) -> str:
    if word in _UNITS:
        return "unit" if _UNITS[word] < 10 else "teen"
    if word in _TENS:
        return "tens"
    return "hundred" if word == "hundred" else "scale"


def _value(words: list[str]) -> int | None:
    """The value of a cardinal's words (``and`` removed, a leading ``a`` read as one), or
    None when they do not form one number (``five six``, ``thousand million``)."""
    total, group, last, last_scale = 0, 0, "", 10**15
    for word in words:
        kind = _kind(word)
        if kind in ("unit", "teen"):
            if last in ("unit", "teen") or (last == "tens" and kind == "teen"):
                return None
            if word == "zero" and len(words) > 1:
                return None
            group += _UNITS[word]
        elif kind == "tens":
            if last in ("unit", "teen", "tens"):
                return None
            group += _TENS[word]
        elif kind == "hundred":
            if last not in ("unit", "teen", "tens") or not 0 < group < 100:
                return None
            group *= 100
        else:
            scale = _SCALES[word]
            if last in ("", "scale") or group == 0 or scale >= last_scale:
                return None
            total += group * scale
            group, last_scale = 0, scale
        last = kind
    return total + group if last else None


def _cardinals(text: str) -> str:
    """Replace each maximal cardinal phrase by its digits (longest valid prefix first)."""
    tokens = _TOKEN.findall(text)
    out: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        lower = token.lower()
        if (lower in _NUMBER_WORDS or lower == "a") and not (out and out[-1][-1:].isalnum()):
            words, ends = _phrase(tokens, i)
            for n in range(len(words), 0, -1):  # the longest prefix that is one number
                value = _value(words[:n])
                if value is not None:
                    out.append(str(value))
                    i = ends[n - 1]
                    break
            else:
                out.append(token)
                i += 1
            continue
        out.append(token)
        i += 1
    return "".join(out)


def _phrase(tokens: list[str], i: int) -> tuple[list[str], list[int]]:
    """Number words from token ``i`` on, joined by spaces, in-word hyphens (``twenty-four``) or
    ``and`` after a scale; a leading ``a`` counts as one before a scale word. Returns the
    words (lower case) and, for each, the token index just after it."""
    words: list[str] = []
    ends: list[int] = []
    j = i
    while j < len(tokens) and len(words) < _MAX_PHRASE_WORDS:
        word = tokens[j].lower()
        if word == "a" and not words:
            if not (j + 2 < len(tokens) and tokens[j + 1].isspace()):
                break
            if tokens[j + 2].lower() not in ("hundred", *_SCALES):
                break
            word = "one"
        elif word == "and" and words and _kind(words[-1]) in ("hundred", "scale"):
            nxt = j + 2 if j + 1 < len(tokens) and tokens[j + 1].isspace() else None
            if nxt is None or nxt >= len(tokens) or tokens[nxt].lower() not in {*_UNITS, *_TENS}:
                break
            j = nxt
            continue
        elif word not in _NUMBER_WORDS:
            break
        words.append(word)
        j += 1
        ends.append(j)
        if j + 1 < len(tokens) and tokens[j] == "-" and tokens[j + 1][:1].isalpha():
            j += 1  # "twenty-four"
        elif j + 1 < len(tokens) and tokens[j].isspace() and "\n" not in tokens[j]:
            j += 1
        else:
            break
    return words, ends


def _scaled(match: re.Match[str]) -> str:
    value = Fraction(match.group(1)) * {"hundred": 100, **_SCALES}[match.group(2).lower()]
    return str(value.numerator) if value.denominator == 1 else f"({value})"


def words_to_digits(text: str) -> str:
    """Rewrite the number words of ``text`` as digits (rules in the module docstring).

    Returns:
        The text with each number phrase replaced by its value; everything else unchanged.
    """
    if not _ANY_NUMBER_WORD.search(text):
        return text
    text = _WORD_FRACTION_OF.sub(_fraction, text)
    text = _WORD_FRACTION.sub(_fraction, text)
    text = _HALF_OF.sub("(1/2) ", text)
    text = _A_FRACTION_OF.sub(lambda m: f"(1/{_DENOMINATORS[m.group(1).lower()]}) ", text)
    text = _cardinals(text)
    text = _DIGITS_SCALE.sub(_scaled, text)
    return _AND_A_HALF.sub(lambda m: f"({m.group(1)}+1/2)", text)


def _fraction(m: re.Match[str]) -> str:
    """``two thirds`` -> ``(2/3)``; a singular word after a number other than one (``two
    third``) or a plural after one (``one thirds``) is left alone."""
    n = _UNITS[m.group(1).lower()]
    word = m.group(2).lower()
    if (word.endswith("s") == (n == 1) and word != "half") or (word == "half" and n != 1):
        return m.group(0)
    trailing = m.group(0)[len(m.group(0).rstrip()) :]
    return f"({n}/{_DENOMINATORS[word]}){trailing}"
