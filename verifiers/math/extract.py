r"""Final-answer extraction: candidates with provenance, one precedence, per-task formats.

The full description, with examples, is docs/verifiers.md ("Extraction"); in short:

**The answer region.** Chat-template debris, GSM8K calculator annotations, list numbering
and labels between values are blanked (offsets kept). The region ends where a hallucinated
continuation begins: the first turn token with text before it (an end-of-turn token or
another family's turn marker: ``<|im_end|>``, ``<end_of_turn>``, ``<|im_start|>``,
``[INST]``, ``<|user|>``, ``<end>``), or, when an answer comes before it, a line opening a
user turn (``User:``, ``Human:``, ``<human>:``, ``用户:``), a restated system prompt, a new problem
(``Question:``, ``Problem 2:``), an invented follow-up ("Can you explain …?"), an invented
grader's turn ("Great job! Your answer is correct.") or, in a
Latin-script response, degenerate text (tokens of other scripts) after an explicit answer or a
concluding statement with its value ("Putting it all together, … is $$15x - 80$$"); one stray
token just before the response's last explicit answer does not start it. After the last
``</think>`` only the text after it counts when it holds an explicit answer (or a number,
when the reasoning holds no explicit answer).

**Candidates, in the one order of precedence** (``lenient``: the first that exists wins; of
the answer tag and the box, the one that ends the response comes first):

1. ``answer_tag``: the last ``<answer>…</answer>`` (``< answer >``, a line-start ``answer>``,
   a broken close ``</ answers >`` and an unclosed last tag too; a tag named in a sentence,
   "the < answer > tags", is no slot), read inside by: a box, an answer phrase, the whole content
   when it is one line of math, the math it opens with, its final statement. A tag without a
   value gives nothing (the next rule decides); the template's placeholder ("answer here")
   keeps only an explicit answer given elsewhere, else no answer.
2. ``boxed``: when the gold is a list (``several``) the distinct boxes form one list;
   otherwise the last box wins, with the boxes joined to it by connectors only (a list; ``or``
   between them a hedge). Boxes after a "Final Answer" heading only; boxes without a value or
   of garbage after a real one skipped; an unclosed last box raises
   :class:`UnclosedBoxError` unless it repeats the box before it.
3. ``gsm8k``: the rest of the last ``####`` line when it holds a number.
4. ``answer_is``: the last answer phrase that states something (at most the last eight are
   read): the math that starts its sentence (the end of its chain), a choice letter, a set in
   words, else the value its sentence states, else the value its paragraph ends on, else a
   short text answer. A hedge after the value ("7, or perhaps 9") is marked ``hedge``.
5. ``final_statement``: the last sentence with math after the last code block, neither a
   question nor restated from the prompt nor an aside ("Note: …"): its stated item (the last
   one not after a preposition), with the items joined to it as a list, reduced to the end of
   its chain (``3x + 2 = 17 + 2 = 19`` gives 19; ``y = 8`` stays an assignment; a constant
   right side is the value; the exact value before ``\approx``). An unfinished response has
   none, unless a conclusion ("Therefore …") ends just before the cut. When nothing after
   the last program states a value, a conclusion before the program whose output prints
   that very value stands ("Therefore, $ab = 108$. Let's confirm." + ``108``).
6. ``last_number``: the same when the value is a bare number (``12kg``, ``$4,300``,
   ``…=8:85``). A number inside a LaTeX argument, exponent, subscript or code is never one.

**Formats** (per task ``Task.metadata["answer_format"]``, else the verifier's config):
``lenient`` uses all; ``boxed`` only rule 2, ``answer_tag`` only rule 1, ``gsm8k`` only rule
3: a strict format never falls back to guessing.

The work is near linear in the length of the text (at most twelve continuation markers and
eight answer phrases are examined). Parts are raw spans of the response (``response[start:
start + len(text)] == text``); ``grpo.verifiers.math.normalize`` and
``grpo.verifiers.math.answer`` read them. No sympy, no grpc.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from grpo.verifiers.math.answer import is_name, is_set_phrase
from grpo.verifiers.math.normalize import number_from_words
from grpo.verifiers.math.units import canonical_unit

__all__ = [
    "FORMATS",
    "RULES",
    "AnswerFormatError",
    "Extraction",
    "UnclosedBoxError",
    "answer_region",
    "extract_answer",
]

FORMATS = ("lenient", "boxed", "answer_tag", "gsm8k")
"""Answer formats: ``lenient`` (every rule), or one strict rule (module docstring)."""
RULES = ("answer_tag", "boxed", "gsm8k", "answer_is", "final_statement", "last_number")
"""Candidate kinds (provenance), in the order of precedence."""
_RULES_OF = {
    "lenient": ("answer_tag", "boxed", "gsm8k", "answer_is", "final_statement"),
    "boxed": ("boxed",),
    "answer_tag": ("answer_tag",),
    "gsm8k": ("gsm8k",),
}


@dataclass(frozen=True)
class _Want:
    """What the gold tells extraction: a list (``several``), an equation (``equation``), and
    the task's whitespace-normalized ``prompt``."""

    several: bool = False
    equation: bool = False
    prompt: str = ""


class _NoAnswerError(Exception):
    """The response declares it gives no answer (a placeholder in the answer tag)."""


class UnclosedBoxError(ValueError):
    """The last ``\\boxed{`` has no matching closing brace (e.g. a truncated response)."""


class AnswerFormatError(ValueError):
    """An answer format that is not one of :data:`FORMATS`."""


@dataclass(frozen=True)
class Extraction:
    """An extracted final answer.

    Attributes:
        text: the answer text as written (stripped); several parts are joined by ``", "``.
        rule: the candidate's kind, one of :data:`RULES`.
        start: code-point offset of the (first) part in the response.
        parts: ``(start, text)`` of every part (one unless several boxes);
            ``response[start:start + len(text)] == text`` for each.
        hedge: the response offers several answers without choosing ("7, or perhaps 9",
            ``\\boxed{3} or \\boxed{4}``): not an answer.
    """

    text: str
    rule: str
    start: int
    parts: tuple[tuple[int, str], ...] = ()
    hedge: bool = False

    @classmethod
    def of(cls, parts: list[tuple[int, str]], rule: str, hedge: bool = False) -> Extraction:
        """An extraction of one or more ``(start, text)`` parts."""
        return cls(", ".join(t for _, t in parts), rule, parts[0][0], tuple(parts), hedge)


# ---- the answer region ----------------------------------------------------------------

_DEBRIS = re.compile(
    r"<\|start_header_id\|>[^<]{0,40}<\|end_header_id\|>"
    r"|<\|im_start\|>[ \t]*(?:system|user|assistant)?|<start_of_turn>[ \t]*(?:user|model)?"
    r"|<\|[^|<>\n]{1,40}\|>|<｜[^｜\n]{1,40}｜>|<end_of_turn>|<eos>"
    r"|</?s>|\[/?INST\]|<<SYS>>|<</SYS>>"
)
_TURN_TOKEN = re.compile(
    r"<\|(?:im_end|im_start|eot_id|endoftext|end_of_text|end|eom_id|user|assistant|system"
    r"|start_header_id|end_of_turn|eos)\|>|</s>|<｜end▁of▁sentence｜>|<｜(?:User|Assistant)｜>"
    r"|<start_of_turn>|<end_of_turn>|<eos>|\[INST\]|<end>"
)
_NEW_TURN = re.compile(
    r"(?:^|(?<=\n))[ \t]*(?:#{1,4}[ \t]*)?(?:\*\*)?<?(?:[Uu]ser|USER|[Hh]uman|HUMAN|用户)>?"
    r"(?:\*\*)?[ \t]*[:：]"
)
_NEW_PROBLEM = re.compile(
    r"(?:^|(?<=\n))[ \t]*(?:#{1,4}[ \t]*)?(?:\*\*)?(?:Question|QUESTION|Problem|PROBLEM|Q|"
    r"Example|Exercise|Instruction|Input|New problem|Next problem|Another problem)"
    r"(?:[ \t]*\d+)?(?:\*\*)?(?:[ \t]*[:.]|(?<=\d)(?:\*\*)?[ \t]*(?=\n))"
)
_EXPLICIT = re.compile(
    r"####[ \t]*[^\n]*\d|<\s*answer\s*>[^<]{0,200}?\d"
    r"|(?:^|(?<=\n))[ \t]*answer[ \t]*>[^<]{0,200}?\d"
    r"|answer\s*(?:is|:)[^\n]{0,80}?\d",
    re.IGNORECASE,
)
# a follow-up question the model invents after answering ("Can you explain how …?")
_FOLLOW_UP = re.compile(
    r"(?:^|(?<=\n))[ \t]*(?:Can you|Could you|Would you|Why (?:does|do|did)|Explain|Please)\b"
    r"[^\n?]{0,300}\?"
)
# an invented grader's or teacher's turn after the answer ("Great job, …! Your reasoning
# process and answer are correct."): another speaker, not the model's answer
_FEEDBACK = re.compile(
    r"[.!?$\n][ \t]*(?P<at>(?=(?:Great|Good|Nice|Excellent|Well|Perfect|Yes|Your|your)\b)"
    r"(?:(?:Great|Good|Nice|Excellent)[ \t]+(?:job|work)|Well[ \t]+done)\b"
    r"|(?:(?:Great|Good|Nice|Excellent|Perfect|Yes)[!,.]?[ \t]+)?[Yy]our[ \t]+(?:reasoning|answer"
    r"|solution|response|work|explanation|calculation)s?\b[^.\n]{0,60}?\b(?:is|are|was|were)"
    r"[ \t]+(?:correct|right|wrong|incorrect)\b)"
)
# a restated system prompt (R1-Zero's): the model starts a conversation of its own
_SYSTEM_PROMPT = re.compile(
    r"A conversation between User and Assistant|The User asks a question,? and the Assistant"
    r"|(?:reasoning process|answer) (?:(?:is|are) )?enclosed (?:within|in)\b"
    r"|<\s*think\s*>\s*(?:and|or)\s*<\s*answer\s*>",
    re.IGNORECASE,
)
_MAX_MARKERS = 12
"""Continuation markers looked at (each one reads the text before it: bounded work)."""
_MAX_PHRASES = 8
"""Answer phrases looked at, from the last (each one reads its paragraph)."""
_TOKEN = re.compile(r"\S+")
_LATEX_BITS = re.compile(r"\$[^$]*\$|\\[A-Za-z]+|\\\(|\\\)")
_THINK_END = re.compile(r"<\s*/\s*think\s*>")


def _blank(m: re.Match[str]) -> str:
    return " " * len(m.group(0))


