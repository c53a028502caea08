"""Program extraction: the last ```python block, else an untagged block, else the text."""

from __future__ import annotations

import pytest

from grpo.verifiers.code import extract_program

FENCE = "```"


@pytest.mark.parametrize(
    ("response", "program"),
    [
        (f"a\n{FENCE}python\nx = 1\n{FENCE}\nb\n{FENCE}python\nx = 2\n{FENCE}\n", "x = 2\n"),
        (f"{FENCE}py\ny = 3\n{FENCE}", "y = 3\n"),
        (f"{FENCE}\nz = 4\n{FENCE}", "z = 4\n"),
        (f"{FENCE}python\nx = 1\n{FENCE}\n{FENCE}\nnot this\n{FENCE}", "x = 1\n"),
        (f"{FENCE}bash\nls\n{FENCE}\n", f"{FENCE}bash\nls\n{FENCE}\n"),
        ("def f():\n    return 1", "def f():\n    return 1"),
        (f"{FENCE}python\ndef f():\n    return 1", "def f():\n    return 1"),  # cut off
        ("", ""),
    ],
    ids=[
        "last-python",
        "py-tag",
        "untagged",
        "python-beats-untagged",
        "other-lang",
        "plain",
        "unterminated",
        "empty",
    ],
)
def test_extract_program(response: str, program: str) -> None:
    assert extract_program(response) == program
