"""Closing a verifier servicer stops its thread pool: queued items are cancelled, waiting
requests are answered at once with UNDECIDED (never a silent 0), threads are joined with a
bound, and a thread stuck in an item does not keep the process alive."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path
from typing import ClassVar

import pytest

from grpo.errors import UnavailableError
from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk import ScoringSettings, Verifier, VerifierServicer, make_score
from grpo.verifiers.sdk.threads import StoppableThreadPool

REPO = Path(__file__).resolve().parents[2]
HANG_GUARD_S = 60  # only a bound on a hang; no assertion is about time


class _GatedVerifier(Verifier):
    """Answers OK 1.0 once ``release`` is set; ``started`` counts the items begun."""

    name: ClassVar[str] = "gated"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("gated",)

    def __init__(self) -> None:
        super().__init__()
        self.release = threading.Event()
        self.started = threading.Semaphore(0)

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        self.started.release()
        self.release.wait()
        return make_score(common_pb2.SCORE_STATUS_OK, 1.0, extracted=response)


def _batch(n: int) -> verifier_pb2.ScoreBatchRequest:
    task = common_pb2.Task(id="t", type="gated")
    return verifier_pb2.ScoreBatchRequest(
        items=[verifier_pb2.ScoreRequest(task=task, response=f"r{i}") for i in range(n)]
    )


def test_pool_close_cancels_queued_calls_and_reports_the_running_ones() -> None:
    release = threading.Event()
    started = threading.Event()

    def blocked() -> str:
        started.set()
        release.wait()
        return "done"

    pool = StoppableThreadPool(1, name="close-test")
    running = pool.submit(blocked)
    queued = pool.submit(lambda: "never")
    assert started.wait(HANG_GUARD_S)
    assert pool.close(timeout_s=0) == 1  # the running call cannot be killed: it is reported
    assert queued.cancelled() and not running.done()
    with pytest.raises(UnavailableError, match="closed"):
        pool.submit(lambda: None)
    release.set()
    assert running.result(timeout=HANG_GUARD_S) == "done"  # a running call still completes
    assert pool.close(timeout_s=HANG_GUARD_S) == 0 and pool.running_calls == 0
    assert not [t for t in threading.enumerate() if t.name.startswith("close-test-")]
    failing = StoppableThreadPool(2, name="t")
    with pytest.raises(ZeroDivisionError):
        failing.submit(lambda: 1 / 0).result(timeout=HANG_GUARD_S)
    assert failing.close(timeout_s=HANG_GUARD_S) == 0


def test_close_answers_a_waiting_request_with_undecided_items() -> None:
    verifier = _GatedVerifier()
    servicer = VerifierServicer(verifier, ScoringSettings(concurrency=1, request_timeout_s=600))
    replies: list[verifier_pb2.ScoreBatchResponse] = []
    request = threading.Thread(target=lambda: replies.append(servicer.ScoreBatch(_batch(2), None)))
    request.start()
    try:
        assert verifier.started.acquire(timeout=HANG_GUARD_S)  # item 0 runs, item 1 is queued
        assert servicer.close(timeout_s=0) == 1
        request.join(HANG_GUARD_S)  # without close() it would wait out the 600 s deadline
        assert not request.is_alive(), "close() left the request waiting"
        (reply,) = replies
        assert [(s.status, s.reward, s.detail) for s in reply.scores] == [
            (common_pb2.SCORE_STATUS_UNDECIDED, 0.0, "the verifier closed while scoring the item"),
            (common_pb2.SCORE_STATUS_UNDECIDED, 0.0, "the verifier closed before scoring the item"),
        ]
        assert all(s.verifier == "gated" for s in reply.scores)
        with pytest.raises(UnavailableError, match="gated is closed"):
            servicer.ScoreBatch(_batch(1), None)
    finally:
        verifier.release.set()
    assert servicer.close(timeout_s=HANG_GUARD_S) == 0  # idempotent; the item has ended now
    assert verifier.started.acquire(blocking=False) is False  # the queued item never ran


def test_a_servicer_closed_mid_item_lets_the_process_exit() -> None:
    """The thread still in an item is a daemon: the interpreter does not join it at exit
    (ThreadPoolExecutor's threads are joined, so this script hung until the item ended)."""
    script = textwrap.dedent(
        f"""
        import sys, threading
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        from test_sdk_close import _GatedVerifier, _batch
        from grpo.verifiers.sdk import ScoringSettings, VerifierServicer

        verifier = _GatedVerifier()  # never released: the item would block forever
        servicer = VerifierServicer(verifier, ScoringSettings(concurrency=2))
        waiter = threading.Thread(target=servicer.ScoreBatch, args=(_batch(1), None), daemon=True)
        waiter.start()
        assert verifier.started.acquire(timeout=60)
        print("running", servicer.close(timeout_s=0), flush=True)
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=HANG_GUARD_S,
        cwd=REPO,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "running 1"
