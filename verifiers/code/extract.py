"""Program extraction from a model response: the last fenced Python block, else the whole text.

Fences accepted: ```python, ```py, ```python3 and a bare ``` (a bare fence counts only when
no Python-tagged block exists). An unterminated final fence (generation cut by max tokens)
yields the text after it. Other languages' blocks (```bash, ```text) are ignored.
"""

from __future__ import annotations

import re

__all__ = ["extract_program"]

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
