"""Scoring a JSONL file of responses with a verifier: what ``grpo score`` runs.

One frozen :class:`ScoreJob` says everything about a run (the kind, the files, the verifier and
its limits, resume or overwrite); :func:`score_file` runs it. The input is read by
``inputs.read_lines`` (field map, bad lines), scored by ``scoring.score_stream`` with an
in-process verifier or one at ``endpoint`` (``scorers.open_scorer``), and written by
``results.ResultsFile`` (appended and flushed as results arrive; ``resume``). Beside
``OUT.jsonl``, ``OUT.jsonl.run.json`` records what it was made from (``provenance``): a resume
refuses an output made from another input, kind, task type, field map or verifier, and scores
again the rows that have no verdict (``scoring.is_final``). docs/evaluation.md has the formats.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from grpo import __version__
from grpo.errors import UsageError
from grpo.services.evaluation.inputs import FieldMap, InputSpec, ScoreItem, read_lines
from grpo.services.evaluation.provenance import RunRecord, bytes_sha256, verifier_identity
from grpo.services.evaluation.results import ResultsFile
from grpo.services.evaluation.scorers import (
    BatchScorer,
    VerifierTarget,
    check_target,
    check_verifier,
    open_scorer,
)
from grpo.services.evaluation.scoring import (
    ScoreSummary,
    invalid_row,
    is_final,
    score_row,
    score_stream,
    summarize_rows,
)
from grpo.v1 import verifier_pb2

__all__ = ["KINDS", "ScoreJob", "ScoreKind", "ScoreRun", "read_input", "record_path", "score_file"]


def record_path(output: Path) -> Path:
    """The run record beside an output: ``OUT.jsonl`` -> ``OUT.jsonl.run.json``."""
    return output.with_name(output.name + ".run.json")


DEFAULT_BATCHES = 2
"""Batches in flight of a ``grpo score`` run without ``--workers``."""


@dataclass(frozen=True)
class ScoreKind:
    """A built-in kind: its verifier service, the task type, required fields and kind."""

    service: str | None
    task_type: str
    verifier_kind: int | None
    require_gold: bool = False
    require_code_tests: bool = False
    input_help: str = ""


KINDS: dict[str, ScoreKind] = {
    "math": ScoreKind(
        "verifier-math",
        "math",
        verifier_pb2.VERIFIER_KIND_OUTCOME,
        require_gold=True,
        input_help="id, response, gold (the reference answer).",
    ),
    "steps": ScoreKind(
        "verifier-steps",
        "math",
        verifier_pb2.VERIFIER_KIND_PROCESS,
        input_help="id, response (gold optional, unused).",
    ),
    "code": ScoreKind(
        "verifier-code",
        "code",
        verifier_pb2.VERIFIER_KIND_OUTCOME,
        require_code_tests=True,
        input_help="id, response, and tests + entry_point (HumanEval), test_list "
        "[+ test_imports] (MBPP) or io_pairs (stdin/stdout); optional program_prefix.",
    ),
    "custom": ScoreKind(
        None,
        "",
        None,
        input_help="id, response, and whatever the verifier needs among prompt, gold, the "
        "code test fields and metadata.",
    ),
}
"""``grpo score`` subcommands."""


@dataclass(frozen=True)
class ScoreJob:
    """One ``grpo score`` run: score every line of ``input_path`` (``-`` = stdin) into
    ``output_path``.

    Attributes:
        kind: ``math``, ``steps``, ``code`` or ``custom`` (any verifier; needs ``task_type``
            and ``endpoint`` or ``service``).
        input_path, output_path: JSONL input and output (docs/evaluation.md).
        task_type: ``Task.type`` of every item; None = the kind's (``math`` or ``code``).
        fields: where each input field is read from.
        endpoint: ``HOST:PORT`` of a ``grpo.v1.Verifier``; None scores in this process.
        service: in-process verifier service (``module:SERVICE``); None = the kind's.
        workers: concurrent batches (None: :data:`DEFAULT_BATCHES`); in process also the
            verifier's workers (``verifier.pool.workers`` of math and steps,
            ``scoring.concurrency`` of code), which None leaves to the environment
            (``GRPO_VERIFIER__POOL__WORKERS``, ``GRPO_SCORING__CONCURRENCY``), else the
            service's default: flag > environment > default.
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

    Raises:
        UsageError: (naming the option) an unknown kind, ``custom`` without a task type or
            without an endpoint or service, a limit below 1.
    """

    kind: str
    input_path: Path
    output_path: Path
    task_type: str | None = None
    fields: FieldMap = field(default_factory=FieldMap)
    endpoint: str | None = None
    service: str | None = None
    workers: int | None = None
    batch_size: int = 16
    max_request_bytes: int = 4 * 1024 * 1024
    deadline_s: float = 300.0
    max_attempts: int = 5
    tls_ca: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    resume: bool = False
    overwrite: bool = False

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise UsageError(f"unknown kind {self.kind!r}; valid: {', '.join(KINDS)}")
        if not (self.task_type or KINDS[self.kind].task_type):
            raise UsageError(
                "grpo score custom needs --task-type (the verifier's)", option="--task-type"
            )
        if (
            (self.workers is not None and self.workers < 1)
            or self.batch_size < 1
            or self.max_request_bytes < 1
        ):
            raise UsageError(
                "must be >= 1", option="--workers / --batch-size / --max-request-bytes"
            )
        if not self.endpoint and not (self.service or KINDS[self.kind].service):
            raise UsageError(
                "grpo score custom needs --endpoint or --service", option="--endpoint / --service"
            )

    @property
    def spec(self) -> ScoreKind:
        """The kind's built-in description."""
        return KINDS[self.kind]

    @property
    def resolved_task_type(self) -> str:
        """``task_type``, else the kind's."""
        return self.task_type or self.spec.task_type

    @property
    def stdin(self) -> bool:
        """The input is standard input (``-``)."""
        return str(self.input_path) == "-"

    def verifier(self) -> VerifierTarget:
        """The verifier to call (``scorers.open_scorer``)."""
        return VerifierTarget(
            endpoint=self.endpoint, service=self.service or self.spec.service,
            deadline_s=self.deadline_s, workers=self.workers, max_attempts=self.max_attempts,
            tls_ca=self.tls_ca, tls_cert=self.tls_cert, tls_key=self.tls_key,
        )  # fmt: skip


