"""Retrying one gRPC call: a deadline per attempt, doubling backoff, a bounded attempt count.

The one retry policy of the calls to verifiers, shared by the assembler
(``grpo.services.runtime.verifier_client.VerifierClient``, rotating a route's addresses per
attempt) and ``grpo score`` / ``grpo eval`` (``grpo.services.evaluation.scorers.RemoteScorer``):

- attempt ``n`` (0-based) runs under its own deadline ``timeout_s`` (seconds);
- an attempt failing with a code of ``retryable`` is retried after ``backoff_s(n)`` =
  ``min(backoff_max_s, backoff_initial_s * 2**n)`` seconds, while attempts remain (at most
  ``max_attempts``, the first included); there is no wait after the last attempt;
- any other code ends the call at once.

Which codes are retryable is the caller's choice (the assembler also retries
RESOURCE_EXHAUSTED; ``grpo score`` splits the batch instead). The caller maps the final
``grpc.RpcError`` to what it means (:func:`rpc_status` reads its code and text).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection
from typing import Protocol, TypeVar

import grpc

__all__ = ["RetryPolicy", "backoff_s", "call_with_retries", "rpc_status", "worst_case_s"]

T = TypeVar("T")


class RetryPolicy(Protocol):
    """The retry settings of a call (``VerifierClientConfig`` has them)."""

    @property
    def timeout_s(self) -> float:
        """Deadline of one attempt (seconds, > 0)."""

    @property
    def max_attempts(self) -> int:
        """Attempts per call, the first one included (>= 1)."""

    @property
    def backoff_initial_s(self) -> float:
        """Wait before the first retry (seconds); doubles each retry."""

    @property
    def backoff_max_s(self) -> float:
        """Upper bound of the wait between retries (seconds)."""


def backoff_s(policy: RetryPolicy, attempt: int) -> float:
    """Seconds to wait after failed attempt ``attempt`` (0-based) before the next one:
    ``min(backoff_max_s, backoff_initial_s * 2**attempt)``."""
    return float(min(policy.backoff_max_s, policy.backoff_initial_s * 2**attempt))


def worst_case_s(policy: RetryPolicy) -> float:
    """The longest one call may take: every attempt to its deadline plus the backoffs between
    them, ``max_attempts * timeout_s + sum(backoff_s(n) for n < max_attempts - 1)`` seconds."""
    attempts = max(1, policy.max_attempts)
    return attempts * policy.timeout_s + sum(backoff_s(policy, n) for n in range(attempts - 1))


def rpc_status(exc: grpc.RpcError) -> tuple[grpc.StatusCode, str]:
    """The status code and details of a failed call (``UNKNOWN`` and the error's text when the
    error carries no status, e.g. raised by an interceptor)."""
    if isinstance(exc, grpc.Call):
        return exc.code(), exc.details() or ""
    return grpc.StatusCode.UNKNOWN, str(exc)


def call_with_retries(
    call: Callable[[int, float], T],
    policy: RetryPolicy,
    *,
    retryable: Collection[grpc.StatusCode],
    sleep: Callable[[float], None] = time.sleep,
) -> T:
    """Run ``call(attempt, timeout_s)`` until it returns, retrying retryable failures.

    Args:
        call: one attempt: ``attempt`` is 0-based (a caller may pick another address per
            attempt), ``timeout_s`` the deadline to pass to the RPC (seconds).
        policy: attempts, per-attempt deadline and backoff.
        retryable: status codes worth another attempt.
        sleep: the backoff wait (injectable for tests).

    Returns:
        What the first successful attempt returned.

    Raises:
        grpc.RpcError: the error of the last attempt: one whose code is not retryable (at
            once), or a retryable one after ``max_attempts`` attempts (so a caller that gets a
            retryable code knows every attempt failed).
    """
    attempts = max(1, policy.max_attempts)
    for attempt in range(attempts):
        try:
            return call(attempt, policy.timeout_s)
        except grpc.RpcError as exc:
            code, _ = rpc_status(exc)
            if code not in retryable or attempt + 1 == attempts:
                raise
        sleep(backoff_s(policy, attempt))
    raise AssertionError("unreachable")  # pragma: no cover
