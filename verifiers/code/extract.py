"""Program extraction from a model response: the last fenced Python block, else the whole text.

Fences accepted: ```python, ```py, ```python3 and a bare ``` (a bare fence counts only when
no Python-tagged block exists). An unterminated final fence (generation cut by max tokens)
yields the text after it. Other languages' blocks (```bash, ```text) are ignored.

:func:`source_text` first makes the text read as a source file would: a leading UTF-8
byte-order mark is dropped and CRLF / lone CR line ends become LF (Python's tokenizer does both
for files), so fences and the program behave as they do from ``python3 sol.py``.
"""

from __future__ import annotations

import re

__all__ = ["extract_program", "source_text", "unencodable_at"]

_FENCE = re.compile(
    r"^[ \t]*```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:^[ \t]*```[ \t]*$|\Z)", re.S | re.M
)
_PYTHON_TAGS = frozenset({"python", "py", "python3"})


def extract_program(response: str) -> str:
    """Return the program to run from ``response``.

    Args:
        response: the model's response text.

    Returns:
        The body of the last ```python block; else of the last untagged ``` block; else the
        whole response. May be empty or whitespace (the verifier reports NO_ANSWER then).
    """
    tagged: list[str] = []
    untagged: list[str] = []
    for match in _FENCE.finditer(response):
        tag = match.group(1).lower()
        if tag in _PYTHON_TAGS:
            tagged.append(match.group(2))
        elif not tag:
            untagged.append(match.group(2))
    if tagged:
        return tagged[-1]
    if untagged:
        return untagged[-1]
    return response


def source_text(text: str) -> str:
    """Return ``text`` as Python reads a source file: no leading BOM, LF line ends only."""
    return text.removeprefix("\ufeff").replace("\r\n", "\n").replace("\r", "\n")


def unencodable_at(text: str) -> int | None:
    """Index of the first lone surrogate in ``text`` (no UTF-8 file can hold it), else None."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return exc.start
    return None
