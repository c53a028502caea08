"""Final-answer extraction from a free-form math response.

Rules, first match wins:

1. ``boxed``: the content of the LAST ``\\boxed{...}`` or ``\\fbox{...}`` (nested braces
   matched, escaped ``\\{``/``\\}`` ignored; several boxes give the last one, never their
   concatenation). ``\\boxed 5`` (no braces) gives the next token.
2. ``gsm8k``: the text after the last ``#### `` up to the end of its line (GSM8K format).
3. ``answer_is``: the text after the last "answer is" / "answer:" (case-insensitive; so
   also "The final answer is") up to the end of the sentence or line, without markdown
   ``**`` or ``$`` around it.
4. ``last_math``: the content of the last ``$...$``, ``$$...$$``, ``\\(...\\)`` or
   ``\\[...\\]`` when no digit follows it ("the probability is $\\frac{1}{2}$.").
5. ``last_number``: the last number in the text (integer, ``1,234`` thousands groups,
   decimal, or ``a/b``). This covers the pipeline's arithmetic format ``7+8=15,4+3+1=8:85``,
   whose answer is the number after the last ``:`` (85).

Every rule is linear in the length of the text. The result is the raw answer text; see
``grpo.verifiers.math.normalize`` for its normalization.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Extraction", "UnclosedBoxError", "extract_answer"]

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_IS = re.compile(r"answer\s*(?:is\b|:)\s*:?", re.IGNORECASE)
_REST_OF_LINE = re.compile(r"[^\n]*")
_INLINE_MATH = re.compile(r"\$\$(.+?)\$\$|\$(.+?)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL)
_NUMBER = re.compile(r"-?(?:[1-9]\d{0,2}(?:,\d{3})+|\d+)(?:\.\d+)?(?:\s*/\s*\d+)?")
_SENTENCE_END = re.compile(r"\.(?:\s|$)")


@dataclass(frozen=True)
class Extraction:
    """An extracted final answer.

    Attributes:
        text: the answer text as written (stripped).
        rule: which rule found it: ``boxed``, ``gsm8k``, ``answer_is``, ``last_math`` or
            ``last_number``.
        start: code-point offset of the answer in the response.
    """

    text: str
    rule: str
    start: int


def _stripped(raw: str, rule: str, start: int) -> Extraction:
    """``raw`` (found at ``start``) without surrounding whitespace, its offset moved to match."""
    return Extraction(raw.strip(), rule, start + len(raw) - len(raw.lstrip()))


class UnclosedBoxError(ValueError):
    """The last ``\\boxed{`` has no matching closing brace (e.g. a truncated response)."""


def _braced(text: str, open_at: int) -> str:
    """Return the content of the brace group opening at ``text[open_at] == '{'``."""
    depth = 0
    i = open_at
    n = len(text)
    while i < n:
        ch = text[i]
        if ch == "\\" and i + 1 < n and text[i + 1] in "{}":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[open_at + 1 : i]
        i += 1
    raise UnclosedBoxError("the last \\boxed{ is never closed")


def _last_box(text: str) -> Extraction | None:
    last = None
    for last in _BOX.finditer(text):  # noqa: B007 - we want the last match
        pass
    if last is None:
        return None
    i = last.end()
    while i < len(text) and text[i] in " \t":
        i += 1
    if i < len(text) and text[i] == "{":
        return _stripped(_braced(text, i), "boxed", i + 1)
    token = re.match(r"[^\s$]+", text[i:])
    if token is None:
        return None
    return Extraction(token.group(0), "boxed", i)


def extract_answer(response: str) -> Extraction | None:
    """Extract the final answer of ``response`` (rules in the module docstring).

    Args:
        response: the model's response text.

    Returns:
        The extraction, or None when no rule finds an answer.

    Raises:
        UnclosedBoxError: the last ``\\boxed{`` is not closed (no answer may be guessed then).
    """
    boxed = _last_box(response)
    if boxed is not None and boxed.text:
        return boxed
    gsm = None
    for gsm in _GSM8K.finditer(response):  # noqa: B007
        pass
    if gsm is not None and gsm.group(1).strip():
        return _stripped(gsm.group(1), "gsm8k", gsm.start(1))
    said = None
    for said in _ANSWER_IS.finditer(response):  # noqa: B007
        pass
    if said is not None:
        rest = _REST_OF_LINE.match(response, said.end())
        answer = rest.group(0) if rest else ""
        end = _SENTENCE_END.search(answer)
        answer = (answer[: end.start()] if end else answer).strip().strip("*$").strip()
        if answer:
            return Extraction(answer, "answer_is", response.index(answer, said.end()))
    math = None
    for math in _INLINE_MATH.finditer(response):  # noqa: B007
        pass
    if math is not None and not any(ch.isdigit() for ch in response[math.end() :]):
        index = next(i for i in range(1, 5) if math.group(i) is not None)
        if math.group(index).strip():
            return _stripped(math.group(index), "last_math", math.start(index))
    number = None
    for number in _NUMBER.finditer(response):  # noqa: B007
        pass
    if number is not None:
        return Extraction(number.group(0), "last_number", number.start())
    return None