# an amount in two units: "12 dollars and 50 cents" is one value, 12.50 dollars
_DOLLARS_AND_CENTS = re.compile(
    r"(?<![\d.,])(\d+)[ \t]*dollars?[ \t]+and[ \t]+(\d{1,2})[ \t]*cents?\b", re.IGNORECASE
)


def _one_amount(m: re.Match[str]) -> str:
    """``12 dollars and 50 cents`` as ``12.50 dollars`` padded to the same length (offsets
    kept)."""
    amount = f"{m.group(1)}.{int(m.group(2)):02d} dollars"
    return amount + " " * (len(m.group(0)) - len(amount))


def answer_region(response: str) -> tuple[str, int, int]:
    """Blank chat-template debris and find where the final answer may be (module docstring).

    Args:
        response: the model's response.

    Returns:
        ``(text, start, end)``: ``text`` is the response with debris, GSM8K calculator
        annotations (``<<48/2=24>>``) and parenthesized labels between values (``120
        (pushups) + 40``) replaced by spaces (same length, same offsets); the answer is
        searched in ``text[start:end]``.
    """
    text = _ANNOTATION.sub(_blank, _DEBRIS.sub(_blank, response))
    text = _ENUMERATOR.sub(_blank, _LABEL.sub(_blank, text))
    text = _DOLLARS_AND_CENTS.sub(_one_amount, text)
    end = len(text)
    for token in _TURN_TOKEN.finditer(response):
        if text[: token.start()].strip():
            end = token.start()
            break
    turns = list(_NEW_TURN.finditer(text, 0, end))
    markers = sorted(
        [
            (m.start(), _answered)
            for pattern in (_SYSTEM_PROMPT, _NEW_PROBLEM, _FOLLOW_UP)
            for m in pattern.finditer(text, 0, end)
        ]
        + [(m.start(), _answered) for m in turns]
        + [(m.start("at"), _answered) for m in _FEEDBACK.finditer(text, 0, end)]
        + [(at, _explicit_or_concluded) for at in _degenerate(text, 0, end)]
    )
    text = _user_lines_blanked(text, end, turns[:_MAX_MARKERS])
    for at, answered in markers[:_MAX_MARKERS]:  # each check reads the text before it
        if at > 0 and answered(text, 0, at):
            end = at  # a continuation after the answer: the answer is the one before it
            break
    start = 0
    think = None
    for think in _THINK_END.finditer(text, 0, end):  # noqa: B007 - the last one
        pass
    if think is not None:
        after = _explicit(text, think.end(), end)
        drafts = _explicit(text, 0, think.start())
        if after or (not drafts and re.search(r"\d", text[think.end() : end])):
            start = think.end()  # the reasoning's boxes are drafts
    return text, start, end


_ASSISTANT_TURN = re.compile(
    r"(?:^|(?<=\n))[ \t]*(?:#{1,4}[ \t]*)?(?:\*\*)?(?:[Aa]ssistant|ASSISTANT|助手)(?:\*\*)?"
    r"[ \t]*[:：]"
)


def _user_lines_blanked(text: str, end: int, turns: list[re.Match[str]]) -> str:
    """``text`` with each invented user turn (``turns``: matches of ``_NEW_TURN``) that an
    assistant turn answers blanked, from ``User:`` to ``Assistant:`` (same length): the
    user's words are never the model's answer ("User: Joe bought 6 more games. How many?"
    gives no 6)."""
    for k, turn in enumerate(turns):
        stop = turns[k + 1].start() if k + 1 < len(turns) else end
        reply = _ASSISTANT_TURN.search(text, turn.end(), min(stop, turn.end() + 2000))
        if reply is not None:
            text = (
                text[: turn.start()] + " " * (reply.start() - turn.start()) + text[reply.start() :]
            )
    return text


def _degenerate(text: str, start: int, end: int) -> list[int]:
    """Where a Latin-script response degenerates into garbage: the first of three tokens
    within twenty that hold letters of other scripts (``P唑!``, ``Brea`ثم``, ``俦清洗([``),
    as a continuation marker. A response that opens in another script is never cut."""
    if not _latin(text, start):
        return []  # a response in another script (Chinese math mixes in Latin by nature)
    mixed: list[tuple[int, int, int]] = []  # (token index, start, end)
    for k, m in enumerate(_TOKEN.finditer(text, start, end)):
        token = _LATEX_BITS.sub("", m.group(0))
        if any(c.isalpha() and ord(c) > 0x24F for c in token):
            mixed.append((k, m.start(), m.end()))
            if len(mixed) >= 3 and mixed[-1][0] - mixed[-3][0] < 20:
                if _explicit(text, mixed[-3][2], mixed[-2][1]) and not _explicit(
                    text, mixed[-2][1], end
                ):
                    # one stray token, then the response's last explicit answer ("theלין …
                    # the final answer is \boxed{…}"), then garbage: it starts after the answer
                    del mixed[-3]
                    continue
                break
    else:
        return []
    return [mixed[-3][1]]


def _latin(text: str, start: int = 0) -> bool:
    """A response in Latin script with letters of other scripts in it (so it may degenerate);
    one that opens in another script is not."""
    if text.isascii():
        return False
    opening = [c for c in text[start : start + 600] if c.isalpha()]
    return sum(ord(c) > 0x24F for c in opening) <= 0.1 * max(len(opening), 1)


def _explicit(text: str, start: int, end: int) -> bool:
    """``text[start:end]`` gives an explicit answer with a value: a closed box, ``#### n``, an
    answer tag or phrase followed by a number."""
    try:
        boxes = _boxes(text, start, end) if _BOX.search(text, start, end) else []
    except UnclosedBoxError:
        return False  # cut off inside a box: the answer was never written out
    return bool(boxes) or _EXPLICIT.search(text, start, end) is not None


def _explicit_or_concluded(text: str, start: int, end: int) -> bool:
    """An explicit answer in ``text[start:end]``, or a conclusion with a value just before
    ``end`` ("Putting it all together, the simplified expression is: $$15x - 80$$"): the
    response answered before it degenerated."""
    if _explicit(text, start, end):
        return True
    lo = max(start, end - 600)
    sentences = [
        (a, b)
        for a, b in _sentences(text, lo, end, _segments(text, lo, end, []))
        if text[a:b].strip()
    ]
    if not sentences:
        return False
    a, b = sentences[-1]
    body = _TAG_FRAGMENT_END.sub("", _TAGS.sub(" ", text[a:b])).rstrip(" \t\n.")
    last_word = re.search(r"([A-Za-z]+)$", body)
    if body.endswith(":") or (last_word is not None and last_word.group(1) in _COPULAS):
        return False  # "Thus, the value of \(11 \# 5\) is": the value was never written
    return _CONCLUSION.match(text, a, b) is not None and _statement(text, a, b, _Want()) is not None


def _answered(text: str, start: int, end: int) -> bool:
    """Some lenient rule finds an answer in ``text[start:end]``."""
    want = _Want()
    for rule in _RULES_OF["lenient"]:
        try:
            if _FINDERS[rule](text, start, end, want) is not None:
                return True
        except (UnclosedBoxError, _NoAnswerError):
            return False
    return False


# ---- boxes ------------------------------------------------------------------------------

_BOX = re.compile(r"\\(?:boxed|fbox)(?![A-Za-z])")
_FINAL_HEADING = re.compile(r"final\s+answer", re.IGNORECASE)
_BOX_TOKEN = re.compile(r"[^\s$]+")
# what may stand between boxes that state one answer together: "\boxed{3}, \boxed{4}"
_BOX_JOIN = re.compile(
    r"^(?:\s|\$|\\[,;!]|\\quad|\\qquad|,|;|&|\\text\{\s*(?:and|or)\s*\}|\band\b|\bor\b)*$"
)
_HEDGE_JOIN = re.compile(r"\bor\b|\\text\{\s*or\s*\}")


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


def _stripped(raw: str, start: int) -> tuple[int, str]:
    """``raw`` (found at ``start``) without surrounding whitespace, its offset moved to match."""
    return start + len(raw) - len(raw.lstrip()), raw.strip()


def _boxes(text: str, start: int, end: int) -> list[tuple[int, int, str]]:
    """``(box start, content start, content)`` of the boxes in ``text[start:end]`` (not boxes
    inside boxes).

    Raises:
        UnclosedBoxError: the last box is never closed.
    """
    found: list[tuple[int, int, str]] = []
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
                    partial = "".join(text[i + 1 : end].split())
                    if found and "".join(found[-1][2].split()).startswith(partial):
                        break  # cut off while repeating the last box: that box stands
                    raise UnclosedBoxError("the last \\boxed{ is never closed")
                continue
            at, part = _stripped(text[i + 1 : close], i + 1)
            covered = close + 1
        else:
            token = _BOX_TOKEN.match(text, i, end)
            if token is None:
                continue
            at, part = i, token.group(0)
            covered = token.end()
        if part.strip(" ?!.,;:_*~`'\""):  # \boxed{?}, \boxed{}: no value
            found.append((m.start(), at, part))
    if len(found) > 1 and _garbage(found[-1][2]):
        found.pop()  # a box of garbage text after a real one: the real one stands
    return found


def _garbage(part: str) -> bool:
    """Text that is no answer: prose, or letters of several scripts (degenerate output)."""
    foreign = sum(1 for c in part if ord(c) > 0x2FF and c.isalpha())
    return foreign > 2 or (_is_prose(part) and len(part.split()) > 4)


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


def _boxed(text: str, start: int, end: int, want: _Want) -> Extraction | None:
    boxes = _boxes(text, start, end)
    if not boxes:
        return None
    heading = None
    for heading in _FINAL_HEADING.finditer(text, start, end):  # noqa: B007 - the last one
        pass
    if heading is not None:
        boxes = [b for b in boxes if b[0] >= heading.end()] or boxes
    # the last box and the boxes joined to it by connectors only
    k = len(boxes) - 1
    hedge = False
    while k > 0:
        between = text[boxes[k - 1][1] + len(boxes[k - 1][2]) + 1 : boxes[k][0]]
        if not _BOX_JOIN.match(between):
            break
        hedge = hedge or _HEDGE_JOIN.search(between) is not None
        k -= 1
    parts = _distinct([(at, part) for _, at, part in boxes[k:]])
    if want.several and len(parts) == 1:  # a list gold: values boxed in separate places
        parts = _distinct([(at, part) for _, at, part in boxes])
        hedge = False
    return Extraction.of(parts, "boxed", hedge=hedge and len(parts) > 1 and not want.several)


# ---- answer tags, #### ------------------------------------------------------------------

