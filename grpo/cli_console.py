"""The console of ``grpo score`` and ``grpo eval``: their signal handling, progress, exit codes
and results tables, in one module.

Both are long, resumable commands with one ending rule.

Both write each finished result to disk as it arrives, so stopping them early loses nothing.
:func:`resumable_run` is their common frame:

- SIGTERM takes the Ctrl-C path (the handler is restored afterwards);
- a progress bar on the given console (stderr), fed by the ``on_progress(done, total)``
  callback it yields, shown from its first call (a refusal before any work prints no bar);
- Ctrl-C / SIGTERM: ``interrupted: <kept>; rerun with --resume<hint>`` and exit
  :data:`EXIT_INTERRUPTED`;
- a ``grpo.errors.UsageError`` (a bad option value, options that exclude each other, an
  input that cannot be read; raised before anything is written): re-raised as
  ``typer.BadParameter`` naming its option(s), so the command exits :data:`EXIT_USAGE` with
  ``Invalid value for '--field': ...``, as typer does for its own parsing errors;
- an ``EndpointCheckError`` (an address that did not answer the check before any work, or
  answered as another kind of service): :func:`fail`, one plain line and exit
  :data:`EXIT_USAGE`, as ``grpo run`` and ``grpo check-verifier`` report it;
- another ``GrpoError``, ``OSError`` or ``ValueError``: ``error: <type>: <message>`` and exit
  :data:`EXIT_FAILED`; when the work was cut short (the verifier was lost: ``UnavailableError``;
  it broke the contract: ``ContractError``), also ``<kept>; rerun with --resume``.

The resume hint is given only when the results file holds something; when nothing was
written, the message says so instead (there is nothing to resume).

A finished run ends with :func:`exit_for_unscored`, the one exit-code rule of both commands:
0 when every result row has a reward (``scoring.has_reward``), else :data:`EXIT_UNSCORED`,
with the count printed. Their tables: :func:`score_table` (a ``ScoreRun``) and
:func:`eval_table` (an ``EvalReport``); :func:`table_console` prints them uncut when the output
is not a terminal.

The codes do not overlap: 0 done, 2 usage (a bad invocation, or an endpoint that does not
answer the check before any work: nothing was written), 3 done with rows without a reward,
101 could not finish, 130 interrupted (1 is left to an unexpected crash).

:func:`fail` is how every ``grpo`` command reports a refusal before any work: ``error:
<message>`` as one plain line on stderr (never wrapped or boxed), then the exit code.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from grpo.errors import ContractError, EndpointCheckError, GrpoError, UnavailableError, UsageError

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_UNSCORED",
    "EXIT_USAGE",
    "eval_table",
    "exit_for_unscored",
    "fail",
    "resumable_run",
    "score_table",
    "table_console",
]

EXIT_FAILED = 101
"""Exit code when the command could not finish (its finished rows are kept)."""
EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C / SIGTERM (finished rows are kept; rerun with --resume)."""
EXIT_USAGE = 2
"""Exit code of a bad invocation (typer's own, for an unknown option or a bad value too):
nothing was written."""
EXIT_UNSCORED = 3
"""Exit code of a finished run in which at least one row got no reward (the count is printed,
and in ``grpo eval``'s ``summary.json``: ``unscored_samples``)."""
UNBOUNDED_WIDTH = 100_000
"""Console width when the output is not a terminal and COLUMNS is unset: tables keep their
natural width (rich pads nothing to the console width), never cut to 80 columns."""


def fail(message: str, code: int = EXIT_USAGE) -> NoReturn:
    """End a command that refused before any work: ``error: <message>`` as one plain line on
    stderr (whitespace runs, newlines included, become one space), then exit ``code``.

    Raises:
        typer.Exit: always, with ``code``.
    """
    typer.echo(f"error: {' '.join(str(message).split())}", err=True)
    raise typer.Exit(code)


