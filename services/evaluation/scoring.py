"""The scoring loop and the rows it writes: items -> batches -> verifier -> results file.

:func:`score_stream` splits items into batches by count and size
(:func:`~grpo.services.evaluation.batching.plan_batches`), scores up to ``workers`` batches at
a time and hands each finished batch to ``sink`` at once, in completion order, from the calling
thread (so the sink needs no lock and a result is written the moment it is known). When the
verifier is lost (the scorer raises after its retries) no new batch starts, the batches in
flight finish or fail, everything finished is handed over, and the error is raised. A
``KeyboardInterrupt`` (Ctrl-C, or SIGTERM turned into one by the CLI) stops at once: pending
batches are cancelled and the results already handed over are all that is kept.

A score row (``grpo score``'s output line): ``line`` (1-based input line), ``id``, ``status``
(a ``ScoreStatus`` name in lower case, or ``invalid_input`` / ``too_large`` for a line that got
no score), ``reward`` (null unless the status is a verdict: ``grpo.services.runtime.score_status``),
``extracted``, ``detail``, ``latency_s`` (seconds), ``verifier``, and ``steps`` (process
verifiers: ``start``, ``end``, ``status``, ``reward``, ``detail``) or ``tests`` (code:
``name``, ``status``, ``detail``).

Which rows count: :func:`has_reward` (a verdict status with a reward) is the one rule for the
summary's verdicts, ``grpo eval``'s ``correct`` and both commands' exit codes (the rows
without a reward). :func:`is_final` says which rows ``--resume`` keeps: rows with a reward and
``invalid_input`` rows (the input's fault: the same input and verifier give the same row);
every other row (``undecided``, ``internal``, an unspecified status, ``too_large``) is scored
again and the new row supersedes it.
"""

from __future__ import annotations

import concurrent.futures as cf
import math
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from grpo.services.evaluation.batching import plan_batches
from grpo.services.evaluation.inputs import InvalidLine, ScoreItem
from grpo.services.evaluation.scorers import (
    INVALID_INPUT,
    BatchScorer,
    Outcome,
    Refusal,
    request_size,
)
from grpo.services.runtime.score_status import is_verdict
from grpo.v1 import common_pb2

__all__ = [
    "ScoreSummary",
    "has_reward",
    "invalid_row",
    "is_final",
    "is_verdict_status",
    "score_row",
    "score_stream",
    "status_name",
    "summarize_rows",
]

Row = dict[str, Any]


def status_name(status: int) -> str:
    """``ok``/``no_answer``/... for a ``ScoreStatus`` value."""
    name = common_pb2.ScoreStatus.Name(status)  # type: ignore[arg-type]
    return str(name).removeprefix("SCORE_STATUS_").lower()


def is_verdict_status(name: str) -> bool:
    """True when a row's status name is a verdict (``grpo.services.runtime.score_status``): its
    reward counts. ``invalid_input``/``too_large`` and unknown names are not verdicts."""
    try:
        value = common_pb2.ScoreStatus.Value("SCORE_STATUS_" + name.upper())
    except ValueError:
        return False
    return is_verdict(common_pb2.Score(status=value))  # type: ignore[arg-type]


def has_reward(row: Row) -> bool:
    """True when a result row carries a reward that counts: its status is a verdict
    (:func:`is_verdict_status`) and its ``reward`` is set. Rows without one are what the exit
    codes of ``grpo score`` and ``grpo eval`` count."""
    return is_verdict_status(str(row.get("status", ""))) and row.get("reward") is not None


def is_final(row: Row) -> bool:
    """True when ``--resume`` keeps a row as it is: it has a reward (:func:`has_reward`), or
    its status is ``invalid_input``. Rows the verifier could not decide, or that failed in it
    or on the way (``undecided``, ``internal``, ``too_large``), are scored again."""
    return has_reward(row) or row.get("status") == INVALID_INPUT


def _lower(enum: Any, prefix: str, value: int) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def score_fields(score: common_pb2.Score) -> Row:
    """The score part of a row (module docstring): status, reward (null unless a verdict),
    extracted, detail, latency_s, verifier, steps / tests."""
    out: Row = {
        "status": status_name(score.status),
        "reward": score.reward if is_verdict(score) else None,
        "extracted": score.extracted_answer,
        "detail": score.detail,
        "latency_s": round(score.latency_s, 6),
        "verifier": score.verifier,
    }
    if score.steps:
        out["steps"] = [
            {
                "start": s.char_start,
                "end": s.char_end,
                "status": _lower(common_pb2.StepStatus, "STEP_STATUS_", s.status),
                "reward": s.reward,
                "detail": s.detail,
            }
            for s in score.steps
        ]
    if score.tests:
        out["tests"] = [
            {
                "name": t.name,
                "status": _lower(common_pb2.TestStatus, "TEST_STATUS_", t.status),
                "detail": t.detail,
            }
            for t in score.tests
        ]
    return out