_TAG_OPEN = re.compile(r"<\s*answer\s*>|(?:^|(?<=\n))[ \t]*answer[ \t]*>", re.IGNORECASE)
# "</answer>", "</ answer >", "</answers>", "</answer" cut off: the slot's end
_TAG_CLOSE = re.compile(r"<\s*/\s*answers?(?![A-Za-z])(?:\s*>)?", re.IGNORECASE)
# a tag named in a sentence, not opened: "the answer enclosed within the <answer> tags",
# "the numbers in the < think > and < answer > tags", "a <answer> section"
_MENTION_BEFORE = re.compile(
    r"(?:\b(?:the|a|an|and|or|between)|<\s*/?\s*think\s*>\s*(?:and|or|,))\s*$", re.IGNORECASE
)
_MENTION_AFTER = re.compile(r"\s*(?:tags?|sections?|blocks?|format)\b", re.IGNORECASE)


def _tag_opens(text: str, start: int, end: int) -> list[re.Match[str]]:
    """The answer tags opened in ``text[start:end]``, without tags named in a sentence."""
    return [
        m
        for m in _TAG_OPEN.finditer(text, start, end)
        if _MENTION_BEFORE.search(text, max(0, m.start() - 16), m.start()) is None
        and _MENTION_AFTER.match(text, m.end()) is None
    ]


# the prompt template's placeholder copied into the tag: "<answer> answer here </answer>"
_PLACEHOLDER = re.compile(
    r"\W*(?:<\s*)?(?:insert\s+(?:the\s+|your\s+)?)?(?:final\s+|your\s+)?answer\s+(?:goes\s+)?"
    r"here\W*$",
    re.IGNORECASE,
)
_GSM8K = re.compile(r"####[ \t]*([^\n]*)")


def _answer_tag(text: str, start: int, end: int, want: _Want) -> Extraction | None:
    opens = _tag_opens(text, start, end)
    if not opens:
        return None
    opened = opens[-1]
    close = _TAG_CLOSE.search(text, opened.end(), end)
    hi = close.start() if close is not None else end
    lo = opened.end()
    if close is None and (cut := _TAG_FRAGMENT_END.search(text, lo, hi)) is not None:
        hi = cut.start()  # "<answer> 42 </": the closing tag cut off
    if not any(c.isalnum() for c in text[lo:hi]):
        return None  # an empty tag: lenient goes on to the next rule, a strict format stops
    if _PLACEHOLDER.match(text, lo, hi):
        # the template's placeholder: the slot is empty. An answer the model gave explicitly
        # elsewhere (a box, a phrase) stands; prose is not guessed from
        for rule in ("boxed", "gsm8k", "answer_is"):
            outside = _FINDERS[rule](text, start, opened.start(), want)
            if outside is not None:
                return outside
        raise _NoAnswerError("the answer tag holds the template's placeholder")
    for rule in ("boxed", "answer_is", "whole", "leading", "final_statement"):
        try:
            found = _FINDERS[rule](text, lo, hi, want)
        except UnclosedBoxError:
            if close is not None:
                raise
            return None  # a tag and a box both cut off: the boxes before them may stand
        if found is not None:
            return Extraction(found.text, "answer_tag", found.start, found.parts, found.hedge)
    return None  # no value in the tag ("Skipped here", "_/_"): lenient goes on


def _gsm8k(text: str, start: int, end: int, want: _Want) -> Extraction | None:
    gsm = None
    for gsm in _GSM8K.finditer(text, start, end):  # noqa: B007 - the last one
        pass
    if gsm is None or not any(c.isdigit() for c in gsm.group(1)[: end - gsm.start(1)]):
        return None  # "#### Fortueqy …": a heading, not an answer
    raw = gsm.group(1)[: end - gsm.start(1)]
    return Extraction.of([_stripped(raw, gsm.start(1))], "gsm8k")


# ---- math segments and runs -------------------------------------------------------------

_SEGMENT = re.compile(
    r"(?<!\\)\$\$(.+?)(?<!\\)\$\$|(?<!\\)\$(.+?)(?<!\\)\$|\\\((.+?)\\\)|\\\[(.+?)\\\]", re.DOTALL
)
_COMMAND_ARG = re.compile(r"\\[A-Za-z]+\s*(?:\{[^{}]*\})?")
_WORD3 = re.compile(r"(?<![\\A-Za-z])[A-Za-z]{3,}(?![A-Za-z])")
_FUNCTION_WORDS = frozenset(
    [
        "sin",
        "cos",
        "tan",
        "cot",
        "sec",
        "csc",
        "log",
        "ln",
        "exp",
        "max",
        "min",
        "gcd",
        "lcm",
        "mod",
        "det",
        "lim",
        "arg",
        "deg",
        "dim",
        "ker",
    ]
)
_CODE_FENCE = re.compile(r"```")
_INLINE_CODE = re.compile(r"`[^`\n]+`")
_ANNOTATION = re.compile(r"<<[^<>\n]*>>")  # GSM8K calculator annotations: <<48/2=24>>
_SCALE = r"(?:hundred|thousand|million|billion|trillion)(?![A-Za-z])"
_NUMBER = re.compile(
    r"(?:\\?\$[ \t]?)?[-−]?(?:\d{1,3}(?:(?:,|\{,\}|,\\![ \t]?|\\,)\d{3})+(?!\d)"
    r"|\d{1,3}(?:[ \u00a0\u202f]\d{3})+(?![\d/])|\d+)(?:\.\d+)?"
    r"(?:[eE][+-]?\d+(?![A-Za-z]))?(?:[ \t]+\d+[ \t]*/[ \t]*\d+(?![\d.])|/\d+(?![\d.]))?"
    r"|(?:\\?\$[ \t]?)?[-−]?\.\d+"
)
_GLUED = re.compile(r"[A-Za-z]+(?:/[A-Za-z]+)?")
_ORDINAL = frozenset({"st", "nd", "rd", "th"})
_EXTRA_UNITS = frozenset(
    {"mb", "gb", "kb", "mph", "kmh", "cc", "am", "pm", "x", "k", "mg", "mm", "cm", "km", "ml"}
)
_OPERATORS = "+-*/=<>^!×÷·−≤≥≠≈→⇒|%√"
_OPERATOR_COMMANDS = frozenset(
    ["cdot", "times", "div", "pm", "mp", "le", "ge", "leq", "geq", "ne", "neq", "approx", "to"]
)
_TEXT_LIKE = frozenset(
    ["text", "textbf", "textit", "textrm", "textnormal", "mathrm", "mathbf", "mbox"]
)
# LaTeX commands that carry no value of their own
_STRUCTURE = frozenset(
    [
        "text",
        "textbf",
        "textit",
        "textrm",
        "textnormal",
        "mathrm",
        "mathbf",
        "mbox",
        "quad",
        "qquad",
        "left",
        "right",
        "displaystyle",
        "label",
        "tag",
        "hline",
        "hspace",
        "vspace",
        "newline",
        "cdots",
        "ldots",
        "dots",
        "therefore",
        "because",
        "implies",
        "Rightarrow",
        "Longrightarrow",
        "rightarrow",
        "to",
        "iff",
        "approx",
    ]
)
_CONSTANTS = "π∞"
_RELATION = re.compile(
    r"\\(?:Rightarrow|implies|Longrightarrow|therefore|to|longrightarrow|iff)(?![A-Za-z])"
    r"|[⇒→∴]|=>|-->?"
)
_CHAIN = re.compile(r"(?<![<>!\\])=(?!=)|\\approx(?![A-Za-z])|≈|\\equiv(?![A-Za-z])")
_CONNECT = re.compile(r"[ \t]*(?:,[ \t]*(?:(?:and|or)[ \t]+)?|[ \t]+(?:and|or)[ \t]+)")
_HEDGE = re.compile(
    r"^[\s,;]*(?:or\b|perhaps\b|maybe\b|possibly\b|alternatively\b|otherwise\b|but\s+it\s+"
    r"(?:could|might)\b|it\s+(?:could|might)\b)",
    re.IGNORECASE,
)
# a bound, not a value: "12 or more", "at 12 and up", "12 or so"
_BOUND = re.compile(
    r"[\s$*]*(?:or|and)\s+(?:more|less|fewer|greater|higher|lower|above|below|over|under|up"
    r"|so|thereabouts)\b",
    re.IGNORECASE,
)
_DANGLING = frozenset(
    [
        "the",
        "a",
        "an",
        "and",
        "or",
        "of",
        "to",
        "by",
        "with",
        "for",
        "we",
        "then",
        "that",
        "which",
        "from",
        "into",
        "as",
        "at",
        "in",
        "on",
        "so",
        "this",
        "these",
        "its",
        "their",
        "our",
        "let",
        "if",
        "because",
        "since",
    ]
)
_GLUED_UNIT = re.compile(
    r"(?<=\d)(?:k?g|mg|m?l|[kcm]?m|s|h|hrs?|min|mph|lbs?|oz|ft|in|L|cm\^?[23]|m\^?[23]|USD|EUR)"
    r"(?![A-Za-z])"
)
_GLUED_UNIT_END = re.compile(
    r"(?<=\d)(?:k?g|mg|m?l|[kcm]?m|s|h|hrs?|min|mph|lbs?|oz|ft|L|USD|EUR)$"
)
_TIMES_X = re.compile(r"(?<=[\d)])\s+[xX]\s+(?=[\d$(])|(?<=\d)[xX](?=\d)")
# plain numbers joined by arithmetic: a computation not carried out (at the end of a chain)
_UNEVALUATED = re.compile(
    r"[-−]?\\?\$?[\d.,]+(?:\s*(?:[-+*×÷−·]|\\times|\\div|\\cdot|\s[xX]\s)\s*\\?\$?[\d.,]+)+"
)
# list numbering: "1. First …" at a line start, "1) Total …" anywhere
_ENUMERATOR = re.compile(
    r"(?:^|(?<=\n))[ \t]*\d{1,2}\.(?=[ \t]+[A-Z*])|(?:^|(?<=[\s>]))\d{1,2}\)(?=[ \t]+[A-Z*])"
)
_ASIDE = re.compile(r"[*_(\s]*(?:note|remark|nb|p\.s)\b[*_:,\s]", re.IGNORECASE)
_CONCLUSION = re.compile(
    r"\s*(?:therefore|thus|hence|finally|in conclusion|consequently|the (?:final )?answer"
    r"|putting (?:it )?all together|in summary|to summarize)\b",
    re.IGNORECASE,
)
_JUNK_END = re.compile(r"(?:^|\s)(?:[_*>#`~|/\\-]{2,}|[>*#])$")
_HYPHEN_WORD = re.compile(r"-[A-Za-z]{2,}")
# a parenthesized label between values: "120 (pushups) + 40 (squats)", "$5000 (initial)"
_LABEL = re.compile(r"(?<=[\d$}\s])\((?:[A-Za-z][A-Za-z'.-]+)(?:[ \t]+[A-Za-z'.-]+)*\)")
_TAGS = re.compile(
    r"</?[A-Za-z][A-Za-z_:-]*\s*>|<\s*/\s*[A-Za-z][A-Za-z_:-]*\s*>|<\s*(?:answer|think)\s*>",
    re.IGNORECASE,
)
# a tag cut off at the end ("= 20 </", "</ans"): no operator left dangling
_TAG_FRAGMENT_END = re.compile(r"<\s*/\s*[A-Za-z_]*$|<\s*(?:answer|think|ans)[A-Za-z_]*$", re.I)
_SENTENCE_END = re.compile(r"[.!?](?=\s|$)|\n")
_PARAGRAPH = re.compile(r"\n[ \t]*\n")
_MONEY = re.compile(r"\$(?=\d)(?!\d[\d.,]*\$)")  # "$5 an hour", not the math "$4$"


