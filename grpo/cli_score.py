"""``grpo score {math,steps,code,custom}``: score a JSONL file of responses with a verifier.

A thin command over ``grpo.services.evaluation.score_file``: the options become one frozen
``ScoreJob``, run by ``score_file`` inside ``cli_console.resumable_run`` (SIGTERM as Ctrl-C,
the progress bar, the exit codes), and the result is printed by ``cli_console.score_table``.
docs/evaluation.md has the formats, exit codes and examples.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer

from grpo.cli_console import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNSCORED,
    EXIT_USAGE,
    exit_for_unscored,
    resumable_run,
    score_table,
    table_console,
)
from grpo.services.evaluation.inputs import FieldMap
from grpo.services.evaluation.score_file import KINDS, ScoreJob, ScoreRun, record_path, score_file

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_UNSCORED",
    "EXIT_USAGE",
    "KINDS",
    "ScoreJob",
    "ScoreRun",
    "app",
    "record_path",
    "score_file",
]

app = typer.Typer(
    help="Score a JSONL file of responses with a verifier (in process or over gRPC).",
    no_args_is_help=True,
)

Input = Annotated[Path, typer.Option("--input", "-i", help="JSONL input file; '-' reads stdin.")]
Output = Annotated[Path, typer.Option("--output", "-o", help="JSONL output (not the input file).")]
Resume = Annotated[
    bool,
    typer.Option(
        help="Continue --output: keep its rows with a verdict or invalid_input, score the rest, "
        "and score again the rows without a verdict (undecided, internal, too_large). Refused "
        "if --output was made from another input, kind, task type, --field map or verifier."
    ),
]
Overwrite = Annotated[bool, typer.Option(help="Replace an --output that already holds results.")]
Fields = Annotated[
    list[str] | None,
    typer.Option("--field", help="NAME=KEY: read input field NAME from KEY (dots for nesting)."),
]
TaskType = Annotated[
    str | None, typer.Option(help="Task.type sent to the verifier (default: math / code).")
]
Endpoint = Annotated[
    str | None, typer.Option(help="HOST:PORT of a verifier service; default in process.")
]
Service = Annotated[str | None, typer.Option(help="(set per kind by _service_option)")]


def _service_option(kind: str) -> object:
    """The ``--service`` option of ``kind``, its help true for that kind: math, steps and
    code run their built-in verifier unless it names another; custom has none."""
    built_in = KINDS[kind].service
    text = (
        f"Verifier to run in process instead of {built_in}: module:SERVICE of a ServiceSpec or "
        "a registered name (grpo serve's)."
        if built_in
        else "Verifier to run in process: module:SERVICE of a ServiceSpec or a registered "
        "name (grpo serve's); custom needs it or --endpoint."
    )
    return Annotated[str | None, typer.Option(help=text)]


Workers = Annotated[
    int | None,
    typer.Option(
        min=1,
        help="Concurrent batches (unset: 2); in process also the verifier's workers (math, "
        "steps: worker processes; code: concurrent samples), which unset come from "
        "GRPO_VERIFIER__POOL__WORKERS / GRPO_SCORING__CONCURRENCY, else the verifier's "
        "default (2; code 8).",
    ),
]
BatchSize = Annotated[int, typer.Option(min=1, help="Most items per ScoreBatch.")]
MaxRequestBytes = Annotated[
    int, typer.Option(min=1, help="Most bytes per ScoreBatch; a larger item goes alone.")
]
Deadline = Annotated[
    float, typer.Option(min=0.001, help="Deadline of one ScoreBatch attempt (seconds).")
]
MaxAttempts = Annotated[
    int, typer.Option(min=1, help="Attempts per batch while the verifier is unavailable.")
]
TlsCa = Annotated[Path | None, typer.Option(help="PEM CA of the verifier's certificate (TLS).")]
TlsCert = Annotated[Path | None, typer.Option(help="PEM client certificate (mutual TLS).")]
TlsKey = Annotated[Path | None, typer.Option(help="PEM key of --tls-cert.")]


def _command(kind: str) -> Callable[..., None]:
    """The typer command of one kind: its options become a ``ScoreJob``."""

    def command(
        input: Input,
        output: Output,
        resume: Resume = False,
        overwrite: Overwrite = False,
        field: Fields = None,
        task_type: TaskType = None,
        endpoint: Endpoint = None,
        service: Service = None,
        workers: Workers = None,
        batch_size: BatchSize = 16,
        max_request_bytes: MaxRequestBytes = 4 * 1024 * 1024,
        deadline: Deadline = 300.0,
        max_attempts: MaxAttempts = 5,
        tls_ca: TlsCa = None,
        tls_cert: TlsCert = None,
        tls_key: TlsKey = None,
    ) -> None:
        console = table_console(stderr=True)
        kept = f"every finished result is in {output}"
        # An interrupt closes the in-process verifier: its threads still in an item are
        # daemons (grpo.verifiers.sdk.threads), so the exit does not wait for them.
        with resumable_run(
            console, f"score {kind}", results=output, kept=kept,
            interrupt_hint=" to score the rest",
        ) as on_progress:  # fmt: skip
            job = ScoreJob(
                kind, input, output, task_type=task_type, fields=FieldMap.parse(field or []),
                endpoint=endpoint, service=service, workers=workers, batch_size=batch_size,
                max_request_bytes=max_request_bytes, deadline_s=deadline,
                max_attempts=max_attempts, tls_ca=tls_ca, tls_cert=tls_cert, tls_key=tls_key,
                resume=resume, overwrite=overwrite,
            )  # fmt: skip
            run = score_file(job, on_progress)
        console.print(score_table(f"grpo score {kind}: {output}", run))
        exit_for_unscored(console, run.unscored, rows="line(s)")

    command.__annotations__["service"] = _service_option(kind)
    command.__doc__ = (
        f"Score {kind} responses from --input into --output.\n\n"
        f"Input lines: {KINDS[kind].input_help} Output lines: line, id, status, reward (null "
        "unless a verdict), extracted, detail, latency_s, verifier, and steps or tests; a bad "
        "line gets status invalid_input with the reason. Results are appended as they "
        "arrive; OUTPUT.run.json records the input's hash and the verifier for --resume. "
        "The in-process verifier reads GRPO_* settings variables as grpo serve does "
        "(docs/configuration.md; --workers and --deadline win). Exit code: 0 when every line "
        "has a reward, 2 for a bad invocation or an --endpoint that does not answer its Describe "
        "at the start (nothing written), 3 when some lines got no "
        "reward (the count is printed), 101 when the run could not finish, 130 when "
        "interrupted."
    )
    return command


for _kind in KINDS:
    app.command(name=_kind, no_args_is_help=True)(_command(_kind))
