"""The frame of grpo score / grpo eval: how a run ends decides its exit code and message."""

from __future__ import annotations

import io
import os
import signal
from pathlib import Path

import pytest
import typer
from helpers import wait_until
from rich.console import Console

from grpo.cli_console import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNSCORED,
    EXIT_USAGE,
    exit_for_unscored,
    resumable_run,
)
from grpo.errors import InvalidArgumentError, UnavailableError, UsageError


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def _written(tmp_path: Path) -> Path:
    path = tmp_path / "o"
    path.write_text('{"id": "a"}\n')
    return path


def test_a_finished_run_keeps_the_sigterm_handler_it_found(tmp_path: Path) -> None:
    console, _ = _console()
    before = signal.getsignal(signal.SIGTERM)
    run = resumable_run(
        console, "score", results=_written(tmp_path), kept="every finished result is in o"
    )
    with run as on_progress:
        assert signal.getsignal(signal.SIGTERM) is not before
        on_progress(1, 2)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_is_an_interruption_with_the_resume_hint(tmp_path: Path) -> None:
    console, out = _console()
    run = resumable_run(
        console, "eval", results=_written(tmp_path), kept="finished samples are in s",
        interrupt_hint="!",
    )  # fmt: skip
    with pytest.raises(typer.Exit) as ended, run:
        os.kill(os.getpid(), signal.SIGTERM)
        wait_until(lambda: False, timeout_s=10, what="the SIGTERM handler")  # it raises
    assert ended.value.exit_code == EXIT_INTERRUPTED
    assert "interrupted: finished samples are in s; rerun with --resume!" in out.getvalue()


@pytest.mark.parametrize(
    ("error", "hint"),
    [(UnavailableError("verifier lost"), True), (InvalidArgumentError("bad --field"), False)],
)
def test_errors_exit_failed_and_a_cut_short_run_says_how_to_resume(
    error: Exception, hint: bool, tmp_path: Path
) -> None:
    console, out = _console()
    run = resumable_run(
        console, "score", results=_written(tmp_path), kept="every finished result is in o"
    )
    with pytest.raises(typer.Exit) as ended, run:
        raise error
    assert ended.value.exit_code == EXIT_FAILED
    text = out.getvalue()
    assert f"error: {type(error).__name__}: {error}" in text
    assert ("every finished result is in o; rerun with --resume" in text) is hint


@pytest.mark.parametrize("content", [None, b""])
def test_no_resume_hint_when_nothing_was_written(tmp_path: Path, content: bytes | None) -> None:
    """An interruption or a lost verifier before the first result: no file (or an empty one)
    to resume, so the message says nothing was written instead of "rerun with --resume"."""
    results = tmp_path / "out.jsonl"
    if content is not None:
        results.write_bytes(content)
    for error in (KeyboardInterrupt(), UnavailableError("verifier lost")):
        console, out = _console()
        run = resumable_run(console, "score", results=results, kept=f"all is in {results}")
        with pytest.raises(typer.Exit), run:
            raise error
        text = out.getvalue()
        assert "--resume" not in text and "all is in" not in text, text
        assert f"written to {results}" in text


@pytest.mark.parametrize(("unscored", "code"), [(0, 0), (1, EXIT_UNSCORED), (2, EXIT_UNSCORED),
                                              (250, EXIT_UNSCORED)])  # fmt: skip
def test_exit_for_unscored_is_one_code_apart_from_the_usage_code(unscored: int, code: int) -> None:
    """Rows without a reward exit 3 whatever their count (2 rows used to exit 2, typer's usage
    code); the count is in the message."""
    console, out = _console()
    with pytest.raises(typer.Exit) as ended:
        exit_for_unscored(console, unscored, rows="sample(s)")
    assert ended.value.exit_code == code
    assert EXIT_UNSCORED not in (0, 1, EXIT_USAGE, EXIT_FAILED, EXIT_INTERRUPTED)
    assert (f"{unscored} sample(s) got no reward" in out.getvalue()) is (unscored > 0)


@pytest.mark.parametrize(
    ("error", "shown"),
    [(UsageError("'gold' is not NAME=KEY", option="--field"),
      "Invalid value for '--field': 'gold' is not NAME=KEY"),
     (UsageError("exclude each other", option="--resume / --overwrite"),
      "Invalid value for '--resume' / '--overwrite': exclude each other")],
)  # fmt: skip
def test_a_usage_error_exits_2_naming_the_option(
    error: UsageError, shown: str, tmp_path: Path
) -> None:
    console, out = _console()
    run = resumable_run(console, "score", results=tmp_path / "o", kept="k")
    with pytest.raises(typer.BadParameter) as raised, run:
        raise error
    assert raised.value.exit_code == EXIT_USAGE
    assert raised.value.format_message() == shown
    assert "error:" not in out.getvalue()  # not the "could not finish" path
