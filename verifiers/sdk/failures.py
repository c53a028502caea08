"""What a verifier answers when its input cannot be checked or its worker pool fails.

Every verifier that runs checks in a :class:`~grpo.verifiers.sdk.pool.WorkerPool` needs the
same two rules (DESIGN.md "Verifiers": a failure is a status, never a silent 0):

- :func:`utf8_problem`: a response over the verifier's size limit or not encodable as UTF-8
  is not parsed at all (the verifier answers ``PARSE_ERROR`` with the returned reason);
- :func:`pool_failure_score`: a pool exception becomes a ``Score``: ``UNDECIDED`` for a check
  past the pool's wall-clock limit or memory cap or whose worker died (the verifier's own
  limits: it could not decide, the reward is missing, never 0), and ``INTERNAL`` for a check
  function that raised (a bug: checks catch what they expect) or a closed pool. What a
  response controls (its size, its nesting, the magnitude of its numbers) must be bounded by
  the verifier *before* the pool is called, so that a response cannot buy ``UNDECIDED``
  (docs/verifiers.md, "verdict vs undecided").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from grpo.errors import UnavailableError
from grpo.v1 import common_pb2
from grpo.verifiers.sdk.base import make_score
from grpo.verifiers.sdk.pool import (
    CallOutcome,
    CheckMemoryError,
    CheckTimeoutError,
    RemoteCheckError,
    WorkerCrashError,
    WorkerPool,
)

__all__ = [
    "POOL_FAILURES",
    "pool_failure_score",
    "pool_outcomes",
    "pool_scores",
    "utf8_problem",
]

POOL_FAILURES = (
    CheckTimeoutError,
    CheckMemoryError,
    WorkerCrashError,
    RemoteCheckError,
    UnavailableError,
)
"""What ``WorkerPool.call`` raises when a check did not finish: ``except POOL_FAILURES``."""


def utf8_problem(text: str, limit: int) -> str | None:
    """Why ``text`` cannot be checked, or None when it can.

    Args:
        text: the response.
        limit: the most code points (characters) the verifier parses.

    Returns:
        ``"response has N characters, more than max_response_chars=limit"``, ``"response is
        not valid UTF-8 (at code point i)"`` (a lone surrogate), or None.
    """
    if len(text) > limit:
        return f"response has {len(text)} characters, more than max_response_chars={limit}"
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"response is not valid UTF-8 (at code point {exc.start})"
    return None


def pool_failure_score(exc: Exception) -> common_pb2.Score:
    """The ``Score`` of a check that the worker pool could not finish.

    Args:
        exc: the exception raised by ``WorkerPool.call``.

    Returns:
        status ``UNDECIDED`` for :class:`CheckTimeoutError`, :class:`CheckMemoryError` and
        :class:`WorkerCrashError`; ``INTERNAL`` for :class:`RemoteCheckError` and any other
        exception (e.g. ``UnavailableError`` from a closed pool). ``detail`` names the
        failure; the reward is 0 and meaningless (both statuses are missing, not verdicts:
        ``grpo.services.runtime.score_status``).
    """
    if isinstance(exc, CheckTimeoutError | CheckMemoryError | WorkerCrashError):
        return make_score(common_pb2.SCORE_STATUS_UNDECIDED, detail=f"verifier limit: {exc}"[:500])
    return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=f"{type(exc).__name__}: {exc}")


def pool_outcomes(
    pool: WorkerPool,
    fn: Callable[..., Any],
    arg_list: Sequence[tuple[Any, ...]],
    on_outcome: Callable[[int, CallOutcome], None] | None = None,
) -> list[CallOutcome]:
    """``pool.call_many(fn, arg_list, on_outcome=on_outcome)``, with a pool that refuses the
    whole call (closed: ``UnavailableError``) turned into that error as every item's outcome,
    so each item becomes a :func:`pool_failure_score` either way."""
    try:
        return pool.call_many(fn, arg_list, on_outcome=on_outcome)
    except POOL_FAILURES as exc:
        outcomes = [CallOutcome(error=exc) for _ in arg_list]
        for i, outcome in enumerate(outcomes):
            if on_outcome is not None:
                on_outcome(i, outcome)
        return outcomes


def pool_scores(
    pool: WorkerPool,
    fn: Callable[..., Any],
    items: Sequence[tuple[common_pb2.Task, str]],
    *,
    args_of: Callable[[common_pb2.Task, str], tuple[Any, ...]],
    score_of: Callable[[Any], common_pb2.Score],
    max_response_chars: int,
    on_score: Callable[[int, common_pb2.Score], None] | None = None,
) -> list[common_pb2.Score]:
    """``Verifier.score_many`` of a verifier whose check ``fn`` runs in ``pool``: the items'
    checks go to the pool in one ``call_many``.

    Args:
        pool: the verifier's pool.
        fn: the module-level check, called as ``fn(*args_of(task, response))``.
        items: the ``(task, response)`` pairs.
        args_of: the check's arguments for one item.
        score_of: the ``Score`` of one check's result.
        max_response_chars: a longer response (or one not valid UTF-8) is not checked:
            ``PARSE_ERROR`` (:func:`utf8_problem`).
        on_score: called with ``(index, score)`` as each item's score is known.

    Returns:
        One ``Score`` per item, in order: ``PARSE_ERROR``, :func:`pool_failure_score` of a
        check that did not finish, or ``score_of`` its result; ``latency_s`` is the check's
        own time.
    """
    scores: list[common_pb2.Score | None] = [None] * len(items)

    def put(i: int, score: common_pb2.Score) -> None:
        scores[i] = score
        if on_score is not None:
            on_score(i, score)

    checked: list[int] = []
    for i, (_, response) in enumerate(items):
        problem = utf8_problem(response, max_response_chars)
        if problem is None:
            checked.append(i)
        else:
            put(i, make_score(common_pb2.SCORE_STATUS_PARSE_ERROR, detail=problem))

    def checked_item(k: int, outcome: CallOutcome) -> None:
        if outcome.error is not None:
            score = pool_failure_score(outcome.error)
        else:
            score = score_of(outcome.value)
        score.latency_s = outcome.seconds
        put(checked[k], score)

    pool_outcomes(pool, fn, [args_of(*items[i]) for i in checked], checked_item)
    return scores  # type: ignore[return-value]