@dataclass(frozen=True)
class _Item:
    """A math item of a sentence: a segment's content or a run, with its span."""

    start: int
    end: int
    segment: bool


def _is_prose(content: str) -> bool:
    """Words in a ``$…$`` (``$5 an hour, so she made $``): money around prose, not math."""
    bare = _COMMAND_ARG.sub(" ", content)
    return any(w.group(0).lower() not in _FUNCTION_WORDS for w in _WORD3.finditer(bare))


def _code_spans(text: str, lo: int, hi: int) -> list[tuple[int, int]]:
    """Fenced code blocks (an unclosed fence runs to ``hi``) and inline code."""
    spans = []
    fences = [m.start() for m in _CODE_FENCE.finditer(text, lo, hi)]
    if len(fences) % 2 and not text[fences[-1] + 3 : hi].strip():
        fences.pop()  # a stray fence at the very end ("= $694.```"): no code after it
    for k in range(0, len(fences), 2):
        close = fences[k + 1] + 3 if k + 1 < len(fences) else hi
        spans.append((fences[k], close))
    for m in _INLINE_CODE.finditer(text, lo, hi):
        if not any(a <= m.start() < b for a, b in spans):
            spans.append((m.start(), m.end()))
    return sorted(spans)


def _segments(text: str, lo: int, hi: int, code: list[tuple[int, int]]) -> list[_Item]:
    """Math segments (``$…$``, ``$$…$$``, ``\\(…\\)``, ``\\[…\\]``) outside code; a ``$…$``
    holding prose is money, not math."""
    out = []
    i = lo
    while (m := _SEGMENT.search(text, i, hi)) is not None:
        group = next(g for g in range(1, 5) if m.group(g) is not None)
        i = m.end()
        if any(a <= m.start() < b for a, b in code):
            i = m.start() + 1
            continue
        if (
            m.group(0).startswith("$")
            and _MONEY.match(text, m.start())
            and _is_prose(m.group(group))
        ):
            i = m.start() + 1
            continue
        if m.group(0).startswith("$") and _is_prose(m.group(group)):
            i = m.start() + 1
            continue
        out.append(_Item(m.start(group), m.end(group), True))
    return out


def _skip_group(text: str, i: int, hi: int) -> int:
    """After ``^``/``_`` or a command: the end of its braced/bracketed arguments."""
    while i < hi:
        j = i
        while j < hi and text[j] == " ":
            j += 1
        if j < hi and text[j] == "{":
            close = _braced(text, j, hi)
            if close is None:
                return hi
            i = close + 1
        elif j < hi and text[j] == "[" and text[i - 5 : i] == "\\sqrt":
            close = text.find("]", j, hi)
            i = hi if close < 0 else close + 1
        else:
            return i
    return i


def _run_end(text: str, i: int, hi: int) -> tuple[int, bool]:
    """The end of the math run starting at ``i`` and whether it holds a value (a number or a
    LaTeX command). Numbers inside a command's arguments, an exponent or a subscript belong
    to that command or power; a ``:`` after an equation ends the run (``=8:85``)."""
    j = i
    value = False
    equation = False
    depth = 0
    last_kind = ""
    while j < hi:
        ch = text[j]
        if ch in " \t":
            k = j
            while k < hi and text[k] in " \t":
                k += 1
            if k >= hi:
                break
            nxt = text[k]
            times = (
                nxt in "xX"
                and last_kind == "num"
                and k + 1 < hi
                and text[k + 1] in " \t"
                and _NUMBER.match(text, k + 2) is not None
            )
            if times:
                j = k + 1
                last_kind = "op"
                continue
            if nxt.isalpha() and last_kind in ("num", "var", "close"):
                # a word after a value ends the run ("12 apples"); an operator continues it
                if not (k + 1 < hi and not text[k + 1].isalpha() and nxt not in "aAI"):
                    break
                if last_kind != "op":
                    break
            if nxt.isdigit() and last_kind in ("num", "var", "close") and depth <= 0:
                break  # "5 8": two numbers, not one
            if not (nxt.isdigit() or nxt in _OPERATORS or nxt in "\\([{)]}$.-:" or nxt.isalpha()):
                break
            j = k
            continue
        num = _NUMBER.match(text, j, hi)
        if num is not None and (num.group(0)[0] in "$\\.-−" or ch.isdigit()):
            if last_kind in ("num", "var") and not text[j - 1 : j].isspace() and ch == "$":
                break
            j = num.end()
            scale = re.compile(rf"[ \t]+{_SCALE}").match(text, j, hi)
            if scale is not None:
                j = scale.end()
            glued = _GLUED.match(text, j, hi)
            if glued is not None:
                word = glued.group(0).lower()
                if (
                    len(word) <= 2
                    and word.islower()
                    and word not in _EXTRA_UNITS
                    and (word not in _ORDINAL and canonical_unit(word) is None)
                ):
                    j = glued.end()  # 2x, 2xy: a coefficient
                elif (
                    word in _ORDINAL
                    or word.rstrip("s") in _EXTRA_UNITS
                    or canonical_unit(word.split("^")[0].split("/")[0]) is not None
                    or "/" in word
                ):
                    j = glued.end()  # 12kg, 350ml, 5th, 3pm, 20km/h: a unit
                else:  # a word with a digit inside (7ZK, 3D): the run ends before it
                    return (num.start(), value) if num.start() > i else (i, False)
            if j < hi and text[j] == "%":
                j += 1
            value = True
            last_kind = "num"
            continue
        if ch == "\\":
            m = re.compile(r"\\(?:[A-Za-z]+\*?|[{}%$,;!| ])").match(text, j, hi)
            if m is None:
                break
            name = m.group(0)
            if name in ("\\boxed", "\\fbox", "\\text", "\\textbf", "\\mathrm", "\\quad") and (
                last_kind == "" or name in ("\\boxed", "\\fbox")
            ):
                break
            if name in ("\\(", "\\)", "\\[", "\\]"):
                break
            if name in ("\\{", "\\}"):
                depth += 1 if name == "\\{" else -1
            if name in ("\\begin", "\\end", "\\\\"):
                break
            after = m.end()
            while after < hi and text[after] == " ":
                after += 1
            if name[1:] in _TEXT_LIKE and text[after : after + 1] != "{":
                break  # "\text\${/eq}": debris, not a unit
            if name == "\\$" and not text[m.end() : m.end() + 1].isdigit():
                break
            j = _skip_group(text, m.end(), hi)
            if name not in ("\\,", "\\;", "\\!", "\\ ", "\\quad", "\\qquad"):
                value = value or _command_value(name[1:], j > m.end())
                operator = not name[1:].isalpha() or name[1:] in _OPERATOR_COMMANDS
                last_kind = "op" if operator else "close"
            continue
        if ch in "^_":
            k = j + 1
            while k < hi and text[k] == " ":
                k += 1
            if k < hi and text[k] == "{":
                close = _braced(text, k, hi)
                j = hi if close is None else close + 1
            elif k < hi and text[k] == "\\":
                m = re.compile(r"\\[A-Za-z]+").match(text, k, hi)
                j = _skip_group(text, m.end(), hi) if m is not None else k + 1
            elif k < hi and text[k].isdigit():
                while k < hi and text[k].isdigit():
                    k += 1
                j = k
            elif k < hi and (text[k].isalpha() or text[k] in "+-*"):
                j = k + 1
            else:
                break
            last_kind = "close"
            continue
        if ch == "," and depth > 0:
            j += 1  # inside a tuple, interval or set: (1, 2), [0, 1)
            last_kind = "op"
            continue
        if ch == ":":
            if equation or last_kind not in ("num", "close"):
                break
            nxt = text[j + 1 : j + 2]
            if not (nxt.isdigit() or (nxt == " " and text[j + 2 : j + 3].isdigit())):
                break
            j += 1
            last_kind = "op"
            continue
        if ch in _OPERATORS or ch in "()[]{}":
            depth += (ch in "([{") - (ch in ")]}")
            if ch == "=":
                equation = True
            if ch in ")]}" or (ch == "!" and last_kind in ("num", "close")):
                last_kind = "close"
            else:
                last_kind = "op"
            j += 1
            continue
        if ch in _CONSTANTS:
            j += 1
            value = True
            last_kind = "close"
            continue
        if ch.isalpha():
            if j + 1 < hi and text[j + 1].isalpha():
                break  # a word
            if j > i and text[j - 1].isalpha():
                break
            j += 1
            last_kind = "var"
            continue
        break
    return j, value


def _runs(text: str, lo: int, hi: int) -> list[_Item]:
    """The math runs of ``text[lo:hi]`` (outside segments and code: the caller's span)."""
    out = []
    i = lo
    while i < hi:
        ch = text[i]
        starts = (
            ch.isdigit()
            or ch == "\\"
            or (ch in "$-.−√" and i + 1 < hi and (text[i + 1].isdigit() or text[i + 1] in "(π\\"))
            or ch in _CONSTANTS
            or (ch in "([" and i + 1 < hi and (text[i + 1].isalnum() or text[i + 1] in "-\\"))
            or (
                ch.isalpha()
                and not (i > lo and text[i - 1].isalpha())
                and not (i + 1 < hi and text[i + 1].isalpha())
            )
        )
        if not starts or (ch.isalnum() and i > lo and text[i - 1].isalnum()) or _scripted(text, i):
            i += 1
            continue
        end, value = _run_end(text, i, hi)
        if end <= i:
            i = max(i + 1, end)
            while i < hi and text[i].isalnum():
                i += 1
            continue
        stop = end
        while stop > i and text[stop - 1] in " \t.,;:=+-*/<>^_\\":
            stop -= 1
        adjective = _HYPHEN_WORD.match(text, stop, hi) is not None  # a 5-digit number
        if value and stop > i and not (adjective and _NUMBER.fullmatch(text, i, stop)):
            out.append(_Item(i, stop, False))
        i = end
    return out


