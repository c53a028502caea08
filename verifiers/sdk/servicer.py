"""The gRPC adapter every verifier gets for free: Describe, Score and ScoreBatch.

The servicer is thin (proto -> :meth:`Verifier.verify` -> proto). It runs each item on a
shared thread pool so that ScoreBatch scores items concurrently and every request honours its
deadline: the tighter of the caller's gRPC deadline and ``ScoringSettings.request_timeout_s``.
An item still running when the deadline passes is answered with status ``UNDECIDED``: the
verifier did not decide in time, so the reward is missing, never a 0 (the candidate's own time
limits, e.g. a program's wall clock in the code verifier, are verdicts the verifier returns
itself; its worker process is bounded by the verifier's own hard limit). Errors are raised as
``grpo.errors`` exceptions; the server interceptor maps them to gRPC codes.

:meth:`VerifierServicer.close` stops the thread pool (``grpo.verifiers.sdk.threads``): queued
items are cancelled, requests still waiting are answered at once (each unfinished item
``UNDECIDED``, "the verifier closed ..."), and the threads are joined for at most
``timeout_s``; threads still running an item are daemons, so a process that closes its
verifier (``grpo score`` after Ctrl-C, ``grpo serve`` on SIGTERM) never waits for them.

Metrics (default Prometheus registry): ``grpo_verifier_scores_total{verifier, status}`` and
``grpo_verifier_score_seconds{verifier}``.
"""

from __future__ import annotations

import concurrent.futures as cf
import logging
import threading
import time
from typing import Any

import grpc
from prometheus_client import Counter, Histogram
from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import InvalidArgumentError, ResourceExhaustedError, UnavailableError
from grpo.services.runtime.server import remaining_s
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.sdk.base import Verifier, make_score
from grpo.verifiers.sdk.pool import request_deadline
from grpo.verifiers.sdk.threads import StoppableThreadPool

__all__ = ["CLOSE_TIMEOUT_S", "SCORES", "SCORE_SECONDS", "ScoringSettings", "VerifierServicer"]

log = logging.getLogger(__name__)

CLOSE_TIMEOUT_S = 2.0
"""Default longest wait of :meth:`VerifierServicer.close` for running items, in seconds."""

SCORES = Counter(
    "grpo_verifier_scores",
    "Scores returned by a verifier, by score status name.",
    ["verifier", "status"],
)
SCORE_SECONDS = Histogram(
    "grpo_verifier_score_seconds",
    "Time to score one response in seconds.",
    ["verifier"],
    buckets=(0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0),
)


