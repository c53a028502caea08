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

__all__ = ["POOL_FAILURES", "pool_failure_score", "pool_outcomes", "utf8_problem"]

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
        ``grpo.services.score_status``).
    """
    if isinstance(exc, CheckTimeoutError | CheckMemoryError | WorkerCrashError):
        return make_score(common_pb2.SCORE_STATUS_UNDECIDED, detail=f"verifier limit: {exc}"[:500])
    return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=f"{type(exc).__name__}: {exc}")


def pool_outcomes(
    pool: WorkerPool, fn: Callable[..., Any], arg_list: Sequence[tuple[Any, ...]]
) -> list[CallOutcome]:
    """``pool.call_many(fn, arg_list)``, with a pool that refuses the whole call (closed:
    ``UnavailableError``) turned into that error as every item's outcome, so each item
    becomes a :func:`pool_failure_score` either way."""
    if not arg_list:
        return []
    try:
        return pool.call_many(fn, arg_list)
    except POOL_FAILURES as exc:
        return [CallOutcome(error=exc) for _ in arg_list]
