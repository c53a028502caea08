"""How ``grpo score`` and ``grpo eval`` run: long, resumable commands with one ending rule.

Both write each finished result to disk as it arrives, so stopping them early loses nothing.
:func:`resumable_run` is their common frame:

- SIGTERM takes the Ctrl-C path (the handler is restored afterwards);
- a progress bar on the given console (stderr), fed by the ``on_progress(done, total)``
  callback it yields;
- Ctrl-C / SIGTERM: ``interrupted: <kept>; rerun with --resume<hint>`` and exit
  :data:`EXIT_INTERRUPTED`;
- a ``GrpoError``, ``OSError`` or ``ValueError``: ``error: <type>: <message>`` and exit
  :data:`EXIT_FAILED`; when the work was cut short (the verifier was lost: ``UnavailableError``;
  it broke the contract: ``ContractError``), also ``<kept>; rerun with --resume``.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from types import FrameType

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn

from grpo.errors import ContractError, GrpoError, UnavailableError

__all__ = ["EXIT_FAILED", "EXIT_INTERRUPTED", "exit_now_if_threads_linger", "resumable_run"]

EXIT_FAILED = 101
"""Exit code when the command could not finish (its finished rows are kept)."""
EXIT_INTERRUPTED = 130
"""Exit code after Ctrl-C / SIGTERM (finished rows are kept; rerun with --resume)."""


def exit_now_if_threads_linger(code: int) -> None:
    """End the process at once with ``code`` when non-daemon threads are still running.

    Called after an interrupt, once every finished result is flushed and closed: a call of
    an in-process verifier still running on a worker thread (a sandboxed infinite loop up to
    its request deadline) would otherwise be joined at interpreter exit, so Ctrl-C would wait
    for it. Nothing is lost by not waiting: its result could no longer be written. Returns
    (letting the caller exit normally) when only the main thread and daemons are left.

    Args:
        code: the exit status (``EXIT_INTERRUPTED``).
    """
    main = threading.main_thread()
    if threading.current_thread() is not main:
        return
    if not any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate()):
        return
    for stream in (sys.stdout, sys.stderr):
        with suppress(OSError, ValueError):
            stream.flush()
    os._exit(code)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    """SIGTERM takes the Ctrl-C path (finished results are already on disk)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise KeyboardInterrupt(f"signal {signum}")


@contextmanager
def resumable_run(
    console: Console, description: str, *, kept: str, interrupt_hint: str = ""
) -> Iterator[Callable[[int, int], None]]:
    """Run the body as a resumable command (see the module docstring); yields
    ``on_progress(done, total)`` for its progress bar.

    Must be entered from the main thread (it installs a SIGTERM handler).

    Args:
        console: where the bar and the messages go (stderr).
        description: the bar's label (``score math``, ``eval``).
        kept: where the finished results are, for the messages (``every finished result is
            in out.jsonl``).
        interrupt_hint: appended to the interrupted message (`` to score the rest``).

    Raises:
        typer.Exit: :data:`EXIT_INTERRUPTED` after Ctrl-C / SIGTERM, :data:`EXIT_FAILED`
            after a ``GrpoError``, ``OSError`` or ``ValueError`` (printed on ``console``).
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
        progress.update(bar, completed=done, total=total)

    try:
        with progress:
            yield on_progress
    except KeyboardInterrupt:
        console.print(f"[yellow]interrupted: {kept}; rerun with --resume{interrupt_hint}")
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except (GrpoError, OSError, ValueError) as exc:
        console.print(f"[red]error: {type(exc).__name__}: {exc}")
        if isinstance(exc, UnavailableError | ContractError):
            console.print(f"{kept}; rerun with --resume")
        raise typer.Exit(EXIT_FAILED) from None
    finally:
        signal.signal(signal.SIGTERM, previous)
