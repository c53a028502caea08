"""``grpo score {math,steps,code}``: score a JSONL file of responses, in-process or over gRPC.

Input, one JSON object per line:

- every kind: ``id`` (text or number; default ``line-N``) and ``response`` (text);
- ``math``: ``gold`` (the reference answer); ``steps``: ``gold`` optional (unused);
- ``code``: ``tests`` + ``entry_point`` (HumanEval ``check(candidate)`` source), or
  ``test_list`` with optional ``test_imports`` (MBPP asserts), or ``io_pairs`` (a list of
  ``{"stdin", "expected_stdout"}`` objects or ``[stdin, stdout]`` pairs); optional
  ``program_prefix`` (alias ``prompt``) is put before the extracted program.

Output, one JSON object per scored line, in input order: ``id``, ``reward``, ``status``
(``ok``, ``no_answer``, ``parse_error``, ``timeout``, ``runtime_error``, ``internal``),
``extracted``, ``detail``, ``latency_s``, and ``steps`` (steps: ``start``, ``end``, ``status``,
``reward``, ``detail``) or ``tests`` (code: ``name``, ``status``, ``detail``). A line that is
not valid UTF-8 or JSON, lacks a field, or is refused by the verifier (INVALID_ARGUMENT) is
reported with its line number and skipped. Without ``--endpoint`` the verifier runs in this
process (``--workers`` worker processes / threads); with it, items go to that
``grpo.v1.Verifier`` service in ``ScoreBatch`` requests, ``--workers`` at a time.
"""

from __future__ import annotations

import concurrent.futures as cf
import json
import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TimeRemainingColumn
from rich.table import Table

from grpo.errors import GrpoError, InvalidArgumentError, NotFoundError
from grpo.services.score_status import is_verdict
from grpo.v1 import common_pb2

__all__ = ["ScoreItem", "ScoreSummary", "app", "parse_line", "score_file"]

KINDS = ("math", "steps", "code")
app = typer.Typer(
    help="Score a JSONL file of responses with a verifier (in-process or over gRPC).",
    no_args_is_help=True,
)


@dataclass(frozen=True)
class ScoreItem:
    """One input line: its number (1-based), id, task and response."""

    line: int
    id: str
    task: common_pb2.Task
    response: str


@dataclass
class ScoreSummary:
    """What a run produced.

    Attributes:
        scored: items scored (written to the output).
        bad_lines: ``(line number, reason)`` of skipped lines.
        statuses: status name -> count.
        reward_mean: mean reward over items whose reward is a verdict: every status but
            ``internal`` (no answer, a timeout or a crash score 0; None when there are none).
        latency_p50_s, latency_p99_s: per-item verification latency percentiles (seconds).
        items_per_s: scored items per second of wall-clock time.
    """

    scored: int = 0
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    reward_mean: float | None = None
    latency_p50_s: float = 0.0
    latency_p99_s: float = 0.0
    items_per_s: float = 0.0


def _text(obj: dict[str, Any], key: str, *, required: bool = True) -> str:
    value = obj.get(key)
    if value is None:
        if required:
            raise InvalidArgumentError(f"missing field {key!r}")
        return ""
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        raise InvalidArgumentError(f"field {key!r} must be text, got {type(value).__name__}")
    return str(value)


def _text_list(obj: dict[str, Any], key: str) -> list[str]:
    value = obj.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise InvalidArgumentError(f"field {key!r} must be a list of strings")
    return value


def _io_pairs(value: Any) -> list[common_pb2.IoPair]:
    if not isinstance(value, list):
        raise InvalidArgumentError("field 'io_pairs' must be a list")
    pairs = []
    for i, pair in enumerate(value):
        if isinstance(pair, dict) and isinstance(pair.get("stdin", ""), str):
            stdin, expected = pair.get("stdin", ""), pair.get("expected_stdout")
        elif isinstance(pair, list | tuple) and len(pair) == 2:
            stdin, expected = pair
        else:
            raise InvalidArgumentError(f"io_pairs[{i}] must be {{stdin, expected_stdout}}")
        if not isinstance(stdin, str) or not isinstance(expected, str):
            raise InvalidArgumentError(f"io_pairs[{i}] stdin and expected_stdout must be text")
        pairs.append(common_pb2.IoPair(stdin=stdin, expected_stdout=expected))
    return pairs


