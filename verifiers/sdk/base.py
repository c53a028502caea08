"""The verifier base class: what a verifier is and the one entry point every caller uses.

A verifier is a stateless object that scores one response against one task and answers with
a :class:`~grpo.v1.common_pb2.Score` — a status plus a reward (DESIGN.md, "Verifiers"). A
subclass sets three class attributes (``name``, ``kind``, ``task_types``) and implements
:meth:`Verifier.score`. Callers (the gRPC servicer, ``grpo score``, tests) call
:meth:`Verifier.verify`, which validates the input, stamps the verifier name and latency, and
turns an unexpected exception into status ``INTERNAL`` so that a broken verifier is never read
as reward 0. Bad input (a task lacking the field the verifier needs) raises
:class:`~grpo.errors.InvalidArgumentError`, which the server maps to INVALID_ARGUMENT.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from google.protobuf.message import Message as _Message
from pydantic import BaseModel

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2, verifier_pb2

__all__ = ["Verifier", "VerifierInfo", "make_score"]


@dataclass(frozen=True)
class VerifierInfo:
    """What a verifier checks: the domain form of ``VerifierDescribeResponse``.

    Attributes:
        name: verifier name, e.g. ``"math"``.
        version: implementation version.
        kind: ``verifier_pb2.VERIFIER_KIND_OUTCOME`` or ``VERIFIER_KIND_PROCESS``.
        task_types: task types (``Task.type``) it accepts.
        config: resolved configuration, name -> value as text.
    """

    name: str
    version: str
    kind: int
    task_types: tuple[str, ...]
    config: Mapping[str, str] = field(default_factory=dict)

    def to_proto(self) -> verifier_pb2.VerifierDescribeResponse:
        """Return the ``VerifierDescribeResponse`` carrying this description."""
        return verifier_pb2.VerifierDescribeResponse(
            name=self.name,
            version=self.version,
            task_types=list(self.task_types),
            kind=self.kind,  # type: ignore[arg-type]
            config=dict(self.config),
        )


def make_score(
    status: int,
    reward: float = 0.0,
    *,
    extracted: str = "",
    detail: str = "",
    steps: Iterable[common_pb2.StepScore] = (),
    tests: Iterable[common_pb2.TestResult] = (),
) -> common_pb2.Score:
    """Build a ``Score`` message.

    Args:
        status: a ``common_pb2.SCORE_STATUS_*`` value; the reward is meaningful only for OK.
        reward: the reward (outcome verifiers: in [0, 1]).
        extracted: the normalized final answer taken from the response.
        detail: human-readable detail (why a failure happened, which claim was false).
        steps: per-step scores (process verifiers).
        tests: per-test results (code verifiers).

    Returns:
        The ``Score``; ``verifier`` and ``latency_s`` are filled by :meth:`Verifier.verify`.
    """
    return common_pb2.Score(
        status=status,  # type: ignore[arg-type]
        reward=float(reward),
        extracted_answer=extracted,
        detail=detail,
        steps=list(steps),
        tests=list(tests),
    )


class Verifier(abc.ABC):
    """Base class of every verifier.

    Subclasses set the class attributes and implement :meth:`score`; they may override
    :meth:`validate` (for checks beyond ``required_task_fields``), :meth:`config_items`,
    :meth:`self_test` (known answers the service judges before it reports SERVING) and
    :meth:`close` (to stop worker processes).

    Class attributes:
        name: verifier name, e.g. ``"math"``; also the ``Score.verifier`` field.
        kind: ``verifier_pb2.VERIFIER_KIND_OUTCOME`` or ``VERIFIER_KIND_PROCESS``.
        task_types: task types (``Task.type``) this verifier accepts.
        version: implementation version reported by ``Describe``.
        required_task_fields: ``Task`` fields that must be set (non-empty) for every request.
    """

    name: ClassVar[str]
    kind: ClassVar[int]
    task_types: ClassVar[tuple[str, ...]]
    version: ClassVar[str] = "0.1.0"
    required_task_fields: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: BaseModel | None = None) -> None:
        """Keep ``config`` (the verifier's frozen pydantic config, or None when it has none)."""
        self.config = config

    def describe(self) -> VerifierInfo:
        """Return the name, version, kind, task types and resolved config of this verifier."""
        return VerifierInfo(
            name=self.name,
            version=self.version,
            kind=self.kind,
            task_types=tuple(self.task_types),
            config=self.config_items(),
        )

    def config_items(self) -> dict[str, str]:
        """Return the resolved configuration as name -> text (every field of ``config``)."""
        if self.config is None:
            return {}
        return {k: str(v) for k, v in self.config.model_dump(mode="json").items()}

    def validate(self, task: common_pb2.Task, response: str) -> None:
        """Check that ``task`` and ``response`` can be scored by this verifier.

        Raises:
            InvalidArgumentError: ``response`` is not text, ``task.type`` is set but not one of
                ``task_types``, or a field of ``required_task_fields`` is unset; the message
                names the field.
        """
        if not isinstance(task, common_pb2.Task):
            raise InvalidArgumentError(f"task must be a grpo.v1.Task, got {type(task).__name__}")
        if not isinstance(response, str):
            raise InvalidArgumentError(f"response must be str, got {type(response).__name__}")
        if task.type and self.task_types and task.type not in self.task_types:
            raise InvalidArgumentError(
                f"task.type {task.type!r} is not handled by verifier {self.name!r} (accepts: "
                f"{', '.join(self.task_types)}); check the routing table (task id {task.id!r})"
            )
        for name in self.required_task_fields:
            value: Any = getattr(task, name)
            present = task.HasField(name) if isinstance(value, _Message) else bool(value)
            if not present:
                raise InvalidArgumentError(
                    f"task.{name} is required by verifier {self.name!r} (task id {task.id!r})"
                )

    @abc.abstractmethod
    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """Score ``response`` against ``task``; called only after :meth:`validate` passed.

        Returns:
            A ``Score`` whose status says whether the reward is meaningful. Expected failures
            (no answer, unparsable, time limit) are statuses, not exceptions.
        """

    def verify(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """Validate, score, and stamp ``verifier`` and ``latency_s`` (seconds) on the result.

        An exception other than InvalidArgumentError escaping :meth:`score` becomes a Score
        with status ``INTERNAL`` (the reward is then missing, never a silent 0).

        Raises:
            InvalidArgumentError: the input is malformed (see :meth:`validate`).
        """
        start = time.perf_counter()
        self.validate(task, response)
        try:
            result = self.score(task, response)
        except InvalidArgumentError:
            raise
        except Exception as exc:
            result = make_score(
                common_pb2.SCORE_STATUS_INTERNAL, detail=f"{type(exc).__name__}: {exc}"[:1000]
            )
        result.verifier = self.name
        result.latency_s = time.perf_counter() - start
        return result

    def lanes(self) -> int:
        """How the servicer splits a ScoreBatch: 0 (this default) scores each item as its own
        job on the servicer's threads; n > 0 cuts the items into at most n runs of
        consecutive items, each one :meth:`verify_many` call (a pool verifier: one run per
        pool worker)."""
        return 0

    def score_many(
        self,
        items: Sequence[tuple[common_pb2.Task, str]],
        on_score: Callable[[int, common_pb2.Score], None] | None = None,
    ) -> list[common_pb2.Score]:
        """Score several ``(task, response)`` items, each already validated.

        The default calls :meth:`score` for each. A verifier whose checks run in a
        ``WorkerPool`` overrides it to send the items in one message
        (``WorkerPool.call_many``), each still under its own time limit; such a verifier sets
        each score's ``latency_s`` to the item's own time.

        Args:
            items: the ``(task, response)`` pairs.
            on_score: called with ``(index, score)`` as soon as each item is scored (the
                servicer answers the items a run finished before the request's deadline).

        Returns:
            One ``Score`` per item, in order.
        """
        scores = []
        for i, (task, response) in enumerate(items):
            scores.append(self.score(task, response))
            if on_score is not None:
                on_score(i, scores[-1])
        return scores

    def verify_many(
        self,
        items: Sequence[tuple[common_pb2.Task, str]],
        on_score: Callable[[int, common_pb2.Score], None] | None = None,
    ) -> list[common_pb2.Score]:
        """:meth:`verify` for several items through :meth:`score_many`.

        An exception other than InvalidArgumentError escaping :meth:`score_many` makes the
        status of every item not yet scored ``INTERNAL``. ``latency_s`` is the item's own
        time where :meth:`score_many` set it, else the time since the call started.

        Args:
            items: the ``(task, response)`` pairs.
            on_score: as for :meth:`score_many`, with ``verifier`` and ``latency_s`` stamped.

        Raises:
            InvalidArgumentError: an item is malformed (see :meth:`validate`); the message
                starts with ``items[i]:``.
        """
        start = time.perf_counter()
        for i, (task, response) in enumerate(items):
            try:
                self.validate(task, response)
            except InvalidArgumentError as exc:
                raise InvalidArgumentError(f"items[{i}]: {exc}") from None
        done: dict[int, common_pb2.Score] = {}

        def stamp(i: int, score: common_pb2.Score) -> None:
            score.verifier = self.name
            if score.latency_s <= 0:
                score.latency_s = time.perf_counter() - start
            done[i] = score
            if on_score is not None:
                on_score(i, score)

        try:
            scores = self.score_many(items, stamp)
        except InvalidArgumentError:
            raise
        except Exception as exc:
            detail = f"{type(exc).__name__}: {exc}"[:1000]
            scores = [make_score(common_pb2.SCORE_STATUS_INTERNAL, detail=detail) for _ in items]
        for i, score in enumerate(scores):  # items score_many did not report as it went
            if i not in done:
                stamp(i, score)
        return [done[i] for i in range(len(items))]

    def self_test(self) -> str | None:
        """Judge known answers the way real requests are judged; None when all came out right.

        A verifier whose judging depends on something that can break at run time (a sandbox,
        a worker pool) overrides this; its service then stays NOT_SERVING until it passes and
        re-runs it periodically (:class:`~grpo.verifiers.sdk.service.SelfTestWorker`).

        Returns:
            None, or why the verifier cannot judge (one line, for the log and the health
            reason). The default has nothing to check: None.
        """
        return None

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release resources (worker processes); the default has none to release."""

    def __enter__(self) -> Verifier:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
