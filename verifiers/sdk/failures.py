"""What a verifier answers when its input cannot be checked or its worker pool fails.

Every verifier that runs checks in a :class:`~grpo.verifiers.sdk.pool.WorkerPool` needs the
same two rules (DESIGN.md "Verifiers": a failure is a status, never a silent 0):

- :func:`utf8_problem`: a response over the verifier's size limit or not encodable as UTF-8
  is not parsed at all (the verifier answers ``PARSE_ERROR`` with the returned reason);
- :func:`pool_failure_score`: a pool exception becomes a ``Score``: ``TIMEOUT`` for a check
  past its wall-clock limit (the response's fault: an expression that takes too long),
  ``RUNTIME_ERROR`` for a check that hit the memory cap, crashed its worker or raised, and
  ``INTERNAL`` for anything else (a closed pool: the verifier broke, the reward is missing).
"""

from __future__ import annotations

from grpo.v1 import common_pb2
from grpo.verifiers.sdk.base import make_score
from grpo.verifiers.sdk.pool import (
    CheckMemoryError,
    CheckTimeoutError,
    RemoteCheckError,
    WorkerCrashError,
)

__all__ = ["pool_failure_score", "utf8_problem"]


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
    """The ``Score`` for an exception raised by ``WorkerPool.call``.

    Returns:
        status ``TIMEOUT`` for :class:`CheckTimeoutError`; ``RUNTIME_ERROR`` for
        :class:`CheckMemoryError`, :class:`WorkerCrashError` and :class:`RemoteCheckError`;
        ``INTERNAL`` for any other exception (e.g. ``UnavailableError`` from a closed pool).
        ``detail`` carries the exception's message; the reward is 0 and meaningless.
    """
    if isinstance(exc, CheckTimeoutError):
        return make_score(common_pb2.SCORE_STATUS_TIMEOUT, detail=str(exc))
    if isinstance(exc, CheckMemoryError | WorkerCrashError | RemoteCheckError):
        return make_score(common_pb2.SCORE_STATUS_RUNTIME_ERROR, detail=str(exc))
    return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=f"{type(exc).__name__}: {exc}")