@dataclass
class ScoreRun:
    """What one :func:`score_file` call did.

    Attributes:
        summary: figures over every row of the output (resumed rows included).
        resumed: final rows already in the output (``resume``), not scored again.
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


def score_file(job: ScoreJob, on_progress: Callable[[int, int], None] | None = None) -> ScoreRun:
    """Run ``job``: score every line of its input into its output.

    Args:
        job: the run (see :class:`ScoreJob`).
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
    spec = InputSpec(
        task_type=job.resolved_task_type,
        require_gold=job.spec.require_gold,
        require_code_tests=job.spec.require_code_tests,
    )
    data = sys.stdin.buffer.read() if job.stdin else read_input(job.input_path)
    check_target(  # an endpoint that does not answer: refused before anything is written
        job.verifier(), task_type=job.resolved_task_type, kind=job.spec.verifier_kind,
        hint=_HINT,
    )  # fmt: skip
    created = not job.output_path.exists()
    results = ResultsFile(
        job.output_path, key=lambda row: str(row["id"]), resume=job.resume,
        overwrite=job.overwrite, inputs=() if job.stdin else (job.input_path,), keep=is_final,
        record_path=record_path(job.output_path), option="--output",
    )  # fmt: skip
    started = False  # past the verifier check: the output stays, even empty
    try:
        entries = list(read_lines(io.BytesIO(data), spec, job.fields))
        todo = [e for e in entries if e.id not in results.done]
        retried = sum(e.id in results.retry for e in todo)
        with open_scorer(job.verifier()) as scorer:
            info = scorer.describe()
            start = time.perf_counter()  # items/s: scoring only, not the verifier's start
            _claim(job, scorer, info, results, data)
            started = True
            written = _score_entries(job, todo, scorer, results, on_progress)
        results.sort(lambda row: int(row.get("line", 0)))
        return ScoreRun(
            summary=summarize_rows(results.rows()), resumed=results.resumed_rows,
            scored_now=written, wall_s=time.perf_counter() - start, verifier=info,
            retried=retried,
        )  # fmt: skip
    finally:
        results.close()
        if created and not started and job.output_path.stat().st_size == 0:
            job.output_path.unlink()  # refused before any row (a mismatched verifier)


_HINT = "use grpo score custom --task-type NAME for a verifier of your own"


def _claim(
    job: ScoreJob,
    scorer: BatchScorer,
    info: verifier_pb2.VerifierDescribeResponse,
    results: ResultsFile,
    data: bytes,
) -> None:
    """Check the verifier serves the job, then write (or, on resume, check) the run record.

    Raises:
        EndpointCheckError: the verifier does not serve the task type or kind.
        InvalidArgumentError: a resume of another run.
    """
    check_verifier(
        info, task_type=job.resolved_task_type, kind=job.spec.verifier_kind, where=scorer.where,
        hint=_HINT,
    )  # fmt: skip
    identity = {
        "input_sha256": bytes_sha256(data),
        "kind": job.kind,
        "task_type": job.resolved_task_type,
        "fields": dict(sorted(job.fields.keys.items())),
        "verifier": verifier_identity(info),
    }
    about = {
        "input": "-" if job.stdin else str(job.input_path.resolve()),
        "verifier_at": scorer.where,
        "grpo": __version__,
    }
    results.claim(RunRecord("score", identity=identity, about=about))


def _score_entries(
    job: ScoreJob,
    todo: list[Any],
    scorer: BatchScorer,
    results: ResultsFile,
    on_progress: Callable[[int, int], None] | None,
) -> int:
    """Write the invalid lines' rows, then score the items into ``results``; returns the rows
    written."""
    written = results.append(invalid_row(e) for e in todo if not isinstance(e, ScoreItem))
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
        items, scorer, sink, workers=job.workers or DEFAULT_BATCHES, max_items=job.batch_size,
        max_bytes=job.max_request_bytes,
    )  # fmt: skip
    return written


def read_input(path: Path) -> bytes:
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