def _scripted(text: str, i: int) -> bool:
    """``text[i]`` is inside an exponent or subscript (``cm^2``, ``10^{23}``, ``x_1``)."""
    j = i - 1
    while j >= 0 and (text[j].isdigit() or text[j] == " "):
        j -= 1
    return j >= 0 and (text[j] in "^_" or (text[j] == "{" and j > 0 and text[j - 1] in "^_"))


def _items(text: str, lo: int, hi: int, segments: list[_Item]) -> list[_Item]:
    """Segments and runs of ``text[lo:hi]`` in order (runs only between segments)."""
    out: list[_Item] = []
    i = lo
    first = bisect.bisect_left(segments, lo, key=lambda seg: seg.end)
    for seg in segments[first:]:
        if seg.start >= hi:
            break
        if seg.end <= lo:
            continue
        opener = seg.start - 1
        while opener > lo and text[opener] in "$([\\":
            opener -= 1
        out += _runs(text, i, max(i, opener + 1))
        out.append(seg)
        i = seg.end
        while i < hi and text[i] in "$)]\\":
            i += 1
    out += _runs(text, i, hi)
    return [item for item in out if _has_value(text, item)]


_VALUE_SYMBOLS = frozenset(
    [
        "alpha",
        "beta",
        "gamma",
        "delta",
        "epsilon",
        "varepsilon",
        "zeta",
        "eta",
        "theta",
        "vartheta",
        "iota",
        "kappa",
        "lambda",
        "mu",
        "nu",
        "xi",
        "pi",
        "varpi",
        "rho",
        "varrho",
        "sigma",
        "varsigma",
        "tau",
        "upsilon",
        "phi",
        "varphi",
        "chi",
        "psi",
        "omega",
        "Gamma",
        "Delta",
        "Theta",
        "Lambda",
        "Xi",
        "Pi",
        "Sigma",
        "Upsilon",
        "Phi",
        "Psi",
        "Omega",
        "infty",
        "emptyset",
        "varnothing",
        "ell",
        "hbar",
        "aleph",
        "imath",
        "jmath",
        "angle",
        "triangle",
    ]
)
_COMMAND = re.compile(r"\\([A-Za-z]+)(\s*[{\[])?")


def _command_value(name: str, argument: bool) -> bool:
    """A LaTeX command that may be (part of) a value: one with an argument (``\\frac{1}{2}``,
    ``\\mathbb{R}``), a symbol (``\\pi``, ``\\infty``, ``\\theta``, ``\\R``) or a function
    (``\\sin x``); never a bare unknown command of degenerate text (``\\matrix``,
    ``\\checkmark``) nor a structure command (``\\quad``, ``\\left``)."""
    if not name.isalpha() or name in _STRUCTURE:
        return False
    return (
        argument
        or name in _VALUE_SYMBOLS
        or name in _FUNCTION_WORDS
        or name.lstrip("a") in _FUNCTION_WORDS  # \arcsin, \arctan
        or (len(name) == 1 and name.isupper())
    )


def _has_value(text: str, item: _Item) -> bool:
    """An item that may state a value: a number, a constant, a LaTeX command that may be a
    value (:func:`_command_value`), or a segment that is more than a variable's name (``$R$``
    in prose names a quantity, states none)."""
    content = text[item.start : item.end]
    return (
        any(c.isdigit() or c in _CONSTANTS for c in content)
        or any(
            _command_value(m.group(1), m.group(2) is not None) for m in _COMMAND.finditer(content)
        )
        or (
            item.segment
            and any(c.isalnum() for c in _COMMAND.sub("", content))
            and not is_name(content)
        )
    )


def _chain_value(text: str, item: _Item, keep_equation: bool = False) -> tuple[int, int]:
    """The span of the value an item states: the end of its chain (module docstring).

    ``lhs = rhs`` stays whole when ``lhs`` names the value (``y = 8``), when ``rhs`` is not a
    constant (``y = 2x + 3``) or when ``keep_equation`` (the gold is an equation); otherwise
    the constant ``rhs`` is the value (``m + n = 17`` gives 17, ``18 \\div 3 = 6`` gives 6).
    """
    lo, hi = _unwrapped(text, item.start, item.end)
    arrow = None
    for arrow in _RELATION.finditer(text, lo, hi):  # noqa: B007 - the last one
        pass
    if arrow is not None and text[arrow.end() : hi].strip():
        lo = arrow.end()
    sides: list[tuple[int, int, str]] = []
    depth = 0
    at = lo
    i = lo
    while i < hi:
        ch = text[i]
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif depth == 0:
            m = _CHAIN.match(text, i, hi)
            if m is not None:
                sides.append((at, i, ""))
                kind = "approx" if "=" not in m.group(0) else "eq"
                sides[-1] = (sides[-1][0], sides[-1][1], kind)
                at = m.end()
                i = m.end()
                continue
        i += 1
    sides.append((at, hi, ""))
    sides = [(a, b, k) for a, b, k in sides if text[a:b].strip()]
    if len(sides) == 1 and sides[0][1] == hi and not text[lo : sides[0][0]].strip(" \t=≈"):
        return _trim(text, sides[0][0], hi)  # "the answer is $= 5$": a leading "=" only
    if len(sides) <= 1:
        return _trim(text, lo, hi)
    approx = next((k for k, side in enumerate(sides) if side[2] == "approx"), None)
    if approx is not None:
        exact = sides[approx]  # "= \frac{\sqrt3}{2} \approx 0.87": the exact value stated
        if not (approx == 0 and _name(text[exact[0] : exact[1]])):
            return _trim(text, exact[0], exact[1])
    last = sides[-1]
    if _UNEVALUATED.fullmatch(text[last[0] : last[1]].strip()):
        return lo, lo  # "… = 9*3+5*11+3*25": a chain that stops before its value
    if len(sides) == 2:
        lhs = text[sides[0][0] : sides[0][1]].strip()
        rhs = text[last[0] : last[1]]
        keep = keep_equation or _letters(rhs) or _name(lhs)
        if keep and (_name(lhs) or _letters(lhs)):
            return _trim(text, sides[0][0], last[1])  # y = 8, \angle C = 40^\circ, y = 2x + 3
    return _trim(text, last[0], last[1])


def _trim(text: str, lo: int, hi: int) -> tuple[int, int]:
    while lo < hi and text[lo] in " \t\n":
        lo += 1
    while hi > lo and text[hi - 1] in " \t\n.,;:\\":
        hi -= 1
    return _balanced(text, lo, hi)


def _balanced(text: str, lo: int, hi: int) -> tuple[int, int]:
    """The span without an unmatched bracket at either end (``7 *[``, ``( 8+20``)."""
    for _ in range(4):
        part = text[lo:hi]
        opened = sum(part.count(c) for c in "([{") - sum(part.count(c) for c in ")]}")
        if opened > 0 and part[:1] in "([{" and not _closes_at_end(part):
            lo += 1
        elif opened > 0 and part.rstrip(" *+-/=")[-1:] in "([{":
            hi = lo + len(part.rstrip(" *+-/=")) - 1
        elif opened < 0 and part[-1:] in ")]}":
            hi -= 1
        else:
            break
        while lo < hi and text[lo] in " \t":
            lo += 1
        while hi > lo and text[hi - 1] in " \t*+-/=":
            hi -= 1
    return lo, hi


def _closes_at_end(part: str) -> bool:
    depth = 0
    for k, ch in enumerate(part):
        depth += (ch in "([{") - (ch in ")]}")
        if depth == 0:
            return k == len(part) - 1
    return False


def _unwrapped(text: str, lo: int, hi: int) -> tuple[int, int]:
    """The span without parentheses that enclose a whole statement: ``(8+20=28)`` is
    ``8+20=28`` (a tuple ``(-3, 0)`` stays)."""
    lo, hi = _trim(text, lo, hi)
    while (
        hi - lo > 2
        and text[lo] == "("
        and text[hi - 1] == ")"
        and _closes_at_end(text[lo:hi])
        and _CHAIN.search(text, lo, hi) is not None
    ):
        lo, hi = _trim(text, lo + 1, hi - 1)
    return lo, hi


def _name(lhs: str) -> bool:
    """A variable or a named quantity (``answer.is_name``): its value is what ``lhs = rhs``
    states."""
    return is_name(lhs)


def _letters(text: str) -> bool:
    """Letters outside LaTeX commands, ``x`` as a product (``0.2 x 50``, ``13x7``) and units
    glued to numbers (``1000g``, ``350ml``)."""
    text = _TIMES_X.sub("*", text)
    text = _GLUED_UNIT.sub("", text)
    return any(c.isalpha() for c in re.sub(r"\\[A-Za-z]+", "", text))


def _arithmetic(text: str) -> bool:
    return not _letters(text)


def _statement(text: str, lo: int, hi: int, want: _Want) -> Extraction | None:
    """The final statement of ``text[lo:hi]`` (rules 5 and 6 of the module docstring)."""
    text = text[:lo] + _LABEL.sub(_blank, _TAGS.sub(_blank, text[lo:hi])) + text[hi:]
    code = _code_spans(text, lo, hi)
    tail = max([b for _, b in code if b > lo and _fenced(text, _, b)] or [lo])
    tail_lo = max(lo, tail)
    if not text[tail_lo:hi].strip():
        return None
    segments = _segments(text, tail_lo, hi, code)
    if _unfinished(text, tail_lo, hi, segments):
        # cut off mid-sentence: only a conclusion just before the fragment still stands
        # ("Therefore, q - p = 7.\nThe"); any other value there is an intermediate one
        done = [(a, b) for a, b in _sentences(text, tail_lo, hi, segments)[:-1] if b < hi]
        done = [(a, b) for a, b in done if text[a:b].strip()]
        if not done or _CONCLUSION.match(text, done[-1][0], done[-1][1]) is None:
            return None
        hi = done[-1][1]
    inline = [(a, b) for a, b in code if a >= tail_lo]
    sentences = _sentences(text, tail_lo, hi, segments)
    last_sentence = True
    for s_lo, s_hi in reversed(sentences):
        body = text[s_lo:s_hi].strip().rstrip("\\ ")
        if not body:
            continue
        if last_sentence and body.endswith("?"):
            return None  # the response ends in a question: no statement
        final = last_sentence
        last_sentence = False
        if want.prompt and len(body) >= 20 and " ".join(body.split()) in want.prompt:
            continue  # the problem restated
        if _ASIDE.match(body):
            continue  # "Note: the recipe uses 3 eggs.": an aside after the answer
        items = [
            it
            for it in _items(text, s_lo, s_hi, segments)
            if not any(a <= it.start < b for a, b in inline) and not _restated(text, it, want)
        ]
        if not items and final and (count := _count_in_words(text, s_lo, s_hi)) is not None:
            return count  # "The graph of the parabola has two \( y \)-intercepts."
        if not items:
            continue
        if body.endswith("?"):
            return None  # "4 \\div 2 = ?": a question is no statement
        return _item_extraction(text, items, want)
    return None