def refusal_fields(refusal: Refusal) -> Row:
    """The score part of a row for an item that got no score (reward null)."""
    return {"status": refusal.status, "reward": None, "detail": refusal.reason}


def score_row(item: ScoreItem, outcome: Outcome) -> Row:
    """The output row of a scored (or refused) item: ``line``, ``id`` and the score fields."""
    fields = refusal_fields(outcome) if isinstance(outcome, Refusal) else score_fields(outcome)
    return {"line": item.line, "id": item.id, **fields}


def invalid_row(bad: InvalidLine) -> Row:
    """The output row of an input line that could not be read (status ``invalid_input``)."""
    return {"line": bad.line, "id": bad.id, **refusal_fields(Refusal(INVALID_INPUT, bad.reason))}


def score_stream(
    items: Sequence[ScoreItem],
    scorer: BatchScorer,
    sink: Callable[[list[tuple[ScoreItem, Outcome]]], None],
    *,
    workers: int = 2,
    max_items: int = 16,
    max_bytes: int = 4 * 1024 * 1024,
) -> None:
    """Score ``items`` with ``scorer``; hand each finished batch to ``sink`` as it arrives.

    Args:
        items: what to score (any order; results may come back out of order).
        scorer: the verifier (in process or remote).
        sink: receives ``[(item, outcome), ...]`` per finished batch, in the calling thread.
        workers: batches scored at the same time (>= 1).
        max_items, max_bytes: batch limits (items, bytes of the serialized requests).

    Raises:
        GrpoError: the scorer's error when the verifier was lost (``UnavailableError`` after
            the retries, ``FailedPreconditionError``, ``ContractError``), raised after every
            finished batch was handed to ``sink``.
        KeyboardInterrupt: interrupted; pending batches are cancelled.
        InvalidArgumentError: ``workers`` or a batch limit below 1.
    """
    from grpo.errors import GrpoError, InvalidArgumentError

    if workers < 1:
        raise InvalidArgumentError(f"workers must be >= 1, got {workers}")
    plan = plan_batches([request_size(i) for i in items], max_items=max_items, max_bytes=max_bytes)
    pool = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="score")
    failure: GrpoError | None = None
    try:
        futures = {pool.submit(scorer.score, [items[i] for i in idxs]): idxs for idxs in plan}
        for future in cf.as_completed(futures):
            try:
                outcomes = future.result()
            except cf.CancelledError:
                continue
            except GrpoError as exc:
                if failure is None:
                    failure = exc
                    for other in futures:
                        other.cancel()
                continue
            batch = [items[i] for i in futures[future]]
            sink(list(zip(batch, outcomes, strict=True)))
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if failure is not None:
        raise failure


@dataclass
class ScoreSummary:
    """Figures of a results file (every row in it, resumed ones included).

    Attributes:
        rows: result rows.
        statuses: status name -> rows.
        verdicts: rows whose reward counts (status a verdict,
        ``grpo.services.runtime.score_status``). missing: rows scored with a non-verdict status
        (the verifier could not decide). refused: rows without a score (``invalid_input``,
        ``too_large``). reward_mean: mean reward over the verdict rows (None when there are none).
        latency_p50_s, latency_p99_s: nearest-rank percentiles of ``latency_s`` over scored
            rows (seconds).
    """

    rows: int = 0
    statuses: Counter[str] = field(default_factory=Counter)
    verdicts: int = 0
    missing: int = 0
    refused: int = 0
    reward_mean: float | None = None
    latency_p50_s: float = 0.0
    latency_p99_s: float = 0.0


def _nearest_rank(sorted_values: list[float], q: float) -> float:
    """The nearest-rank q-quantile (ceil(q·n)-th smallest): p99 of 10 items is the largest."""
    return sorted_values[max(0, math.ceil(q * len(sorted_values)) - 1)]


def summarize_rows(rows: Iterable[Row]) -> ScoreSummary:
    """Count statuses and average the verdict rewards of result rows (module docstring)."""
    summary = ScoreSummary()
    rewards: list[float] = []
    latencies: list[float] = []
    for row in rows:
        status = str(row.get("status", ""))
        summary.rows += 1
        summary.statuses[status] += 1
        if "latency_s" in row:
            latencies.append(float(row["latency_s"]))
        if has_reward(row):
            summary.verdicts += 1
            rewards.append(float(row["reward"]))
        elif "latency_s" in row:
            summary.missing += 1
        else:
            summary.refused += 1
    summary.reward_mean = statistics.fmean(rewards) if rewards else None
    latencies.sort()
    if latencies:
        summary.latency_p50_s = _nearest_rank(latencies, 0.50)
        summary.latency_p99_s = _nearest_rank(latencies, 0.99)
    return summary
