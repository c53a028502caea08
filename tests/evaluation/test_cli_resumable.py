"""The frame of grpo score / grpo eval: how a run ends decides its exit code and message."""

from __future__ import annotations

import io
import os
import signal

import pytest
import typer
from helpers import wait_until
from rich.console import Console

from grpo.cli_resumable import EXIT_FAILED, EXIT_INTERRUPTED, resumable_run
from grpo.errors import InvalidArgumentError, UnavailableError


def _console() -> tuple[Console, io.StringIO]:
    out = io.StringIO()
    return Console(file=out, width=200), out


def test_a_finished_run_keeps_the_sigterm_handler_it_found() -> None:
    console, _ = _console()
    before = signal.getsignal(signal.SIGTERM)
    with resumable_run(console, "score", kept="every finished result is in o") as on_progress:
        assert signal.getsignal(signal.SIGTERM) is not before
        on_progress(1, 2)
    assert signal.getsignal(signal.SIGTERM) is before


def test_sigterm_is_an_interruption_with_the_resume_hint() -> None:
    console, out = _console()
    run = resumable_run(console, "eval", kept="finished samples are in s", interrupt_hint="!")
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
    error: Exception, hint: bool
) -> None:
    console, out = _console()
    run = resumable_run(console, "score", kept="every finished result is in o")
    with pytest.raises(typer.Exit) as ended, run:
        raise error
    assert ended.value.exit_code == EXIT_FAILED
    text = out.getvalue()
    assert f"error: {type(error).__name__}: {error}" in text
    assert ("every finished result is in o; rerun with --resume" in text) is hint