def _code_tests(obj: dict[str, Any]) -> common_pb2.CodeTests:
    tests = common_pb2.CodeTests(
        program_prefix=_text(obj, "program_prefix", required=False)
        or _text(obj, "prompt", required=False)
    )
    if "tests" in obj:
        tests.test_code = _text(obj, "tests")
        tests.entry_point = _text(obj, "entry_point")
    elif "test_list" in obj:
        tests.test_list.extend(_text_list(obj, "test_list"))
        tests.test_imports.extend(_text_list(obj, "test_imports"))
        tests.entry_point = _text(obj, "entry_point", required=False)
    elif "io_pairs" in obj:
        tests.io_pairs.extend(_io_pairs(obj["io_pairs"]))
    else:
        raise InvalidArgumentError(
            "code items need 'tests' + 'entry_point', 'test_list' or 'io_pairs'"
        )
    return tests


def parse_line(kind: str, line_no: int, raw: bytes) -> ScoreItem | None:
    """Parse one input line into a :class:`ScoreItem` (None for a blank line).

    Args:
        kind: ``math``, ``steps`` or ``code``.
        line_no: 1-based line number (the default id is ``line-<line_no>``).
        raw: the line's bytes.

    Raises:
        InvalidArgumentError: not UTF-8, not a JSON object, or a field missing / mistyped.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(f"not valid UTF-8 (byte {exc.start})") from None
    if not text.strip():
        return None
    try:
        obj = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidArgumentError(f"invalid JSON: {exc.msg} (column {exc.colno})") from None
    if not isinstance(obj, dict):
        raise InvalidArgumentError(f"expected a JSON object, got {type(obj).__name__}")
    item_id = _text(obj, "id", required=False) or f"line-{line_no}"
    response = _text(obj, "response")
    task = common_pb2.Task(id=item_id, type="code" if kind == "code" else "math")
    if kind == "code":
        task.code_tests.CopyFrom(_code_tests(obj))
    else:
        task.gold_answer = _text(obj, "gold", required=kind == "math")
    return ScoreItem(line_no, item_id, task, response)


def _read_items(kind: str, path: Path, bad: list[tuple[int, str]]) -> list[ScoreItem]:
    items = []
    with path.open("rb") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                item = parse_line(kind, line_no, raw)
            except InvalidArgumentError as exc:
                bad.append((line_no, str(exc)))
                continue
            if item is not None:
                items.append(item)
    return items


def _status_name(status: int) -> str:
    name = common_pb2.ScoreStatus.Name(status)  # type: ignore[arg-type]
    return str(name).removeprefix("SCORE_STATUS_").lower()


def score_to_json(item_id: str, score: common_pb2.Score) -> dict[str, Any]:
    """The output object of one scored item (fields in the module docstring)."""
    out: dict[str, Any] = {
        "id": item_id,
        "reward": score.reward,
        "status": _status_name(score.status),
        "extracted": score.extracted_answer,
        "detail": score.detail,
        "latency_s": round(score.latency_s, 6),
    }
    if score.steps:
        out["steps"] = [
            {
                "start": s.char_start,
                "end": s.char_end,
                "status": str(common_pb2.StepStatus.Name(s.status))  # type: ignore[arg-type]
                .removeprefix("STEP_STATUS_")
                .lower(),
                "reward": s.reward,
                "detail": s.detail,
            }
            for s in score.steps
        ]
    if score.tests:
        out["tests"] = [
            {
                "name": t.name,
                "status": str(common_pb2.TestStatus.Name(t.status))  # type: ignore[arg-type]
                .removeprefix("TEST_STATUS_")
                .lower(),
                "detail": t.detail,
            }
            for t in score.tests
        ]
    return out


Scorer = Callable[[Sequence[ScoreItem]], list[common_pb2.Score | Exception]]


def _local_scorer(kind: str, workers: int) -> tuple[Scorer, Callable[[], None]]:
    from grpo.verifiers.sdk import PoolSettings, Verifier

    verifier: Verifier
    if kind == "math":
        from grpo.verifiers.math import MathConfig, MathVerifier

        verifier = MathVerifier(MathConfig(pool=PoolSettings(workers=workers)))
    elif kind == "steps":
        from grpo.verifiers.steps import StepsConfig, StepsVerifier

        verifier = StepsVerifier(StepsConfig(pool=PoolSettings(workers=workers)))
    else:
        from grpo.verifiers.code import CodeVerifier

        verifier = CodeVerifier()

    def run(batch: Sequence[ScoreItem]) -> list[common_pb2.Score | Exception]:
        out: list[common_pb2.Score | Exception] = []
        for item in batch:
            try:
                out.append(verifier.verify(item.task, item.response))
            except GrpoError as exc:
                out.append(exc)
        return out

    return run, verifier.close


def _remote_scorer(endpoint: str, timeout_s: float) -> tuple[Scorer, Callable[[], None]]:
    import grpc

    from grpo.v1 import verifier_pb2, verifier_pb2_grpc

    channel = grpc.insecure_channel(endpoint)
    stub = verifier_pb2_grpc.VerifierStub(channel)

    def one(item: ScoreItem) -> common_pb2.Score | Exception:
        request = verifier_pb2.ScoreRequest(task=item.task, response=item.response)
        try:
            return stub.Score(request, timeout=timeout_s).score
        except grpc.RpcError as exc:
            return InvalidArgumentError(f"{exc.code().name}: {exc.details()}")

    def run(batch: Sequence[ScoreItem]) -> list[common_pb2.Score | Exception]:
        request = verifier_pb2.ScoreBatchRequest(
            items=[verifier_pb2.ScoreRequest(task=i.task, response=i.response) for i in batch]
        )
        try:
            return list(stub.ScoreBatch(request, timeout=timeout_s).scores)
        except grpc.RpcError as exc:
            if exc.code() != grpc.StatusCode.INVALID_ARGUMENT:
                raise
            return [one(item) for item in batch]  # find which items were refused

    return run, channel.close


def _batches(items: list[ScoreItem], size: int) -> Iterator[list[ScoreItem]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def score_file(
    kind: str,
    input_path: Path,
    output_path: Path,
    *,
    endpoint: str | None = None,
    workers: int = 2,
    batch_size: int = 16,
    timeout_s: float = 300.0,
    console: Console | None = None,
) -> ScoreSummary:
    """Score every line of ``input_path`` and write the results to ``output_path``.

    Args:
        kind: ``math``, ``steps`` or ``code``.
        input_path: JSONL input (fields in the module docstring).
        output_path: JSONL output, one object per scored item, in input order.
        endpoint: ``HOST:PORT`` of a ``grpo.v1.Verifier`` service; None scores in-process.
        workers: worker processes (in-process) or concurrent requests (remote).
        batch_size: items per ``ScoreBatch`` request (remote) / per task (in-process).
        timeout_s: deadline of one remote request in seconds.
        console: where the progress bar is drawn (None: a default stderr console).

    Returns:
        The :class:`ScoreSummary`.

    Raises:
        InvalidArgumentError: unknown ``kind`` or ``workers < 1``.
        OSError: the input cannot be read or the output written.
    """
    if kind not in KINDS:
        raise InvalidArgumentError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    if workers < 1 or batch_size < 1:
        raise InvalidArgumentError("--workers and --batch-size must be at least 1")
    summary = ScoreSummary()
    if not output_path.parent.is_dir():
        raise NotFoundError(f"output folder {output_path.parent} does not exist")
    items = _read_items(kind, input_path, summary.bad_lines)
    start = time.perf_counter()
    scorer, close = (
        _remote_scorer(endpoint, timeout_s) if endpoint else _local_scorer(kind, workers)
    )
    results: dict[int, common_pb2.Score] = {}
    progress = Progress(
        *Progress.get_default_columns()[:1],
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console or Console(stderr=True),
        transient=False,
    )
    try:
        with progress, cf.ThreadPoolExecutor(max_workers=workers) as pool:
            bar = progress.add_task(f"score {kind}", total=len(items))
            size = batch_size if endpoint else 1
            futures = {pool.submit(scorer, b): b for b in _batches(items, size)}
            for future in cf.as_completed(futures):
                batch = futures[future]
                for item, outcome in zip(batch, future.result(), strict=True):
                    if isinstance(outcome, Exception):
                        summary.bad_lines.append((item.line, str(outcome)))
                    else:
                        results[item.line] = outcome
                progress.advance(bar, len(batch))
    finally:
        close()
    elapsed = time.perf_counter() - start
    with output_path.open("w", encoding="utf-8") as out:
        for item in items:
            if item.line in results:
                out.write(json.dumps(score_to_json(item.id, results[item.line])) + "\n")
    scores = [results[i.line] for i in items if i.line in results]
    summary.scored = len(scores)
    summary.bad_lines.sort()
    summary.statuses = Counter(_status_name(s.status) for s in scores)
    verdicts = [s.reward for s in scores if is_verdict(s)]
    summary.reward_mean = statistics.fmean(verdicts) if verdicts else None
    latencies = sorted(s.latency_s for s in scores)
    if latencies:
        summary.latency_p50_s = _nearest_rank(latencies, 0.50)
        summary.latency_p99_s = _nearest_rank(latencies, 0.99)
    summary.items_per_s = len(scores) / elapsed if elapsed > 0 else 0.0
    return summary


def _nearest_rank(sorted_values: list[float], q: float) -> float:
    """The nearest-rank q-quantile (ceil(q·n)-th smallest): p99 of 10 items is the largest."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def summary_table(kind: str, summary: ScoreSummary) -> Table:
    """A rich table of the summary: reward mean, status counts, latency p50/p99, items/s."""
    table = Table(title=f"grpo score {kind}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    table.add_row("scored", str(summary.scored))
    table.add_row("bad lines (skipped)", str(len(summary.bad_lines)))
    mean = "n/a" if summary.reward_mean is None else f"{summary.reward_mean:.4f}"
    table.add_row("reward mean (all but internal)", mean)
    for status, count in sorted(summary.statuses.items()):
        table.add_row(f"status {status}", str(count))
    table.add_row("latency p50 (ms)", f"{summary.latency_p50_s * 1e3:.1f}")
    table.add_row("latency p99 (ms)", f"{summary.latency_p99_s * 1e3:.1f}")
    table.add_row("items/s", f"{summary.items_per_s:.1f}")
    return table


def _command(kind: str) -> Callable[..., None]:
    def command(
        input: Annotated[
            Path,
            typer.Option("--input", "-i", help="JSONL input file.", exists=True, dir_okay=False),
        ],
        output: Annotated[Path, typer.Option("--output", "-o", help="JSONL output file.")],
        endpoint: Annotated[
            str | None, typer.Option(help="HOST:PORT of a verifier service; default in-process.")
        ] = None,
        workers: Annotated[
            int, typer.Option(min=1, help="Worker processes (in-process) or concurrent requests.")
        ] = 2,
        batch_size: Annotated[int, typer.Option(min=1, help="Items per ScoreBatch request.")] = 16,
    ) -> None:
        import grpc

        console = Console(stderr=True)
        try:
            summary = score_file(
                kind,
                input,
                output,
                endpoint=endpoint,
                workers=workers,
                batch_size=batch_size,
                console=console,
            )
        except grpc.RpcError as exc:
            console.print(f"[red]verifier at {endpoint} failed: {exc.code().name}: {exc.details()}")
            raise typer.Exit(1) from None
        except (GrpoError, OSError) as exc:
            console.print(f"[red]{type(exc).__name__}: {exc}")
            raise typer.Exit(1) from None
        for line_no, reason in summary.bad_lines:
            console.print(f"[yellow]line {line_no}: skipped: {reason}[/yellow]")
        console.print(summary_table(kind, summary))
        if summary.scored == 0:
            console.print("[red]no line was scored")
            raise typer.Exit(1)

    command.__doc__ = (
        f"Score {kind} responses from --input into --output.\n\n"
        f"Input lines: {_INPUT_HELP[kind]} Output lines: id, reward, status, extracted, "
        "detail, latency_s, and steps or tests. Bad lines are reported and skipped; the exit "
        "code is 1 when no line could be scored."
    )
    return command


_INPUT_HELP = {
    "math": "id, response, gold (the reference answer).",
    "steps": "id, response (gold optional).",
    "code": "id, response, and tests + entry_point (HumanEval), test_list [+ test_imports] "
    "(MBPP) or io_pairs (stdin/stdout); optional program_prefix.",
}


for _kind in KINDS:
    app.command(name=_kind, no_args_is_help=True)(_command(_kind))
