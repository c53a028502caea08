"""``grpo score {math,steps,code,custom}``: score a JSONL file of responses with a verifier.

A thin command over ``grpo.services.evaluation``: the input is read by
``evaluation.inputs`` (field map, bad lines), scored by ``evaluation.scoring.score_stream``
with an in-process verifier or one at ``--endpoint`` (``evaluation.scorers``), and written by
``evaluation.results.ResultsFile`` (appended and flushed as results arrive; ``--resume``).
Beside ``OUT.jsonl``, ``OUT.jsonl.run.json`` records what it was made from
(``evaluation.provenance``): ``--resume`` refuses an output made from another input, kind,
task type, field map or verifier, and scores again the rows that have no verdict
(``scoring.is_final``). docs/evaluation.md has the formats, exit codes and examples.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from grpo import __version__
from grpo.cli_resumable import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_UNSCORED,
    EXIT_USAGE,
    exit_for_unscored,
    resumable_run,
    table_console,
)
from grpo.errors import UsageError
from grpo.services.evaluation.inputs import FieldMap, InputSpec, ScoreItem, read_lines
from grpo.services.evaluation.provenance import RunRecord, bytes_sha256, verifier_identity
from grpo.services.evaluation.results import ResultsFile
from grpo.services.evaluation.scoring import (
    ScoreSummary,
    invalid_row,
    is_final,
    score_row,
    score_stream,
    summarize_rows,
)
from grpo.services.runtime.score_status import VERDICT_STATUSES
from grpo.v1 import verifier_pb2

__all__ = [
    "EXIT_FAILED",
    "EXIT_INTERRUPTED",
    "EXIT_UNSCORED",
    "EXIT_USAGE",
    "KINDS",
    "ScoreRun",
    "app",
    "record_path",
    "score_file",
]


def record_path(output: Path) -> Path:
    """The run record beside an output: ``OUT.jsonl`` -> ``OUT.jsonl.run.json``."""
    return output.with_name(output.name + ".run.json")


@dataclass(frozen=True)
class _Kind:
    """A built-in kind: its verifier service, the task type, required fields and kind."""

    service: str | None
    task_type: str
    verifier_kind: int | None
    require_gold: bool = False
    require_code_tests: bool = False
    input_help: str = ""


KINDS: dict[str, _Kind] = {
    "math": _Kind(
        "verifier-math",
        "math",
        verifier_pb2.VERIFIER_KIND_OUTCOME,
        require_gold=True,
        input_help="id, response, gold (the reference answer).",
    ),
    "steps": _Kind(
        "verifier-steps",
        "math",
        verifier_pb2.VERIFIER_KIND_PROCESS,
        input_help="id, response (gold optional, unused).",
    ),
    "code": _Kind(
        "verifier-code",
        "code",
        verifier_pb2.VERIFIER_KIND_OUTCOME,
        require_code_tests=True,
        input_help="id, response, and tests + entry_point (HumanEval), test_list "
        "[+ test_imports] (MBPP) or io_pairs (stdin/stdout); optional program_prefix.",
    ),
    "custom": _Kind(
        None,
        "",
        None,
        input_help="id, response, and whatever the verifier needs among prompt, gold, the "
        "code test fields and metadata.",
    ),
}
"""``grpo score`` subcommands."""

app = typer.Typer(
    help="Score a JSONL file of responses with a verifier (in process or over gRPC).",
    no_args_is_help=True,
)


@dataclass
class ScoreRun:
    """What one ``score_file`` call did.

    Attributes:
        summary: figures over every row of the output (resumed rows included).
        resumed: final rows already in the output (``--resume``), not scored again.
        scored_now: rows written by this call (invalid lines and retried rows included).
        retried: rows of the output without a verdict (``undecided``, ``internal``,
            ``too_large``) that this call scored again; the new row supersedes the old.
        wall_s: seconds this call spent scoring.
        verifier: the verifier's ``Describe`` answer.
    """

    summary: ScoreSummary
    resumed: int
    scored_now: int
    wall_s: float
    verifier: verifier_pb2.VerifierDescribeResponse
    retried: int = 0

    @property
    def unscored(self) -> int:
        """Rows without a reward (exit code 3 when > 0): ``invalid_input``, ``too_large``, and
        rows the verifier could not decide (a status that is no verdict,
        ``grpo.services.runtime.score_status``)."""
        return self.summary.refused + self.summary.missing


def _scorer(kind: str, options: dict[str, Any]) -> Any:
    from grpo.services.evaluation.scorers import open_scorer

    service = options["service"] or KINDS[kind].service
    if not options["endpoint"] and service is None:
        raise UsageError(
            "grpo score custom needs --endpoint or --service", option="--endpoint / --service"
        )
    return open_scorer(
        endpoint=options["endpoint"], service=service, deadline_s=options["deadline_s"],
        workers=options["workers"], max_attempts=options["max_attempts"],
        tls_ca=options["tls_ca"], tls_cert=options["tls_cert"], tls_key=options["tls_key"],
    )  # fmt: skip


def score_file(
    kind: str,
    input_path: Path,
    output_path: Path,
    *,
    task_type: str | None = None,
    fields: FieldMap | None = None,
    endpoint: str | None = None,
    service: str | None = None,
    workers: int = 2,
    batch_size: int = 16,
    max_request_bytes: int = 4 * 1024 * 1024,
    deadline_s: float = 300.0,
    max_attempts: int = 5,
    tls_ca: Path | None = None,
    tls_cert: Path | None = None,
    tls_key: Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    on_progress: Callable[[int, int], None] | None = None,
) -> ScoreRun:
    """Score every line of ``input_path`` (``-`` = stdin) into ``output_path``.

    Args:
        kind: ``math``, ``steps``, ``code`` or ``custom`` (any verifier; needs ``task_type``
            and ``endpoint`` or ``service``).
        input_path, output_path: JSONL input and output (docs/evaluation.md).
        task_type: ``Task.type`` of every item (default: the kind's, ``math`` or ``code``).
        fields: where each input field is read from.
        endpoint: ``HOST:PORT`` of a ``grpo.v1.Verifier``; None scores in this process.
        service: in-process verifier service for ``custom`` (``module:SERVICE``).
        workers: concurrent batches; in process also the verifier's worker processes.
        batch_size, max_request_bytes: batch limits (items, bytes).
        deadline_s: deadline of one ScoreBatch attempt (seconds), as the assembler's
            ``verifier.timeout_s``; in process, the request deadline of the servicer.
        max_attempts: attempts per batch when the verifier is unavailable (backoff 0.5 s
            doubling up to 8 s).
        tls_ca, tls_cert, tls_key: PEM files for TLS / mutual TLS to ``endpoint``.
        resume: keep the final rows already in ``output_path`` (verdicts, ``invalid_input``)
            and score the rest, the rows without a verdict included; refused when the
            output's run record (``OUT.jsonl.run.json``) names another input, kind, task
            type, field map or verifier, or when there is none (an older grpo).
        overwrite: replace an output that holds results.
        on_progress: ``(done, total)`` after each batch.

    Returns:
        A :class:`ScoreRun`.

    Raises:
        UsageError: bad options (the error names the option): the input cannot be read (not
            found, a directory, no permission), the output is the input, an output with
            results without ``resume``/``overwrite``, both of these; nothing is written.
        InvalidArgumentError: a resume of another run (nothing is written), bad settings.
        FailedPreconditionError: the verifier does not serve this task type or kind.
        UnavailableError: the verifier was lost (every finished row is in the output).
        KeyboardInterrupt: interrupted (every finished row is in the output).
        OSError: a file cannot be read or written.
    """
    from grpo.services.evaluation.scorers import check_verifier

    if kind not in KINDS:
        raise UsageError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    spec_kind = KINDS[kind]
    task_type = task_type or spec_kind.task_type
    if not task_type:
        raise UsageError(
            "grpo score custom needs --task-type (the verifier's)", option="--task-type"
        )
    if workers < 1 or batch_size < 1 or max_request_bytes < 1:
        raise UsageError("must be >= 1", option="--workers / --batch-size / --max-request-bytes")
    spec = InputSpec(
        task_type=task_type,
        require_gold=spec_kind.require_gold,
        require_code_tests=spec_kind.require_code_tests,
    )
    stdin = str(input_path) == "-"
    data = sys.stdin.buffer.read() if stdin else _read_input(input_path)
    created = not output_path.exists()
    started = False  # past the verifier check: the output stays, even empty
    fields = fields or FieldMap()
    results = ResultsFile(
        output_path,
        key=lambda row: str(row["id"]),
        resume=resume,
        overwrite=overwrite,
        inputs=() if stdin else (input_path,),
        keep=is_final,
        record_path=record_path(output_path),
        option="--output",
    )
    try:
        entries = list(read_lines(io.BytesIO(data), spec, fields))
        todo = [e for e in entries if e.id not in results.done]
        retried = sum(e.id in results.retry for e in todo)
        options = dict(
            endpoint=endpoint, service=service, workers=workers, batch_size=batch_size,
            deadline_s=deadline_s, max_attempts=max_attempts, tls_ca=tls_ca,
            tls_cert=tls_cert, tls_key=tls_key,
        )  # fmt: skip
        written = 0
        with _scorer(kind, options) as scorer:
            info = scorer.describe()
            start = time.perf_counter()  # items/s: scoring only, not the verifier's start
            hint = "use grpo score custom --task-type NAME for a verifier of your own"
            check_verifier(
                info, task_type=task_type, kind=spec_kind.verifier_kind, where=scorer.where,
                hint=hint,
            )  # fmt: skip
            results.claim(
                RunRecord(
                    "score",
                    identity={
                        "input_sha256": bytes_sha256(data),
                        "kind": kind,
                        "task_type": task_type,
                        "fields": dict(sorted(fields.keys.items())),
                        "verifier": verifier_identity(info),
                    },
                    about={
                        "input": "-" if stdin else str(input_path.resolve()),
                        "verifier_at": scorer.where,
                        "grpo": __version__,
                    },
                )
            )
            started = True
            written += results.append(invalid_row(e) for e in todo if not isinstance(e, ScoreItem))
            items = [e for e in todo if isinstance(e, ScoreItem)]
            total = len(todo)
            if on_progress is not None:
                on_progress(written, total)

            def sink(batch: list[Any]) -> None:
                nonlocal written
                written += results.append(score_row(item, outcome) for item, outcome in batch)
                if on_progress is not None:
                    on_progress(written, total)

            score_stream(
                items, scorer, sink, workers=workers, max_items=batch_size,
                max_bytes=max_request_bytes,
            )  # fmt: skip
        results.sort(lambda row: int(row.get("line", 0)))
        return ScoreRun(
            summary=summarize_rows(results.rows()),
            resumed=results.resumed_rows,
            scored_now=written,
            wall_s=time.perf_counter() - start,
            verifier=info,
            retried=retried,
        )
    finally:
        results.close()
        if created and not started and output_path.stat().st_size == 0:
            output_path.unlink()  # refused before any row (a mismatched verifier): no stray file


def _read_input(path: Path) -> bytes:
    """The bytes of the input file.

    Raises:
        UsageError: (``option="--input"``) the file does not exist, is a directory, or
            cannot be read; the message names the path.
    """
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise UsageError(f"input file not found: {path}", option="--input") from None
    except IsADirectoryError:
        raise UsageError(
            f"input {path} is a directory, not a JSONL file", option="--input"
        ) from None
    except OSError as exc:
        raise UsageError(
            f"input file {path} cannot be read: {exc.strerror or exc}", option="--input"
        ) from None


def _status_names(verdicts: bool) -> str:
    """The statuses that are (or are not) verdicts, by ``grpo.services.runtime.score_status``."""
    from grpo.services.evaluation.scoring import status_name
    from grpo.v1 import common_pb2

    values = [
        v for v in common_pb2.ScoreStatus.values() if v != common_pb2.SCORE_STATUS_UNSPECIFIED
    ]
    return ", ".join(sorted(status_name(v) for v in values if (v in VERDICT_STATUSES) == verdicts))


def summary_table(title: str, run: ScoreRun) -> Table:
    """A rich table of a run: rows, statuses, reward mean over verdicts, latency, items/s."""
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


def _command(kind: str) -> Callable[..., None]:
    def command(
        input: Annotated[
            Path, typer.Option("--input", "-i", help="JSONL input file; '-' reads stdin.")
        ],
        output: Annotated[
            Path, typer.Option("--output", "-o", help="JSONL output (not the input file).")
        ],
        resume: Annotated[
            bool,
            typer.Option(
                help="Continue --output: keep its rows with a verdict or invalid_input, score "
                "the rest, and score again the rows without a verdict (undecided, internal, "
                "too_large). Refused if --output was made from another input, kind, task type, "
                "--field map or verifier."
            ),
        ] = False,
        overwrite: Annotated[
            bool, typer.Option(help="Replace an --output that already holds results.")
        ] = False,
        field: Annotated[
            list[str] | None,
            typer.Option(
                "--field", help="NAME=KEY: read input field NAME from KEY (dots for nesting)."
            ),
        ] = None,
        task_type: Annotated[
            str | None,
            typer.Option(help="Task.type sent to the verifier (default: math / code)."),
        ] = None,
        endpoint: Annotated[
            str | None, typer.Option(help="HOST:PORT of a verifier service; default in process.")
        ] = None,
        service: Annotated[
            str | None,
            typer.Option(help="custom: module:SERVICE of a verifier to run in process."),
        ] = None,
        workers: Annotated[
            int, typer.Option(min=1, help="Concurrent batches (in process: also worker processes).")
        ] = 2,
        batch_size: Annotated[int, typer.Option(min=1, help="Most items per ScoreBatch.")] = 16,
        max_request_bytes: Annotated[
            int, typer.Option(min=1, help="Most bytes per ScoreBatch; a larger item goes alone.")
        ] = 4 * 1024 * 1024,
        deadline: Annotated[
            float, typer.Option(min=0.001, help="Deadline of one ScoreBatch attempt (seconds).")
        ] = 300.0,
        max_attempts: Annotated[
            int, typer.Option(min=1, help="Attempts per batch while the verifier is unavailable.")
        ] = 5,
        tls_ca: Annotated[
            Path | None, typer.Option(help="PEM CA of the verifier's certificate (TLS).")
        ] = None,
        tls_cert: Annotated[
            Path | None, typer.Option(help="PEM client certificate (mutual TLS).")
        ] = None,
        tls_key: Annotated[Path | None, typer.Option(help="PEM key of --tls-cert.")] = None,
    ) -> None:
        console = table_console(stderr=True)
        kept = f"every finished result is in {output}"
        # An interrupt closes the in-process verifier: its threads still in an item are
        # daemons (grpo.verifiers.sdk.threads), so the exit does not wait for them.
        with resumable_run(
            console, f"score {kind}", results=output, kept=kept,
            interrupt_hint=" to score the rest",
        ) as on_progress:  # fmt: skip
            run = score_file(
                kind, input, output, task_type=task_type,
                fields=FieldMap.parse(field or []), endpoint=endpoint, service=service,
                workers=workers, batch_size=batch_size,
                max_request_bytes=max_request_bytes, deadline_s=deadline,
                max_attempts=max_attempts, tls_ca=tls_ca, tls_cert=tls_cert,
                tls_key=tls_key, resume=resume, overwrite=overwrite,
                on_progress=on_progress,
            )  # fmt: skip
        console.print(summary_table(f"grpo score {kind}: {output}", run))
        exit_for_unscored(console, run.unscored, rows="line(s)")

    command.__doc__ = (
        f"Score {kind} responses from --input into --output.\n\n"
        f"Input lines: {KINDS[kind].input_help} Output lines: line, id, status, reward (null "
        "unless a verdict), extracted, detail, latency_s, verifier, and steps or tests; a bad "
        "line gets status invalid_input with the reason. Results are appended as they "
        "arrive; OUTPUT.run.json records the input's hash and the verifier for --resume. "
        "The in-process verifier reads GRPO_* settings variables as grpo serve does "
        "(docs/configuration.md; --workers and --deadline win). Exit code: 0 when every line "
        "has a reward, 2 for a bad invocation (nothing written), 3 when some lines got no "
        "reward (the count is printed), 101 when the run could not finish, 130 when "
        "interrupted."
    )
    return command


for _kind in KINDS:
    app.command(name=_kind, no_args_is_help=True)(_command(_kind))