_COUNT_WORDS = (
    "zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    "|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    "|eighty|ninety"
)
# one count in words, up to the millions: "two", "forty-five", "one thousand five hundred"
_COUNT_WORD = rf"(?:{_COUNT_WORDS})(?:-(?:{_COUNT_WORDS}))?"
_COUNT_PHRASE = (
    rf"{_COUNT_WORD}(?:[ \t]+(?:and[ \t]+)?(?:hundred|thousand|million|{_COUNT_WORD})\b)*"
)
# the verb before a count: a copula or "has", or any verb in the third person or the past
# ("needs three more cups", "raised one thousand five hundred dollars"); not the words ending
# like one ("plus two", "thus three", "times four", "its two")
_COUNT_VERB = (
    r"there[ \t]+(?:is|are|were|will[ \t]+be)|has|have|had|are|is|were|was"
    r"|bought|sold|got|made|spent|paid|ate|ran|took|gave|won|saw|found|drew|wrote|kept|left"
    r"|lost|built|caught|brought|held|sent|grew|threw|flew|rode|drove|read|put|cut"
    r"|(?!(?:plus|minus|thus|times|this|his|its|us|various|previous|less|across|unless|whereas"
    r"|besides|hundred|needed|indeed|as|yes|cos|sums|terms|units)\b)[a-z]{2,}(?:ed|s)"
)
# a count stated in words: "has two y-intercepts", "there are three solutions", "are exactly
# four such numbers"; not a plan ("two cases to consider") nor a reference ("the two roots")
_COUNT = re.compile(
    rf"\b(?P<verb>{_COUNT_VERB})[ \t]+"
    rf"(?:exactly[ \t]+|only[ \t]+|just[ \t]+)?(?P<count>{_COUNT_PHRASE})"
    r"[ \t]+(?!to\b|of\b|and\b|or\b)"
    r"[A-Za-z\\$(]",
    re.IGNORECASE,
)
_COPULA_VERB = re.compile(
    r"there[ \t]+(?:is|are|were|will[ \t]+be)|has|have|had|are|is|were|was", re.IGNORECASE
)
_FIRST_PERSON = re.compile(r"\b(?:we|I|us|our|my)\b", re.IGNORECASE)
# the solver's own work as the subject of a count ("The proof uses two facts")
_WORK_SUBJECT = re.compile(
    r"\b(?:solution(?!\s+set)|(?:argument|proof|approach|method|strategy|explanation|process"
    r"|procedure|derivation|calculation|computation|algorithm)s?|reasoning|analysis|work)\b",
    re.IGNORECASE,
)
_PLAN = re.compile(
    r"\b(?:to (?:consider|check|find|solve|examine)|let(?:'s| us)|we (?:need|will|must|can)"
    r"|first|next|then|if|when|suppose|assume)\b",
    re.IGNORECASE,
)


def _count_in_words(text: str, lo: int, hi: int) -> Extraction | None:
    """The final sentence's count in words, when it states one and nothing else: "The graph of
    the parabola has two \\( y \\)-intercepts." gives ``two``. A sentence that plans
    ("There are two cases to consider", "First, there are three …") or holds several counts
    states none."""
    found = list(_COUNT.finditer(text, lo, hi))
    if len(found) != 1 or _PLAN.search(text, lo, hi) is not None:
        return None
    word = found[0]
    if number_from_words(word.group("count")) is None:
        return None  # "two three": no number
    if not _COPULA_VERB.fullmatch(word.group("verb")) and _FIRST_PERSON.search(text, lo, hi):
        return None  # "We checked two cases.": the solver's method, not the answer
    if _FIRST_PERSON.search(text, word.end(), hi):
        return None  # "Both sides have two solutions, so we compare them.": work goes on
    if _WORK_SUBJECT.search(text, lo, word.start("verb")):
        return None  # "The solution involves three steps.": a count of the solver's work
    return Extraction.of([(word.start("count"), word.group("count"))], "final_statement")


def _restated(text: str, item: _Item, want: _Want) -> bool:
    """A computation copied from the prompt (``475*2`` for ``475*2=``): not a value."""
    if not want.prompt:
        return False
    content = " ".join(text[item.start : item.end].split())
    return any(op in content for op in "+-*/^=") and content.rstrip("= ") in want.prompt


def _fenced(text: str, a: int, b: int) -> bool:
    return text.startswith("```", a - 3) or text.startswith("```", b - 3)


def _sentences(text: str, lo: int, hi: int, segments: list[_Item]) -> list[tuple[int, int]]:
    """Sentence spans of ``text[lo:hi]``: cut at ``.``/``!``/``?`` before a space, a line
    break or the end, never inside a math segment."""
    out = []
    at = lo
    starts = [seg.start for seg in segments]
    for m in _SENTENCE_END.finditer(text, lo, hi):
        k = bisect.bisect_right(starts, m.start()) - 1  # the last segment opening before it
        if k >= 0 and m.start() < segments[k].end:
            continue  # inside a math segment
        out.append((at, m.end()))
        at = m.end()
    out.append((at, hi))
    return out


def _unfinished(text: str, lo: int, hi: int, segments: list[_Item]) -> bool:
    """The response stops mid-statement: an operator, ``=``, an open bracket, a dangling word
    ("… the total is the")."""
    body = _ANNOTATION.sub(lambda m: " " * len(m.group(0)), text[lo:hi]).rstrip()
    body = _TAG_FRAGMENT_END.sub("", body).rstrip("*_ ")
    while (junk := _JUNK_END.search(body)) is not None:
        body = body[: junk.start()].rstrip("*_ ")  # "_/_", ">", "***": no statement of its own
    if not body:
        return False
    if body[-1] in "=+-*/^_({[,\\":
        return True
    if body[-1] == ":" and re.search(r"(?:follows|below|is|are|be|get|gives|equals)\s*:$", body):
        return True  # "we solve for x as follows:", and nothing follows
    last_word = re.search(r"([A-Za-z]+)$", body)
    return last_word is not None and last_word.group(1).lower() in _DANGLING


def _item_extraction(text: str, items: list[_Item], want: _Want) -> Extraction | None:
    """The value a sentence states, from its math items (``items``, in order).

    The stated item is the last one that is not a modifier: an item right after a
    preposition ("after 3 hours", "of the digits 9, 8, and 7", "divisors of 196") only
    qualifies the value, unless every item does ("lasts for 25 minutes"). Items joined to it
    by ``,``/``and``/``or`` form a list with it (values only: ``7+8=15,4+3+1=8`` are steps).
    Two values stated by two clauses of the sentence ("the square root is 8, and the cube
    root is 4") are a list too.
    """
    kinds = [_context(text, it) for it in items]
    for k, it in enumerate(items):
        stop = items[k + 1].start if k + 1 < len(items) else len(text)
        if _REJECTED.match(text, it.end, stop) or (
            not want.equation and _DENIES.search(text, it.start, it.end)
        ):
            kinds[k] = "negated"  # "4 is not a solution", "$x \\neq 4$": a value rejected
    for k in range(1, len(items)):
        if kinds[k - 1] == "modifier" and _joined(text, items[k - 1], items[k]):
            kinds[k] = "modifier"  # "of the digits 9, 8, and 7": the whole list qualifies
    stated = [k for k, kind in enumerate(kinds) if kind not in ("modifier", "negated")]
    if not stated and "negated" in kinds:
        return None  # "So x is not 4.": a denial states no value
    chosen = max(stated, default=len(items) - 1)
    first = last = chosen
    while (
        first > 0
        and kinds[first - 1] != "negated"
        and _joined(text, items[first - 1], items[first])
    ):
        first -= 1
    while (
        last + 1 < len(items)
        and kinds[last + 1] != "negated"
        and _joined(text, items[last], items[last + 1])
    ):
        last += 1
    group = items[first : last + 1]
    if kinds[chosen] == "copula":
        earlier = [
            k
            for k in range(first)
            if kinds[k] == "copula" and _CLAUSE_JOIN.search(text, items[k].end, items[first].start)
        ]
        if earlier:
            group = [items[earlier[-1]], *group]
    spans = [_chain_value(text, it, want.equation) for it in group]
    parts = [
        (a, text[a:b])
        for a, b in (
            _rhs_of_words(text, *_unit_trimmed(text, it, sp))
            for it, sp in zip(group, spans, strict=True)
        )
        if b > a
    ]
    if not parts:
        return None
    rule = "final_statement"
    if len(parts) == 1 and not group[-1].segment and _NUMBER.fullmatch(_unit_free(parts[0][1])):
        rule = "last_number"
    return Extraction.of(parts, rule)


def _rhs_of_words(text: str, a: int, b: int) -> tuple[int, int]:
    """A value that opens with ``=`` (``Total distance $= 1.2 \\times 10^{3}$``: the words
    before it name the quantity) is what follows the ``=``."""
    m = re.match(r"=[ \t]*", text[a:b])
    return (a + m.end(), b) if m is not None and "=" not in text[a + m.end() : b] else (a, b)


def _joined(text: str, a: _Item, b: _Item) -> bool:
    """``a`` and ``b`` are values of one list: only a connector between them."""
    if not (_listable(text, a) and _listable(text, b)):
        return False
    between = text[a.end : b.start]
    if _CONNECT.fullmatch(between):
        return True
    bare = between.replace("$", "").replace("\\)", "").replace("\\(", "")
    return _CONNECT.fullmatch(bare) is not None


