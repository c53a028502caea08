"""The command line's help and messages read cleanly: help reflowed at 80 columns, the live
table's last line ended in a log, ``--service`` help true for each ``grpo score`` kind."""

from __future__ import annotations

import io
import itertools
import re

import pytest
import typer
from rich.console import Console
from rich.table import Table
from typer.testing import CliRunner

from grpo.cli import app


def _fits(line: str, following: str, width: int) -> bool:
    """The first word of ``following`` would have fitted at the end of ``line``: a wrap at
    ``width`` did not put it there, a hard line break did."""
    words = following.split()
    return bool(words) and len(line.rstrip()) + 1 + len(words[0]) <= width


def _prose_breaks(output: str, width: int = 79) -> list[str]:
    """Lines of the help's prose (outside the panels) broken where the paragraph's next word
    would still have fitted: a docstring's hard line break."""
    panel = ("╭", "│", "╰")
    return [
        line
        for line, following in itertools.pairwise(output.splitlines())
        if line.strip()
        and not line.startswith((" Usage", *panel))
        and not following.startswith(panel)
        and _fits(line, following, width)
    ]


def _panel_breaks(output: str) -> list[str]:
    """Rows of the Commands panel broken where the same description's next word would still
    have fitted in its column."""
    lines = output.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith("╭─ Commands")), None)
    if start is None:
        return []
    rows = lines[start + 1 :]
    rows = rows[: next(i for i, line in enumerate(rows) if line.startswith("╰"))]
    cells = [re.match(r"│ (\S*)(\s+)(.*?)\s*│$", line) for line in rows]
    found = [c for c in cells if c is not None]
    if not found:
        return []
    width = max(len(c.group(3)) for c in found)
    return [
        this.group(0)
        for this, following in itertools.pairwise(cells)
        if this
        and following
        and not following.group(1)
        and _fits(this.group(3), following.group(3), width)
    ]


@pytest.mark.parametrize("args", [["--help"], ["run", "--help"], ["check-verifier", "--help"]])
def test_help_is_reflowed_at_80_columns(args: list[str]) -> None:
    """Docstrings are paragraphs: their single line breaks are not kept, so no line of the
    help stops in the middle of a paragraph at 80 columns (grpo --help, grpo run --help)."""
    result = CliRunner().invoke(app, args, env={"COLUMNS": "80"})
    assert result.exit_code == 0, result.output
    assert _prose_breaks(result.output) == [], result.output
    assert _panel_breaks(result.output) == [], result.output
    assert max(len(line) for line in result.output.splitlines()) <= 80


def test_the_live_tables_last_line_ends_in_a_log(tmp_path) -> None:
    """In a non-terminal log, the live table's bottom border and the message after it (here
    the interrupt's) are on lines of their own."""
    from grpo.cli_run import _run_live

    buffer = io.StringIO()
    console = Console(file=buffer, width=100)
    table = Table(title="grpo run x")
    table.add_column("step")
    table.add_row("0/2")

    def interrupted(live: object) -> None:
        raise KeyboardInterrupt

    with pytest.raises(typer.Exit) as info:
        _run_live(console, interrupted, table, tmp_path)
    assert info.value.exit_code == 130
    lines = buffer.getvalue().splitlines()
    bottom = [i for i, line in enumerate(lines) if line.startswith("└")]
    assert bottom and lines[bottom[-1]].rstrip().endswith("┘"), lines
    assert lines[bottom[-1] + 1].startswith("interrupted before GRPO started"), lines


@pytest.mark.parametrize(
    ("kind", "said"),
    [
        ("math", "instead of verifier-math"),
        ("steps", "instead of verifier-steps"),
        ("code", "instead of verifier-code"),
        ("custom", "custom needs it or --endpoint"),
    ],
)
def test_service_help_is_true_for_each_score_kind(kind: str, said: str) -> None:
    """--service of grpo score math/steps/code replaces the built-in verifier (it said
    "custom:" only)."""
    result = CliRunner().invoke(app, ["score", kind, "--help"], env={"COLUMNS": "300"})
    assert result.exit_code == 0, result.output
    text = " ".join(result.output.replace("│", " ").split())
    assert said in text and "custom: module:SERVICE" not in text, text