def table_console(*, stderr: bool = False) -> Console:
    """A console for results tables: the terminal's width on a terminal, ``COLUMNS`` when it
    is set, else (a pipe or a file) :data:`UNBOUNDED_WIDTH`, so no column is truncated."""
    console = Console(stderr=stderr)
    if console.is_terminal or os.environ.get("COLUMNS"):
        return console
    return Console(stderr=stderr, width=UNBOUNDED_WIDTH)


def exit_for_unscored(console: Console, unscored: int, *, rows: str) -> NoReturn:
    """End a finished run: exit 0 when every row has a reward, else :data:`EXIT_UNSCORED`.

    The rule of ``grpo score`` and ``grpo eval`` alike; ``unscored`` counts the result rows
    for which ``grpo.services.evaluation.scoring.has_reward`` is False (``invalid_input``,
    ``too_large``, and statuses that are no verdict: ``undecided``, ``internal``). A fixed code,
    not the count: a count would meet the usage code 2 and the crash code 1.

    Args:
        console: where the warning with the count goes (stderr) when ``unscored`` > 0.
        unscored: rows without a reward (>= 0).
        rows: what a row is, for the message (``line(s)``, ``sample(s)``).

    Raises:
        typer.Exit: always, with the exit code.
    """
    code = EXIT_UNSCORED if unscored else 0
    if unscored:
        console.print(
            f"[yellow]{unscored} {rows} got no reward (invalid_input, too_large or a status "
            f"that is no verdict, with the reason in 'detail'); exit code {code}"
        )
    raise typer.Exit(code)


