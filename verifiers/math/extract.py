"""Final-answer extraction from a free-form math response.

First the **answer region** is found: chat-template debris is blanked (``<|im_end|>``,
``<|eot_id|>``, ``</s>``, ``<｜end▁of▁sentence｜>``, header tokens; offsets are kept), anything
after the first end-of-turn token is dropped (a hallucinated next turn), and when the response
has a ``</think>`` the region starts after the last one (boxes inside the reasoning are
drafts). Then the first rule that matches wins:

1. ``boxed``: every ``\\boxed{...}``/``\\fbox{...}`` of the region (nested braces matched,
   escaped ``\\{``/``\\}`` ignored; ``\\boxed 5`` gives the next token); when a "Final Answer"
   heading (``**Final Answer**``, ``Final Answer:``) is followed by boxes, only those. Equal
   boxes count once (``\\boxed{7} … \\boxed{7}`` is 7); different boxes are *parts* of one
   answer that the answer model reads as a list (``\\boxed{3}`` and ``\\boxed{-5}`` is the
   list 3, -5: a hedge ``\\boxed{3}`` or ``\\boxed{4}`` is a list too, so it never equals a
   single gold). An unclosed last box (a truncated response) raises :class:`UnclosedBoxError`.
2. ``gsm8k``: the text after the last ``####`` up to the end of its line.
3. ``answer_is``: after the last answer phrase ("the answer is", "the answers are", "final
   answer:", "**Answer:**", case-insensitive; markdown ``*`` and ``$`` skipped) the leading
   math of the sentence: a ``$…$``/``\\(…\\)`` segment (with the ``$…$`` segments joined
   to it by ``,``/``and``/``or`` when the sentence ends after them: "$x<1$ or $x>2$."), or
   the longest run of numbers, operators, LaTeX, single-letter variables, and
   ``,``/``and``/``or`` between values, so
   "The answer is 12 apples." gives ``12``, "The answers are 4 and 6." gives ``4 and 6`` and
   "The answer is 8, since 2*4=8." gives ``8``; a ratio stays whole ("The answer is 1:2." gives
   ``1:2``, never ``1``). When no math starts the sentence, the words up
   to the sentence end (a text answer: "The answer is Evelyn.").
4. ``last_math``: the content of the last ``$…$``, ``$$…$$``, ``\\(…\\)`` or ``\\[…\\]`` when no
   digit follows it; ``$5 an hour, so … $`` (dollar signs around words) is money, not math.
5. ``last_number``: the last standalone number: integer, ``1,234`` thousands groups, decimal,
   e-notation, ``a/b``, a mixed number ``3 1/2``, a scale word after it (``2.5 million``);
   digits inside a word (``QX7ZK``) are not a number. This covers the arithmetic format
   ``7+8=15,4+3+1=8:85`` (85).

Every rule is linear in the length of the text. The results are raw texts at their offsets;
``grpo.verifiers.math.normalize`` and ``grpo.verifiers.math.answer`` read them. No sympy.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Extraction", "UnclosedBoxError", "answer_region", "extract_answer"]

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")
_ANSWER_PHRASE = re.compile(
    r"(?:(?:final\s+)?answers?\s*(?:is|are|was|would\s+be|will\s+be)\b|(?:final\s+)?answers?\s*"
    r"(?:\*\*|__)?\s*:|final\s+answer\s*(?:\*\*|__)?[ \t]*(?=\n))\s*:?",
    re.IGNORECASE,
)
_FINAL_HEADING = re.compile(r"final\s+answer", re.IGNORECASE)
_INLINE_MATH = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
_SCALE_WORD = r"(?:hundred|thousand|million|billion|trillion)\b"
_NUMBER = re.compile(
    r"(?<![A-Za-z0-9.])-?(?:\d{1,3}(?:(?:,|\{,\}|,\\!|\\,)\d{3})+|\d+)(?:\.\d+)?(?:[eE][+-]?\d+)?"
    r"(?:\s+\d+\s*/\s*\d+|\s*/\s*\d+)?(?![A-Za-z0-9])"
    rf"(?:\s+{_SCALE_WORD})?"
)
_DEBRIS = re.compile(
    r"<\|start_header_id\|>[^<]{0,40}<\|end_header_id\|>|<\|[^|<>\n]{1,40}\|>|<｜[^｜\n]{1,40}｜>"
    r"|</?s>|\[/?INST\]|<<SYS>>|<</SYS>>"
)
_END_OF_TURN = re.compile(
    r"<\|(?:im_end|eot_id|endoftext|end_of_text|end|eom_id)\|>|</s>|<｜end▁of▁sentence｜>"
)
_THINK_END = re.compile(r"</think>")
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_MATH_START = re.compile(r"\$\$|\$|\\\(|\\\[")
_MATH_CLOSE = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
# one token of a math run in prose: numbers, operators, LaTeX commands and groups, variables
_RUN_TOKEN = re.compile(
    rf"\s+{_SCALE_WORD}|"
    r"(?<=[\d}])\s*:(?=\s*\d)|"  # a ratio 1:2 (never the first token: the phrase eats "is:")
    r"\s*(?:\d[\d,]*(?:\.\d+)?(?:[eE][+-]?\d+)?%?|\.\d+|\\[A-Za-z]+\*?|\\[{}%!,;]|[-+*/^=<>()\[\]{}|!×÷·−√π∞°_']"
    r"|(?<![A-Za-z])[A-Za-z](?![A-Za-z]))"
)
_CONNECTOR = re.compile(r"\s*(?:,\s*|\s(?:and|or)\s+)(?=\$?-?[\d\\(\[{]|[A-Za-z](?![A-Za-z]))")
_MONEY = re.compile(r"\$(?=\d)(?!\d[\d.,]*\$)")  # "$5 an hour", not the math "$4$"
_SEGMENT_JOIN = re.compile(r"[ \t]*(?:,[ \t]*(?:(?:and|or)[ \t]+)?|(?:and|or)[ \t]+)\$(?!\$)")
_SEGMENT_END = re.compile(r"[ \t]*(?:[.!?;]|\*|$)")
_MATHY = re.compile(r"[\d\\^=+\-*/(){}\[\]]")
_WORD_NEXT = re.compile(r"\s*[A-Za-z]")
_PROSE = re.compile(r"(?<!\\)\b[A-Za-z]{2,}\s+[A-Za-z]{2,}")


@dataclass(frozen=True)
class Extraction:
    """An extracted final answer.

    Attributes:
        text: the answer text as written (stripped); several parts are joined by ``", "``.
        rule: which rule found it: ``boxed``, ``gsm8k``, ``answer_is``, ``last_math`` or
            ``last_number``.
        start: code-point offset of the (first) part in the response.
        parts: ``(start, text)`` of every part (one unless several different boxes);
            ``response[start:start + len(text)] == text`` for each.
    """

    text: str
    rule: str
    start: int
    parts: tuple[tuple[int, str], ...] = ()

    @classmethod
    def of(cls, parts: list[tuple[int, str]], rule: str) -> Extraction:
        """An extraction of one or more ``(start, text)`` parts."""
        return cls(", ".join(t for _, t in parts), rule, parts[0][0], tuple(parts))


class UnclosedBoxError(ValueError):
    """The last ``\\boxed{`` has no matching closing brace (e.g. a truncated response)."""


def _stripped(raw: str, start: int) -> tuple[int, str]:
    """``raw`` (found at ``start``) without surrounding whitespace, its offset moved to match."""
    return start + len(raw) - len(raw.lstrip()), raw.strip()


def answer_region(response: str) -> tuple[str, int, int]:
    """Blank chat-template debris and find where the final answer may be.

    Args:
        response: the model's response.

    Returns:
        ``(text, start, end)``: ``text`` is the response with debris replaced by spaces (same
        length, same offsets); the answer is searched in ``text[start:end]``.
    """
    end = len(response)
    think = None
    for think in _THINK_END.finditer(response):  # noqa: B007 - the last one
        pass
    start = think.end() if think is not None and response[think.end() :].strip() else 0
    stop = _END_OF_TURN.search(response, start)
    if stop is not None and response[start : stop.start()].strip():
        end = stop.start()
    text = _DEBRIS.sub(lambda m: " " * len(m.group(0)), response)
    return text, start, end


def _braced(text: str, open_at: int, end: int) -> int | None:
    """Index of the brace closing the group opening at ``text[open_at] == '{'``, or None."""
    depth = 0
    i = open_at
    while i < end:
        ch = text[i]
        if ch == "\\" and i + 1 < end and text[i + 1] in "{}":
            i += 2
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _boxes(text: str, start: int, end: int) -> list[tuple[int, str]]:
    """``(start, content)`` of the boxes in ``text[start:end]`` (not boxes inside boxes)."""
    found: list[tuple[int, str]] = []
    matches = list(_BOX.finditer(text, start, end))
    covered = start
    for k, m in enumerate(matches):
        if m.start() < covered:
            continue
        i = m.end()
        while i < end and text[i] in " \t":
            i += 1
        if i < end and text[i] == "{":
            close = _braced(text, i, end)
            if close is None:
                if all(later.start() < covered for later in matches[k + 1 :]):
                    raise UnclosedBoxError("the last \\boxed{ is never closed")
                continue
            part = _stripped(text[i + 1 : close], i + 1)
            covered = close + 1
        else:
            token = re.compile(r"[^\s$]+").match(text, i, end)
            if token is None:
                continue
            part = (i, token.group(0))
            covered = token.end()
        if part[1]:
            found.append(part)
    return found


def _distinct(parts: list[tuple[int, str]]) -> list[tuple[int, str]]:
    """Parts with equal text (ignoring spaces) counted once, in order."""
    seen: set[str] = set()
    out = []
    for start, part in parts:
        key = "".join(part.split())
        if key not in seen:
            seen.add(key)
            out.append((start, part))
    return out


def _math_run(text: str, i: int, end: int) -> int:
    """End of the run of math tokens (with list connectors between values) from ``i``."""
    j = i
    while j < end:
        m = _RUN_TOKEN.match(text, j, end)
        if m is not None and m.end() > j:
            j = m.end()
            continue
        c = _CONNECTOR.match(text, j, end)
        if c is not None and j > i:
            j = c.end()
            continue
        break
    return j


def _joined_segments(text: str, close: int, line_end: int) -> int:
    """Where the answer's ``$…$`` segments end: ``$x<1$ or $x>2$.`` and ``$4$ and $6$.`` are
    one answer when the sentence ends after the last segment (else only the first counts:
    "$5$, and $6$ is wrong" is 5). ``close`` is the first segment's closing ``$``."""
    last, k = close, close + 1
    while (join := _SEGMENT_JOIN.match(text, k, line_end)) is not None:
        nxt = text.find("$", join.end(), line_end)
        if nxt <= join.end():
            break
        last, k = nxt, nxt + 1
    if last == close or _SEGMENT_END.match(text, last + 1, line_end) is None:
        return close
    return last


def _after_phrase(text: str, at: int, end: int) -> tuple[int, str] | None:
    """The answer stated after an answer phrase ending at ``at`` (rule 3)."""
    i = at
    while i < end and text[i] in " \t*_:#\n":  # markdown; the answer may be on the next line
        i += 1
    line_end = text.find("\n", i, end)
    line_end = end if line_end < 0 else line_end
    if i >= line_end:
        return None
    money = _MONEY.match(text, i) is not None
    opener = _MATH_START.match(text, i, line_end)
    if opener is not None and not money:
        close = text.find(_MATH_CLOSE[opener.group(0)], opener.end(), line_end)
        if close > opener.end():
            if opener.group(0) == "$":
                close = _joined_segments(text, close, line_end)
            return _stripped(text[opener.end() : close], opener.end())
    if money:
        i += 1
    j = _math_run(text, i, line_end)
    run = text[i:j].rstrip().rstrip(",;:*_").rstrip()
    prose = not _MATHY.search(run) and _WORD_NEXT.match(text, j, line_end) is not None
    if run and any(ch.isalnum() for ch in run) and not prose:
        return _stripped(run, i)
    sentence = _SENTENCE_END.search(text, i, line_end)
    words = text[i : sentence.start() if sentence else line_end].strip().strip("*_$").strip()
    if not words:
        return None
    return text.index(words, i), words


def extract_answer(response: str) -> Extraction | None:
    """Extract the final answer of ``response`` (region and rules in the module docstring).

    Args:
        response: the model's response text.

    Returns:
        The extraction, or None when no rule finds an answer.

    Raises:
        UnclosedBoxError: the last ``\\boxed{`` is not closed (no answer may be guessed then).
    """
    text, start, end = answer_region(response)
    boxes = _boxes(text, start, end)
    if boxes:
        heading = None
        for heading in _FINAL_HEADING.finditer(text, start, end):  # noqa: B007
            pass
        if heading is not None:
            after = [b for b in boxes if b[0] >= heading.end()]
            boxes = after or boxes
        return Extraction.of(_distinct(boxes), "boxed")
    gsm = None
    for gsm in _GSM8K.finditer(text, start, end):  # noqa: B007
        pass
    if gsm is not None and gsm.group(1).strip():
        return Extraction.of([_stripped(gsm.group(1), gsm.start(1))], "gsm8k")
    said = None
    for said in _ANSWER_PHRASE.finditer(text, start, end):  # noqa: B007
        pass
    if said is not None:
        found = _after_phrase(text, said.end(), end)
        if found is not None:
            return Extraction.of([found], "answer_is")
    math = None
    for candidate in _INLINE_MATH.finditer(text, start, end):
        index = next(i for i in range(1, 5) if candidate.group(i) is not None)
        content = candidate.group(index)
        if candidate.group(0).startswith("$") and _PROSE.search(content):
            continue  # "$5 an hour, so she made $": money around prose
        math = (candidate, index)
    if math is not None:
        m, index = math
        if not any(ch.isdigit() for ch in text[m.end() : end]) and m.group(index).strip():
            return Extraction.of([_stripped(m.group(index), m.start(index))], "last_math")
    number = None
    for number in _NUMBER.finditer(text, start, end):  # noqa: B007
        pass
    if number is not None:
        return Extraction.of([(number.start(), number.group(0))], "last_number")
    return None
