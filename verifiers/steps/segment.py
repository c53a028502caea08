"""Segmentation of a worked solution into steps with code-point spans ``[start, end)``.

A response is cut, in this order, at:

1. line breaks, and the row breaks ``\\\\`` of LaTeX alignment environments (``align``,
   ``align*``, ``aligned``, ``alignat``, ``eqnarray``, ``gather``, ``gathered``, ``split``,
   ``multline``, ``flalign``, ``array``, ``cases``; an unclosed one runs to the end), so each
   row of ``\\begin{aligned} 18 \\times 5 &= 90 \\\\ 90 + 14 &= 104 \\end{aligned}`` is a
   step of its own, its ``\\\\`` included (matrix rows are not cut);
2. "Step k" markers inside a line (``Step 2:``, ``step 3.``; a marker after only markdown
   at the line start, ``**Step 1:**``, ``## Step 1:``, does not cut);
3. sentence ends (``.``, ``!`` or ``?`` followed by whitespace, not by ``=``; a ``!`` not by
   a relation or an operator either: ``5! = 120``, ``10! > 3{,}000{,}000``; not the ``1.`` of
   a numbered list, nor the dot of ``Rs.``, ``approx.``, ``e.g.``, ``Mr.``) — so each sentence
   holding an equation is its own step;
4. commas between equations, as in the arithmetic format ``7+8=15,4+3+1=8:85``: when every
   comma-separated part of a sentence contains ``=``, each part is a step. A final answer after
   the last ``:`` (``:85``) is not part of any step. A part that starts with a thousands
   group (``x=1,000 and y=2``) prevents the split.

Whitespace is trimmed from each span; empty pieces and GSM8K final-answer lines
(``#### 72``) are dropped. The spans index the response string (Python indices are code
points, as the proto's character offsets are).
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass

__all__ = ["Step", "segment_steps"]

_STEP_MARK = re.compile(r"(?i)\bstep\s*\d+\s*[:.)]?")
# "5! = 120", "10! > 3,000,000", "3! + 4! = 30": a factorial before a relation or operator
_SENTENCE_END = re.compile(
    r"[.?](?=\s)(?!\s*=)|!(?=\s)(?!\s*(?:[-+*/×÷^=<>≤≥≠≈]"
    r"|\\(?:times|cdot|div|le|ge|leq|geq|lt|gt|ne|neq|approx)(?![A-Za-z])))"
)
_LIST_MARK = re.compile(r"\s*\d{1,3}\.$")  # "1." of a numbered list
_ABBREVIATION = re.compile(  # "Rs. 500", "approx. 3.2", "e.g. 5": not sentence ends
    r"(?:^|[\s(])(?:Rs|Mr|Mrs|Ms|Dr|St|vs|approx|Approx|ca|cf|e\.g|i\.e|Eq|eq|Fig|No|no)\.$"
)
_FINAL_ANSWER_LINE = re.compile(r"^\s*####")
_GROUP = re.compile(r"\d{3}(?![\d+\-*/=])")  # "1,000 and": a thousands group, not an equation
_TRAILING_ANSWER = re.compile(r":\s*-?[\d.,/]+\s*$")
_ALIGNED = r"align|aligned|alignat|eqnarray|gather|gathered|split|multline|flalign|array|cases"
_ENV_BEGIN = re.compile(r"\\begin\s*\{(" + _ALIGNED + r")(\*?)\}")
_ROW_BREAK = re.compile(r"\\\\")


@dataclass(frozen=True)
class Step:
    """One step: ``text == response[start:end]``."""

    start: int
    end: int
    text: str


def _cut(start: int, end: int, points: list[int]) -> list[tuple[int, int]]:
    bounds = [start, *sorted(p for p in points if start < p < end), end]
    return list(itertools.pairwise(bounds))


def _trim(response: str, start: int, end: int) -> tuple[int, int]:
    while start < end and response[start].isspace():
        start += 1
    while end > start and response[end - 1].isspace():
        end -= 1
    return start, end


def _top_level_commas(text: str) -> list[str]:
    """``text`` split at its commas outside brackets and not LaTeX spacing (``\\,``)."""
    parts: list[str] = []
    depth = start = 0
    for i, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth = max(depth - 1, 0)
        elif ch == "," and depth == 0 and (i == 0 or text[i - 1] != "\\"):
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def _comma_equations(response: str, start: int, end: int) -> list[tuple[int, int]]:
    """Split ``7+8=15,4+3+1=8:85`` into its equations (dropping ``:85``)."""
    text = response[start:end]
    parts = _top_level_commas(text)
    if len(parts) < 2 or not all("=" in p for p in parts) or any(map(_GROUP.match, parts[1:])):
        return [(start, end)]
    pieces = []
    offset = start
    for part in parts:
        pieces.append((offset, offset + len(part)))
        offset += len(part) + 1
    last_start, last_end = pieces[-1]
    tail = _TRAILING_ANSWER.search(response, last_start, last_end)
    if tail is not None:
        pieces[-1] = (last_start, tail.start())
    return pieces


def _row_breaks(response: str) -> list[int]:
    """Positions just after each ``\\\\`` inside an alignment environment."""
    points: list[int] = []
    pos = 0
    while (begin := _ENV_BEGIN.search(response, pos)) is not None:
        end_text = f"\\end{{{begin.group(1)}{begin.group(2)}}}"
        end = response.find(end_text, begin.end())
        end = len(response) if end < 0 else end
        points += [m.end() for m in _ROW_BREAK.finditer(response, begin.end(), end)]
        pos = max(end, begin.end())
    return points


def segment_steps(response: str) -> list[Step]:
    """Split ``response`` into steps (rules in the module docstring).

    Args:
        response: the solution text.

    Returns:
        Steps in order, non-overlapping, each with its ``[start, end)`` code-point span.
    """
    steps: list[Step] = []
    rows = _row_breaks(response) if "\\begin" in response else []
    line_start = 0
    for line in response.split("\n"):
        line_end = line_start + len(line)
        if line.strip() and not _FINAL_ANSWER_LINE.match(line):
            marks = [
                m.start() + line_start
                for m in _STEP_MARK.finditer(line)
                if line[: m.start()].strip(" \t*_#-•")  # "**Step 1:**" at a line start
            ]
            marks += [p for p in rows if line_start < p < line_end]
            for a, b in _cut(line_start, line_end, marks):
                ends = [
                    m.end()
                    for m in _SENTENCE_END.finditer(response, a, b)
                    if not _LIST_MARK.fullmatch(response, line_start, m.end())
                    and not _ABBREVIATION.search(response, max(line_start, m.end() - 12), m.end())
                ]
                for c, d in _cut(a, b, ends):
                    c, d = _trim(response, c, d)
                    if c >= d:
                        continue
                    for e, f in _comma_equations(response, c, d):
                        e, f = _trim(response, e, f)
                        if e < f:
                            steps.append(Step(e, f, response[e:f]))
        line_start = line_end + 1
    return steps