def _kept(results: Path, kept: str) -> str | None:
    """``kept`` when ``results`` holds something, else None (nothing to resume)."""
    try:
        return kept if results.stat().st_size > 0 else None
    except OSError:
        return None


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM takes the Ctrl-C path (finished results are already on disk)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def resumable_run(
    console: Console, description: str, *, results: Path, kept: str, interrupt_hint: str = ""
) -> Iterator[Callable[[int, int], None]]:
    """Run the body as a resumable command (see the module docstring); yields
    ``on_progress(done, total)`` for its progress bar.

    Must be entered from the main thread (it installs a SIGTERM handler).

    Args:
        console: where the bar and the messages go (stderr).
        description: the bar's label (``score math``, ``eval``).
        results: the results file; the resume hint is given only when it holds something.
        kept: where the finished results are, for the messages (``every finished result is
            in out.jsonl``).
        interrupt_hint: appended to the interrupted message (`` to score the rest``).

    Raises:
        typer.BadParameter: after a ``UsageError``; the command line prints it, naming the
            option, and exits :data:`EXIT_USAGE`.
        typer.Exit: :data:`EXIT_USAGE` after an ``EndpointCheckError`` (:func:`fail`).
        typer.Exit: :data:`EXIT_INTERRUPTED` after Ctrl-C / SIGTERM, :data:`EXIT_FAILED`
            after another ``GrpoError``, ``OSError`` or ``ValueError`` (printed on ``console``).
    """
    previous = signal.signal(signal.SIGTERM, _interrupt)
    progress = Progress(
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
    )
    bar = progress.add_task(description, total=None)

    def on_progress(done: int, total: int) -> None:
        if not progress.live.is_started:  # shown once work begins, not during the checks
            progress.start()
        progress.update(bar, completed=done, total=total)

    try:
        try:
            yield on_progress
        finally:
            if progress.live.is_started:
                progress.stop()
    except KeyboardInterrupt:
        if (written := _kept(results, kept)) is not None:
            console.print(f"[yellow]interrupted: {written}; rerun with --resume{interrupt_hint}")
        else:
            console.print(f"[yellow]interrupted before any result was written to {results}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except EndpointCheckError as exc:
        fail(str(exc))
    except UsageError as exc:
        hint = " / ".join(f"'{o.strip()}'" for o in exc.option.split("/")) if exc.option else None
        raise typer.BadParameter(str(exc), param_hint=hint) from None
    except (GrpoError, OSError, ValueError) as exc:
        console.print(f"[red]error: {type(exc).__name__}: {exc}")
        if isinstance(exc, UnavailableError | ContractError):
            if (written := _kept(results, kept)) is not None:
                console.print(f"{written}; rerun with --resume")
            else:
                console.print(f"no result was written to {results}")
        raise typer.Exit(EXIT_FAILED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)


def _fmt(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.4f}"


def eval_table(title: str, report: Any) -> Table:
    """A rich table of an ``EvalReport`` (``grpo eval``): one row overall, one per value of
    each --by field; the caption says which samples (no verdict) the rates leave out, and
    why the most common of them got none."""
    from grpo.services.evaluation.scoring import is_verdict_status

    ks = list(report.settings.ks)
    table = Table(title=title)
    m = report.overall
    if m.missing_samples:
        left_out = ", ".join(
            f"{s} {c}" for s, c in sorted(m.statuses.items()) if not is_verdict_status(s)
        )
        why = "; ".join(f"{c} {s}: {reason}" for s, reason, c in report.missing_reasons)
        table.caption = (
            f"missing: {m.missing_samples} of {m.samples} samples have no verdict ({left_out}); "
            "they are left out of pass@k, maj@k and the reward mean"
            + (f"\nwhy: {why}" if why else "")
        )
    for name in ["slice", "problems", "samples", *[f"pass@{k}" for k in ks], f"maj@{max(ks)}",
                 "reward mean", "missing", "statuses"]:  # fmt: skip
        table.add_column(name, justify="left" if name in ("slice", "statuses") else "right")

    def add(label: str, m: Any) -> None:
        statuses = ", ".join(f"{s} {c}" for s, c in sorted(m.statuses.items()))
        table.add_row(
            label, str(m.problems), str(m.samples), *[_fmt(m.pass_at[k]) for k in ks],
            _fmt(m.maj_at_k), _fmt(m.reward_mean), str(m.missing_samples), statuses,
        )  # fmt: skip

    add("all", report.overall)
    for name, values in report.by_field.items():
        for value, metrics in values.items():
            add(f"{name}={value or '(none)'}", metrics)
    return table


def _status_names(verdicts: bool) -> str:
    """The statuses that are (or are not) verdicts, by ``grpo.services.runtime.score_status``."""
    from grpo.services.evaluation.scoring import status_name
    from grpo.services.runtime.score_status import VERDICT_STATUSES
    from grpo.v1 import common_pb2

    values = [
        v for v in common_pb2.ScoreStatus.values() if v != common_pb2.SCORE_STATUS_UNSPECIFIED
    ]
    return ", ".join(sorted(status_name(v) for v in values if (v in VERDICT_STATUSES) == verdicts))


def score_table(title: str, run: Any) -> Table:
    """A rich table of a ``ScoreRun`` (``grpo score``): rows, statuses, reward mean over
    verdicts, latency, items/s."""
    s = run.summary
    table = Table(title=title)
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("rows in the output", str(s.rows))
    table.add_row("  resumed (already there)", str(run.resumed))
    table.add_row("  written now", str(run.scored_now))
    table.add_row("    of which retried (had no verdict)", str(run.retried))
    table.add_row("verdicts (reward counts)", str(s.verdicts))
    table.add_row(f"missing ({_status_names(False)})", str(s.missing))
    table.add_row("no score (invalid_input, too_large)", str(s.refused))
    mean = "n/a" if s.reward_mean is None else f"{s.reward_mean:.4f}"
    table.add_row(f"reward mean over verdicts ({_status_names(True)})", mean)
    for status, count in sorted(s.statuses.items()):
        table.add_row(f"status {status}", str(count))
    table.add_row("latency p50 (ms)", f"{s.latency_p50_s * 1e3:.1f}")
    table.add_row("latency p99 (ms)", f"{s.latency_p99_s * 1e3:.1f}")
    rate = run.scored_now / run.wall_s if run.wall_s > 0 else 0.0
    table.add_row("items/s (this run)", f"{rate:.1f}")
    return table