class ScoringSettings(BaseModel):
    """How a verifier service scores requests: batch limit, concurrency, default deadline.

    The ``scoring:`` block of every verifier service (the gRPC server's own network, limits
    and TLS are ``grpo.services.runtime.server.ServerSettings``, the ``server:`` block).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_batch_items: int = Field(
        default=512, ge=1, description="Most items one ScoreBatch request may carry."
    )
    concurrency: int = Field(
        default=8, ge=1, description="Items scored at once across all requests (thread pool size)."
    )
    request_timeout_s: float = Field(
        default=60.0,
        gt=0,
        description="Deadline of a request in seconds when the caller's deadline is later "
        "or unset; items unfinished by then get status UNDECIDED (missing, not 0).",
    )


RUN_DEADLINE_MARGIN_S = 0.25
"""Seconds before a request's deadline at which a run of items (``Verifier.lanes``) stops:
time for the pool to replace a worker cut at its limit and for the run to return."""


def _runs(n: int, lanes: int) -> list[tuple[int, int]]:
    """``[lo, hi)`` bounds of ``lanes`` runs of consecutive indices covering ``range(n)``,
    sizes differing by at most one (``n >= lanes > 0``)."""
    size, extra = divmod(n, lanes)
    bounds, lo = [], 0
    for k in range(lanes):
        hi = lo + size + (1 if k < extra else 0)
        bounds.append((lo, hi))
        lo = hi
    return bounds


def _status_name(status: int) -> str:
    return str(common_pb2.ScoreStatus.Name(status)).removeprefix("SCORE_STATUS_")  # type: ignore[arg-type]


class VerifierServicer(verifier_pb2_grpc.VerifierServicer):
    """gRPC servicer of ``grpo.v1.Verifier`` backed by one :class:`Verifier`.

    Args:
        verifier: the verifier to serve (owned by the caller; closed by the service).
        settings: batch limit, concurrency, default deadline.
    """

    def __init__(self, verifier: Verifier, settings: ScoringSettings | None = None) -> None:
        self.verifier = verifier
        self.settings = settings or ScoringSettings()
        self._pool = StoppableThreadPool(self.settings.concurrency, name=f"verify-{verifier.name}")
        self._closing: cf.Future[None] = cf.Future()  # done once close() starts
        self._close_lock = threading.Lock()

    def close(self, timeout_s: float = CLOSE_TIMEOUT_S) -> int:
        """Stop scoring (idempotent): cancel the queued items, answer the waiting requests now
        (unfinished items get status UNDECIDED), join the threads for at most ``timeout_s``.

        Args:
            timeout_s: the longest wait, in seconds, for items already running to end.

        Returns:
            How many items were still running after the wait. Their threads are daemons that
            end with the item (bounded by the verifier's own limits) or with the process;
            their results are dropped. Close the verifier only after this call.
        """
        with self._close_lock:
            if not self._closing.done():
                self._closing.set_result(None)
        running = self._pool.close(timeout_s)
        if running:
            log.warning(
                "verifier %s closed with %d item(s) still running after %.1f s; their results "
                "are dropped (they were answered UNDECIDED)",
                self.verifier.name,
                running,
                timeout_s,
            )
        return running

    def _deadline(self, context: Any) -> float:
        """Monotonic instant by which the request must be answered."""
        budget = self.settings.request_timeout_s
        remaining = remaining_s(context) if context is not None else None
        if remaining is not None:
            budget = min(budget, max(0.0, remaining - 0.05))
        return time.monotonic() + budget

    def _score_items(
        self, items: list[verifier_pb2.ScoreRequest], context: Any
    ) -> list[common_pb2.Score]:
        for i, item in enumerate(items):
            try:
                self.verifier.validate(item.task, item.response)
            except InvalidArgumentError as exc:
                prefix = f"items[{i}]: " if len(items) > 1 else ""
                raise InvalidArgumentError(f"{prefix}{exc}") from None
        deadline = self._deadline(context)
        started = time.perf_counter()
        if self._closing.done():
            raise UnavailableError(f"verifier {self.verifier.name} is closed")
        # One slot per item: (its future, its place in that future's list; None: the future's
        # result is the item's score).
        slots: list[tuple[cf.Future[Any], int | None]] = []
        sinks: dict[cf.Future[Any], dict[int, common_pb2.Score]] = {}  # a run's scores so far
        lanes = min(self.verifier.lanes(), len(items))
        if lanes > 0:  # runs of consecutive items, one verify_many each (a pool verifier)

            def run_many(
                run: list[verifier_pb2.ScoreRequest], sink: dict[int, common_pb2.Score]
            ) -> list[common_pb2.Score]:
                # The pool stops the run's items a little before the request's deadline, and
                # each item's score lands in ``sink`` as soon as it is known, so the items a
                # run finished in time are answered even while it is still replacing a
                # worker cut at the deadline.
                with request_deadline(deadline - RUN_DEADLINE_MARGIN_S):
                    return self.verifier.verify_many(
                        [(it.task, it.response) for it in run], sink.__setitem__
                    )

            for lo, hi in _runs(len(items), lanes):
                sink: dict[int, common_pb2.Score] = {}
                future = self._pool.submit(run_many, items[lo:hi], sink)
                slots += [(future, j) for j in range(hi - lo)]
                sinks[future] = sink
        else:

            def run(item: verifier_pb2.ScoreRequest) -> common_pb2.Score:
                with request_deadline(deadline):
                    return self.verifier.verify(item.task, item.response)

            slots = [(self._pool.submit(run, it), None) for it in items]
        self._wait(list(dict.fromkeys(f for f, _ in slots)), deadline)
        closed = self._closing.done()
        scores = []
        for future, j in slots:
            if future.done() and not future.cancelled() and future.exception() is None:
                result = future.result()
                score = result if j is None else result[j]
            elif j is not None and j in sinks[future]:  # scored before the deadline
                score = sinks[future][j]
            elif future.done() and not future.cancelled():
                error = future.exception()
                score = make_score(
                    common_pb2.SCORE_STATUS_INTERNAL, detail=f"{type(error).__name__}: {error}"
                )
            else:
                queued = future.cancel()  # True: it had not started and never will
                if not closed:
                    detail = "request deadline passed"
                elif queued:
                    detail = "the verifier closed before scoring the item"
                else:
                    detail = "the verifier closed while scoring the item"
                score = make_score(common_pb2.SCORE_STATUS_UNDECIDED, detail=detail)
                score.latency_s = time.perf_counter() - started
            score.verifier = self.verifier.name
            SCORES.labels(self.verifier.name, _status_name(score.status)).inc()
            SCORE_SECONDS.labels(self.verifier.name).observe(score.latency_s)
            scores.append(score)
        return scores

    def _wait(self, futures: list[cf.Future[common_pb2.Score]], deadline: float) -> None:
        """Wait until every future is done, the monotonic ``deadline`` passes, or close()."""
        pending: set[cf.Future[Any]] = set(futures)
        while pending and not self._closing.done():
            left = deadline - time.monotonic()
            if left <= 0:
                return
            _, pending = cf.wait(
                pending | {self._closing}, timeout=left, return_when=cf.FIRST_COMPLETED
            )
            pending.discard(self._closing)

    def Describe(
        self, request: verifier_pb2.VerifierDescribeRequest, context: grpc.ServicerContext
    ) -> verifier_pb2.VerifierDescribeResponse:
        """Return the verifier's description (name, version, kind, task types, config)."""
        return self.verifier.describe().to_proto()

    def Score(
        self, request: verifier_pb2.ScoreRequest, context: grpc.ServicerContext
    ) -> verifier_pb2.ScoreResponse:
        """Score one response; raises InvalidArgumentError for a task the verifier can't use."""
        return verifier_pb2.ScoreResponse(score=self._score_items([request], context)[0])

    def ScoreBatch(
        self, request: verifier_pb2.ScoreBatchRequest, context: grpc.ServicerContext
    ) -> verifier_pb2.ScoreBatchResponse:
        """Score many responses concurrently; scores come back in request order.

        Raises:
            ResourceExhaustedError: more than ``max_batch_items`` items.
            InvalidArgumentError: an item is malformed (the message names its index).
        """
        if len(request.items) > self.settings.max_batch_items:
            raise ResourceExhaustedError(
                f"ScoreBatch carries {len(request.items)} items, more than max_batch_items="
                f"{self.settings.max_batch_items}; split the batch"
            )
        return verifier_pb2.ScoreBatchResponse(
            scores=self._score_items(list(request.items), context)
        )
