"""The one retry policy of verifier calls (``grpo.services.runtime.rpc_retry``): attempts, the
deadline passed to each attempt, doubling capped backoff, which codes end the call at once."""

from __future__ import annotations

from typing import Any

import grpc
import pytest

from grpo.services.runtime.rpc_retry import backoff_s, call_with_retries, rpc_status
from grpo.services.runtime.verifier_client import VerifierClientConfig

RETRYABLE = {grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED}


class Failed(grpc.RpcError, grpc.Call):  # type: ignore[misc]
    """A failed call's error as a stub raises it (code and details)."""

    def __init__(self, code: grpc.StatusCode, details: str = "") -> None:
        self._code, self._details = code, details

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self._details

    def initial_metadata(self) -> Any:
        return ()

    def trailing_metadata(self) -> Any:
        return ()

    def is_active(self) -> bool:
        return False

    def time_remaining(self) -> float | None:
        return None

    def cancel(self) -> bool:
        return False

    def add_callback(self, callback: Any) -> bool:
        return False


def _script(*outcomes: Any) -> tuple[list[tuple[int, float]], Any]:
    """A call that raises or returns ``outcomes`` in turn, recording (attempt, timeout_s)."""
    seen: list[tuple[int, float]] = []

    def call(attempt: int, timeout_s: float) -> Any:
        seen.append((attempt, timeout_s))
        outcome = outcomes[len(seen) - 1]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    return seen, call


def test_retries_retryable_codes_with_doubling_capped_backoff() -> None:
    cfg = VerifierClientConfig(
        max_attempts=5, timeout_s=1.5, backoff_initial_s=0.1, backoff_max_s=0.3
    )
    seen, call = _script(*[Failed(grpc.StatusCode.UNAVAILABLE)] * 4, "done")
    sleeps: list[float] = []
    assert call_with_retries(call, cfg, retryable=RETRYABLE, sleep=sleeps.append) == "done"
    assert seen == [(0, 1.5), (1, 1.5), (2, 1.5), (3, 1.5), (4, 1.5)]
    assert sleeps == pytest.approx([0.1, 0.2, 0.3, 0.3])
    assert [backoff_s(cfg, n) for n in range(4)] == pytest.approx(sleeps)


def test_last_retryable_error_is_raised_after_every_attempt_without_a_last_wait() -> None:
    cfg = VerifierClientConfig(max_attempts=3, backoff_initial_s=0.5, backoff_max_s=2.0)
    errors = [Failed(grpc.StatusCode.DEADLINE_EXCEEDED, f"try {n}") for n in range(3)]
    seen, call = _script(*errors)
    sleeps: list[float] = []
    with pytest.raises(grpc.RpcError) as caught:
        call_with_retries(call, cfg, retryable=RETRYABLE, sleep=sleeps.append)
    assert caught.value is errors[-1] and len(seen) == 3
    assert sleeps == [0.5, 1.0]


def test_a_code_that_is_not_retryable_ends_the_call_at_once() -> None:
    cfg = VerifierClientConfig(max_attempts=4)
    refused = Failed(grpc.StatusCode.INVALID_ARGUMENT, "no gold")
    seen, call = _script(Failed(grpc.StatusCode.UNAVAILABLE), refused, "never")
    sleeps: list[float] = []
    with pytest.raises(grpc.RpcError) as caught:
        call_with_retries(call, cfg, retryable=RETRYABLE, sleep=sleeps.append)
    assert caught.value is refused and [a for a, _ in seen] == [0, 1] and len(sleeps) == 1
    # the same code is retried when the caller counts it retryable
    seen, call = _script(refused, "ok")
    assert (
        call_with_retries(
            call, cfg, retryable={grpc.StatusCode.INVALID_ARGUMENT}, sleep=lambda _s: None
        )
        == "ok"
    )


def test_other_exceptions_are_not_retried() -> None:
    seen, call = _script(ValueError("bug"), "never")
    with pytest.raises(ValueError, match="bug"):
        call_with_retries(call, VerifierClientConfig(), retryable=RETRYABLE, sleep=lambda _s: 0)
    assert len(seen) == 1


def test_rpc_status_of_an_error_without_a_status() -> None:
    assert rpc_status(Failed(grpc.StatusCode.ABORTED, "x")) == (grpc.StatusCode.ABORTED, "x")
    assert rpc_status(grpc.RpcError("interceptor")) == (grpc.StatusCode.UNKNOWN, "interceptor")