_PREPOSITIONS = frozenset(
    [
        "of",
        "after",
        "in",
        "for",
        "from",
        "within",
        "per",
        "at",
        "on",
        "over",
        "by",
        "with",
        "to",
        "than",
        "between",
        "among",
        "into",
        "during",
        "before",
        "since",
        "under",
        "about",
        "around",
        "except",
        "without",
        "out",
    ]
)
_ARTICLES = frozenset(
    [
        "the",
        "a",
        "an",
        "these",
        "those",
        "all",
        "its",
        "their",
        "his",
        "her",
        "our",
        "each",
        "every",
    ]
)
_COPULAS = frozenset(
    ["is", "are", "was", "were", "equals", "be", "been", "becomes", "gives", "makes", "totals"]
)
_GERUND = re.compile(r"[a-z]{2,}ing")
_CLAUSE_JOIN = re.compile(r",\s*(?:and|but)\b|;|\band\b")
# a value whose own predicate rejects it: "4 is not a solution", "x = 4 is extraneous"
_REJECTED = re.compile(
    r"[\s$*)]*(?:(?:is|are|was|were)(?:\s+(?:not|n't|never)\b|n't)|(?:is|are|was|were)\s+"
    r"(?:incorrect|wrong|extraneous|invalid|impossible|rejected|excluded|not\s+valid)\b"
    r"|(?:does|do|did)(?:\s+not|n't)\s+(?:work|satisfy|hold|fit)\b|fails\b)",
    re.IGNORECASE,
)
_DENIES = re.compile(r"\\neq?(?![A-Za-z])|≠")
# a value right after a negation is denied, never stated ("x is not 4", "can't be 12")
_NEGATED = re.compile(
    r"(?:\bnot|\bnever|n't|\bcannot)(?:[ \t]+(?:be|equal|equals|equal[ \t]+to|exactly))?"
    r"[^A-Za-z0-9]*$",
    re.IGNORECASE,
)
_WORD_BEFORE = re.compile(r"([A-Za-z]+)[^A-Za-z0-9]*$")


def _context(text: str, item: _Item) -> str:
    """``modifier`` (after a preposition), ``copula`` (after "is", "=", "equals"), ``negated``
    (after "not", "never", "n't": a value denied) or ``""``."""
    if _CHAIN.search(text, item.start, item.end) is not None:
        return "chain"  # "of 24 * (2/3) = 16": the chain states its own value
    k = item.start
    while k > 0 and text[k - 1] in " \t":
        k -= 1
    if k < item.start and k > 0 and text[k - 1].isdigit():
        return "modifier"  # "5 8 point bucks": the second number names a kind
    lo = max(0, item.start - 60)
    before = text[lo : item.start].rstrip(" \t$(\\*")
    if before.endswith("="):
        return "copula"
    words = re.findall(r"[A-Za-z]+", before)[-3:]
    if not words or not re.search(r"[A-Za-z]+[^A-Za-z0-9]*$", before):
        return ""
    w = [x.lower() for x in words]
    if _NEGATED.search(before):
        return "negated"  # "x is not 4", "it can't be 12", "never 5": the value denied
    if w[-1] in _COPULAS or (w[-1] == "to" and len(w) > 1 and w[-2] in ("equal", "equals")):
        return "copula"
    if w[-1] == "of" and len(w) > 1 and w[-2] in ("total", "sum", "product", "result"):
        return "copula"  # "for a total of $130"
    if w[-1] in _PREPOSITIONS:
        return "modifier"
    if len(w) >= 2 and w[-2] in _PREPOSITIONS and w[-1] in _ARTICLES:
        return "modifier"
    if len(w) >= 2 and w[-2] in _PREPOSITIONS and _GERUND.fullmatch(w[-1]):
        return "modifier"  # "after giving 4 to Sam": a clause of the preposition's
    if len(w) == 3 and w[0] in _PREPOSITIONS and w[1] in _ARTICLES:
        return "modifier"  # "of the digits 9"
    return ""


def _unit_trimmed(text: str, item: _Item, span: tuple[int, int]) -> tuple[int, int]:
    """A prose value without the unit glued to it (``2600g`` is 2600: ``g`` is no variable)."""
    a, b = span
    if item.segment:
        return a, b
    m = _GLUED_UNIT_END.search(text, a, b)
    return (a, m.start()) if m is not None and m.start() > a else (a, b)


def _listable(text: str, item: _Item) -> bool:
    """An item that may be one value of a list: a value, or a named one (``x = 1``), never a
    step of a computation (``7+8=15,4+3+1=8``)."""
    content = text[item.start : item.end]
    if _CHAIN.search(content) is None:
        return True
    lhs = _CHAIN.split(content)[0]
    return _name(lhs)


def _unit_free(text: str) -> str:
    return re.sub(r"(?<=\d)[A-Za-z]+(?:/[A-Za-z]+)?%?$|%$", "", text.strip())


# ---- answer phrases ---------------------------------------------------------------------

_ANSWER_PHRASE = re.compile(
    r"(?:(?:final\s+|correct\s+)?answers?\s*(?:is|are|was|would\s+be|will\s+be|should\s+be)\b"
    r"|(?:final\s+)?answers?\s*(?:\*\*|__)?\s*:|final\s+answer\s*(?:\*\*|__)?[ \t]*(?=\n)"
    r"|(?:^|(?<=\n))[ \t]*A[ \t]*:|(?:^|(?<=\n))[ \t]*answer[ \t]+(?=\$))\s*:?",
    re.IGNORECASE,
)
_CLAUSE_END = re.compile(r"[.;!?](?=\s|$)|,(?=\s)|\n")
_SEGMENT_JOIN = re.compile(r"[ \t]*(?:,[ \t]*(?:(?:and|or)[ \t]+)?|(?:and|or)[ \t]+)\$(?!\$)")
_SEGMENT_END = re.compile(r"[ \t]*(?:[.!?;]|\*|$)")
_MATH_OPEN = re.compile(r"\$\$|\$|\\\(|\\\[")
_MATH_CLOSE = {"$$": "$$", "$": "$", "\\(": "\\)", "\\[": "\\]"}
# what shows that leading math is the subject of a statement, not its value: "$99^2$ is …",
# "$S = N^2$ \nand …", "3 + 4 …"
_LEAD_STOP = re.compile(
    r"[$)\]\\]*[ \t]*(?:\n(?![ \t]*\n)|(?:is|are|was|were|equals?|becomes|gives|means|and|plus"
    r"|minus|times)\b"
    r"|[-+*/=<>^])",
    re.IGNORECASE,
)
# words after an answer phrase that talk about the answer instead of giving it
_META = re.compile(
    r"(?:\w+ly\b|enclosed|stated|given|shown|below|above|as follows|correct|incorrect|wrong|"
    r"right|not|in the|within|inside|that|this|the following|provided|boxed|here)",
    re.IGNORECASE,
)
# a relative clause after the answer sentence's value qualifies it ("45 minutes, which is 3
# times as long as Tom's 15 minutes"): the sentence's main clause states the answer
_RELATIVE = re.compile(r",[ \t]*(?:which|who|whom|whose|where|whereas|while)\b", re.IGNORECASE)
_LEAD_CHOICE = re.compile(r"\(?[A-E]\)(?=[\s.,;:*]|$)|\(?[A-E](?=[.:]?(?:[\s*]|$))")
_LEAD_WORDS = re.compile(r"[A-Za-z][A-Za-z' -]*")


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


def _hedged(text: str, at: int, end: int) -> bool:
    """A hedge after a stated value: "7, or perhaps 9", "7 (or maybe 9)", or a next sentence
    that offers another value: "7. Or maybe 9.", "7. Maybe it's 9.", "7. It could also be 9"."""
    sentence = _SENTENCE_END.search(text, at, end)
    rest = text[at : sentence.start() if sentence else end].lstrip(" (")
    asked = sentence is not None and sentence.group() == "?" and not rest.strip(" $*")
    if asked or _BOUND.match(rest):
        return True  # "12 or more", "12 or so", "Answer: 12? No, 15.": no value stated
    m = _HEDGE.match(rest)
    if m is not None and any(c.isdigit() for c in rest[m.end() :]):
        return True
    if sentence is None:
        return False
    following = _SENTENCE_END.search(text, sentence.end(), end)
    after = text[sentence.end() : following.start() if following else end]
    m = _NEXT_HEDGE.match(after)
    if m is None:
        return False
    offered = _NUMBER_TOKEN.search(after, m.end(), m.end() + 40)
    stated = _NUMBER_TOKEN.findall(text, max(0, at - 40), at)
    return offered is not None and bool(stated) and offered.group() != stated[-1]


def _same_number(a: str, b: str) -> bool:
    """Two plain numbers that are equal (``24`` and ``24.0``, ``1,200`` and ``1200``)."""
    a, b = a.replace(",", "").strip(), b.replace(",", "").strip()
    if not (_PLAIN.fullmatch(a) and _PLAIN.fullmatch(b)):
        return False
    return float(a) == float(b)


_PLAIN = re.compile(r"-?\d+(?:\.\d+)?")
_NUMBER_TOKEN = re.compile(r"-?\d+(?:[.,/]\d+)*")
_NEXT_HEDGE = re.compile(
    r"\s*(?:or\b(?!\s*,)|alternatively\b|it\s+(?:could|might)\s+(?:also\s+)?be\b"
    r"|(?:perhaps|maybe)\s+(?:it\s*(?:'s|is)\s+|the\s+answer\s+is\s+)?(?=[-$\\\d]))",
    re.IGNORECASE,
)


def _answer_is(text: str, start: int, end: int, want: _Want) -> Extraction | None:
    """The last answer phrase that states something (a later one that states nothing, "the
    answer is enclosed within …", gives way to the one before it)."""
    for said in reversed(list(_ANSWER_PHRASE.finditer(text, start, end))[-_MAX_PHRASES:]):
        found = _after_phrase(text, said, end, want)
        if found is not None:
            return found
    return None


