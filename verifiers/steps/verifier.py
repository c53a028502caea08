"""The math step (process) verifier: a reward per step of a worked solution, with its span.

Steps and claims are defined in ``segment`` and ``claims``; the check runs in a pre-started
:class:`WorkerPool` (hard wall-clock limit, memory cap). Each step gets ``valid_reward``
(+1), ``invalid_reward`` (-1) or ``unverifiable_reward`` (0).

The overall ``Score.reward`` is the share of verifiable steps that are valid,
``n_valid / (n_valid + n_invalid)`` in [0, 1]. Statuses: ``OK`` when at least one step was
verifiable; ``NO_ANSWER`` (reward 0, steps still listed) when no step had a checkable claim;
``PARSE_ERROR`` for a response over ``max_response_chars`` or not valid UTF-8 (verdicts);
``UNDECIDED`` when the worker pool hit its time limit or memory cap or lost its worker (the
verifier's limits: every size a response controls is refused or decided per claim without
being computed), ``INTERNAL`` for a closed pool or a bug (both missing, never 0), as for the
math verifier. It never answers ``TIMEOUT`` or ``RUNTIME_ERROR``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk import (
    PoolSettings,
    WorkerPool,
    make_score,
)
from grpo.verifiers.sdk.failures import pool_scores
from grpo.verifiers.sdk.pooled import PoolVerifier
from grpo.verifiers.steps.check import StepVerdict, check_steps

__all__ = ["StepsConfig", "StepsVerifier"]

PRELOAD = ("grpo.verifiers.steps.check", "grpo.verifiers.steps.symbolic")


class StepsConfig(BaseModel):
    """Configuration of the math step verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    valid_reward: float = Field(default=1.0, description="Reward of a step whose claims hold.")
    invalid_reward: float = Field(
        default=-1.0, description="Reward of a step with a refuted claim."
    )
    unverifiable_reward: float = Field(
        default=0.0, description="Reward of a step with no checkable claim."
    )
    max_claims: int = Field(
        default=200, ge=1, description="Claims checked at most per response (the rest skipped)."
    )
    max_response_chars: int = Field(
        default=100_000,
        ge=100,
        description="Longer responses get status PARSE_ERROR without being segmented.",
    )
    pool: PoolSettings = Field(
        default_factory=PoolSettings, description="Worker processes that run the sympy checks."
    )

    @model_validator(mode="after")
    def _ordered(self) -> StepsConfig:
        if not self.invalid_reward <= self.unverifiable_reward <= self.valid_reward:
            raise ValueError(
                "step rewards must satisfy invalid_reward <= unverifiable_reward <= "
                f"valid_reward, got {self.invalid_reward}, {self.unverifiable_reward}, "
                f"{self.valid_reward}; reorder them"
            )
        return self


class StepsVerifier(PoolVerifier):
    """Process verifier: checks each step's equations; no gold answer needed.

    Args:
        config: step rewards, limits and worker pool settings.
        pool: an already started pool to use (not closed by :meth:`close`).
    """

    name: ClassVar[str] = "math-steps"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_PROCESS
    task_types: ClassVar[tuple[str, ...]] = ("math", "arith")

    def __init__(self, config: StepsConfig | None = None, pool: WorkerPool | None = None) -> None:
        self.config: StepsConfig = config or StepsConfig()
        super().__init__(self.config, self.config.pool, PRELOAD, pool)

    def _reward(self, status: int) -> float:
        if status == common_pb2.STEP_STATUS_VALID:
            return self.config.valid_reward
        if status == common_pb2.STEP_STATUS_INVALID:
            return self.config.invalid_reward
        return self.config.unverifiable_reward

    def score_many(
        self,
        items: Sequence[tuple[common_pb2.Task, str]],
        on_score: Callable[[int, common_pb2.Score], None] | None = None,
    ) -> list[common_pb2.Score]:
        """Score every step of each response, the step checks sent to one pool worker in one
        message (``WorkerPool.call_many``: each under its own time limit).

        Returns:
            Per item, a Score with ``steps`` (span, status, reward, detail per step) and
            reward = share of verifiable steps that are valid (module docstring for
            statuses); ``latency_s`` is the check's own time.
        """
        return pool_scores(
            self.pool,
            check_steps,
            items,
            args_of=lambda _task, response: (response, self.config.max_claims),
            score_of=self._from_verdicts,
            max_response_chars=self.config.max_response_chars,
            on_score=on_score,
        )

    def _from_verdicts(self, verdicts: list[StepVerdict]) -> common_pb2.Score:
        steps = [
            common_pb2.StepScore(
                char_start=start,
                char_end=end,
                status=status,  # type: ignore[arg-type]
                reward=self._reward(status),
                detail=detail,
            )
            for start, end, status, detail in verdicts
        ]
        valid = sum(s.status == common_pb2.STEP_STATUS_VALID for s in steps)
        invalid = sum(s.status == common_pb2.STEP_STATUS_INVALID for s in steps)
        summary = f"{valid} valid, {invalid} invalid, {len(steps) - valid - invalid} unverifiable"
        if valid + invalid == 0:
            return make_score(common_pb2.SCORE_STATUS_NO_ANSWER, detail=summary, steps=steps)
        return make_score(
            common_pb2.SCORE_STATUS_OK, valid / (valid + invalid), detail=summary, steps=steps
        )