def _after_phrase(text: str, said: re.Match[str], end: int, want: _Want) -> Extraction | None:
    i = said.end()
    text = text[:i] + _TAGS.sub(_blank, text[i:end]) + text[end:]  # </answer>, <think>
    while i < end and text[i] in " \t*_:#\n}`":  # markdown; the answer may be on the next line
        i += 1
    own_line = "\n" not in text[said.end() : i]  # "Answer: …" rather than "Answer:\n …"
    line_end = text.find("\n", i, end)
    line_end = end if line_end < 0 else line_end
    if i >= line_end:
        return None
    money = _MONEY.match(text, i) is not None
    opener = _MATH_OPEN.match(text, i, line_end)
    if opener is not None and not money:
        close = text.find(_MATH_CLOSE[opener.group(0)], opener.end(), line_end)
        if close > opener.end():
            joined = _joined_segments(text, close, line_end) if opener.group(0) == "$" else close
            hedge = _hedged(text, joined + len(_MATH_CLOSE[opener.group(0)]), line_end)
            if joined == close:
                a, b = _chain_value(text, _Item(opener.end(), close, True), want.equation)
            else:
                a, b = _stripped(text[opener.end() : joined], opener.end())[0], joined
            if b > a:
                return Extraction.of([(a, text[a:b].rstrip())], "answer_is", hedge)
    clause = _CLAUSE_END.search(text, i, line_end)
    clause_end = clause.start() if clause is not None else line_end
    if _LEAD_CHOICE.match(text, i, line_end) is not None:
        # "(B) 42", "B.": a choice, with the option's text if any
        return Extraction.of([_stripped(text[i:clause_end].rstrip("*_"), i)], "answer_is")
    if is_set_phrase(text[i:clause_end]):  # all real numbers except 0 and 1
        return Extraction.of([_stripped(text[i:clause_end], i)], "answer_is")
    sentence = _SENTENCE_END.search(text, i, line_end)
    sentence_end = sentence.start() if sentence is not None else line_end
    segments = _segments(text, i, sentence_end, [])
    items = _items(text, i, sentence_end, segments)
    if items and items[0].start <= i + (1 if money else 0):
        # math starts the sentence: it (and the values joined to it) is the answer
        group = [items[0]]
        for item in items[1:]:
            if _CONNECT.fullmatch(text, group[-1].end, item.start) is None:
                break
            group.append(item)
        spans = [_chain_value(text, it, want.equation) for it in group]
        parts = [(x, text[x:y]) for x, y in spans if y > x]
        if parts:
            return Extraction.of(parts, "answer_is", _hedged(text, group[-1].end, line_end))
    # words first ("Answer: The train travels 120 miles."): the value the answer's sentence
    # states; when it states none ("Answer: To find E, we solve …"), the value its paragraph
    # ends on, read like a final statement
    if items and own_line:
        relative = _RELATIVE.search(text, items[0].end, sentence_end)
        if relative is not None:  # "She needs 45 minutes, which is 3 times Tom's 15": the
            items = [it for it in items if it.end <= relative.start()]  # main clause states
        found = _item_extraction(text, items, want)
        if found is not None:
            hedge = _hedged(text, items[-1].end, line_end)
            return Extraction(found.text, "answer_is", found.start, found.parts, hedge)
    paragraph = _PARAGRAPH.search(text, i, end)
    found = _statement(text, i, paragraph.start() if paragraph else end, want)
    if found is not None:
        return Extraction(found.text, "answer_is", found.start, found.parts, found.hedge)
    raw = text[i:clause_end].strip().strip("*_$").strip()
    if not any(c.isalpha() for c in raw) or any(c.isdigit() for c in raw) or len(raw.split()) > 4:
        return None  # no value and no short text answer: the next rule decides
    if _META.match(raw):
        return None  # "clearly stated", "enclosed within …": words about the answer
    return Extraction.of([(text.index(raw, i), raw)], "answer_is")


def _whole(text: str, lo: int, hi: int, want: _Want) -> Extraction | None:
    """The whole span when it is math (inside an answer tag: ``<answer> \\sqrt{3} </answer>``,
    ``<answer> 22 + 20 = 42 </answer>`` gives 42), read as a statement's item."""
    at, raw = _stripped(text[lo:hi], lo)
    if not any(c.isalnum() for c in raw) or _is_prose(raw.replace("$", " ")) or "\n" in raw:
        return None
    seg_lo, seg_hi = at, at + len(raw)
    for left, right in (("$$", "$$"), ("$", "$"), ("\\(", "\\)"), ("\\[", "\\]")):
        if raw.startswith(left) and raw.endswith(right) and len(raw) > len(left) + len(right):
            seg_lo, seg_hi = at + len(left), at + len(raw) - len(right)
            break
    bare = _COMMAND.sub("", text[seg_lo:seg_hi])
    if not any(c.isalnum() for c in bare) and not any(
        _command_value(m.group(1), m.group(2) is not None)
        for m in _COMMAND.finditer(text, seg_lo, seg_hi)
    ):
        return None  # "<answer> $\\checkmark$ </answer>": no value
    a, b = _chain_value(text, _Item(seg_lo, seg_hi, True), want.equation)
    if b <= a:
        return None
    return Extraction.of([(a, text[a:b])], "whole")


def _leading(text: str, lo: int, hi: int, want: _Want) -> Extraction | None:
    """Math that opens the span (an answer tag's "1,700 because she loses 10% …"): the value
    the answer starts with, the end of its chain."""
    i = lo
    while i < hi and text[i] in " \t\n*_":
        i += 1
    sentence = _SENTENCE_END.search(text, i, hi)
    stop = sentence.start() if sentence is not None else hi
    items = _items(text, i, stop, _segments(text, i, stop, []))
    if not items or items[0].start > i + 1:
        return None
    if _LEAD_STOP.match(text, items[0].end, hi) is not None:
        return None  # "$99^2$ is …": the subject of a statement, not its value
    a, b = _chain_value(text, items[0], want.equation)
    return Extraction.of([(a, text[a:b])], "leading") if b > a else None


def _final_statement(text: str, lo: int, hi: int, want: _Want) -> Extraction | None:
    found = _statement(text, lo, hi, want)
    return found if found is not None else _confirmed_by_program(text, lo, hi, want)


def _confirmed_by_program(text: str, lo: int, hi: int, want: _Want) -> Extraction | None:
    """A conclusion that the program after it confirms, when nothing after the program
    states a value: "Therefore, the value of $ab$ is $6 \\cdot 18 = 108$. Let's confirm this."
    + a program + its output ``108`` + "The correct value" (cut off) gives 108. The output's
    last number must be the concluded value; otherwise the program may have changed it."""
    blocks = [(a, b) for a, b in _code_spans(text, lo, hi) if _fenced(text, a, b)]
    if len(blocks) < 2 or not text.startswith("```output", blocks[-1][0]):
        return None
    (program, _), (output, after) = blocks[-2], blocks[-1]
    if _items(text, after, hi, _segments(text, after, hi, [])):
        return None  # something after the program states a value (or its question)
    shown = _NUMBER_TOKEN.findall(text, output, after)
    earlier = max([b for _, b in blocks[:-2]] or [lo])
    found = _statement(text, earlier, program, want)
    if found is None or not shown or len(found.parts) != 1:
        return None
    if not _same_number(found.text, shown[-1]):
        return None
    starts = [
        a for a, _ in _sentences(text, earlier, program, _segments(text, earlier, program, []))
    ]
    sentence = max((a for a in starts if a <= found.start), default=earlier)
    if _CONCLUSION.match(text, sentence, found.start) is None:
        return None
    return found


_FINDERS = {
    "answer_tag": _answer_tag,
    "boxed": _boxed,
    "gsm8k": _gsm8k,
    "answer_is": _answer_is,
    "whole": _whole,
    "leading": _leading,
    "final_statement": _final_statement,
}


def extract_answer(
    response: str,
    answer_format: str = "lenient",
    several: bool = False,
    prompt: str = "",
    equation: bool = False,
) -> Extraction | None:
    """Extract the final answer of ``response`` (region, candidates and precedence in the
    module docstring).

    Args:
        response: the model's response text.
        answer_format: one of :data:`FORMATS`; a strict format uses its one rule only.
        several: the gold is a list of values (several boxes then form one list).
        prompt: the task's prompt; a sentence of the response restated from it is not a
            final statement.
        equation: the gold is an equation; a final statement ``lhs = rhs`` then stays whole
            (else a constant ``rhs`` is the value stated: ``m + n = 17`` gives 17).

    Returns:
        The extraction, or None when no rule of the format finds an answer.

    Raises:
        UnclosedBoxError: boxes are considered and the last ``\\boxed{`` is not closed.
        AnswerFormatError: ``answer_format`` is not one of :data:`FORMATS`.
    """
    rules = _RULES_OF.get(answer_format)
    if rules is None:
        raise AnswerFormatError(
            f"answer_format {answer_format!r} is not one of {', '.join(FORMATS)}"
        )
    text, start, end = answer_region(response)
    want = _Want(several, equation, " ".join(prompt.split()))
    if answer_format == "lenient":
        rules = _explicit_order(text, start, end)
    try:
        for rule in rules:
            found = _FINDERS[rule](text, start, end, want)
            if found is not None and rule == "boxed" and answer_format == "lenient":
                return _corrected(text, found, end, want) or found
            if found is not None:
                return found
    except _NoAnswerError:
        return None
    return None


# the response takes back what it said: "that's wrong", "I made a mistake", "oops"
_RETRACTION = re.compile(
    r"\b(?:that(?:'s|\s+is|\s+was)\s+(?:wrong|incorrect|not\s+right)|(?:I|we)\s+made\s+an?"
    r"\s+(?:mistake|error)|(?:is|was)\s+(?:wrong|incorrect)|oops|correction)\b",
    re.IGNORECASE,
)
# the response goes back over what it said: "Wait, let me double-check", "Actually, …"
_RECHECK = re.compile(
    r"\b(?:wait|actually|hmm|let\s+me\s+(?:re-?check|double[- ]check|verify|recompute"
    r"|recalculate|re-?examine|reconsider))\b",
    re.IGNORECASE,
)
_CORRECTION_REACH = 120
"""Characters after a box within which a correction must start (past them, text after a
box is mostly a continuation or degenerate text, never a correction)."""


def _corrected(text: str, boxed: Extraction, end: int, want: _Want) -> Extraction | None:
    """The answer that corrects the last box right after it. A retraction ("\\boxed{12}.
    Hmm, that's wrong. The correct total is 13.") makes the final statement after it the
    answer; a re-check ("$\\boxed{12}$. Wait, 5 + 8 = 13. So the answer is 13.") makes a
    later answer phrase with a value the answer. Either must start within
    :data:`_CORRECTION_REACH` characters of the box. None when nothing corrects the box (it
    stands)."""
    at, part = boxed.parts[-1]
    close = text.find("}", at + len(part), end)
    if close < 0 or _BOX.search(text, close + 1, end) is not None:
        return None  # a box after it (cut off while repeating): the box stands
    reach = min(end, close + 1 + _CORRECTION_REACH)
    retraction = _RETRACTION.search(text, close + 1, reach)
    if retraction is not None:
        return _statement(text, retraction.end(), end, want)
    recheck = _RECHECK.search(text, close + 1, reach)
    if recheck is not None:
        return _answer_is(text, recheck.end(), end, want)
    return None


def _explicit_order(text: str, start: int, end: int) -> tuple[str, ...]:
    """Lenient precedence: of the two explicit markers, the answer tag and the box, the one
    that ends the response comes first (a box after an early ``<answer>`` wins, a tag
    after a boxed draft wins, a box inside the tag is the tag's)."""
    opens = _tag_opens(text, start, end)
    tag = opens[-1] if opens else None
    box = None
    for box in _BOX.finditer(text, start, end):  # noqa: B007 - the last one
        pass
    if tag is not None and box is not None:
        close = _TAG_CLOSE.search(text, tag.end(), end)
        if box.start() >= (close.end() if close is not None else end):
            return ("boxed", "answer_tag", *_RULES_OF["lenient"][2:])
    return _RULES_OF["lenient"]
