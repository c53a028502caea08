"""The math outcome verifier: reward 1 when the response's final answer equals the gold.

Extraction, normalization, the answer model and the comparison are described in ``extract``,
``normalize``, ``answer`` and ``compare``; every check runs in a pre-started
:class:`WorkerPool` (hard wall-clock limit, memory cap), so the same limit holds from any
thread or event loop. Statuses (verdict or missing: ``check`` and docs/verifiers.md): ``OK``
(reward 1 or 0), ``NO_ANSWER``, ``PARSE_ERROR`` (also: a response over
``max_response_chars`` or not valid UTF-8) are verdicts; ``UNDECIDED`` (the comparison could
not decide, or the worker hit its time limit or memory cap or died: the verifier's limits, not
the response's, since every size a response controls is refused before any sympy call) and
``INTERNAL`` (a bad gold answer, a closed pool, a bug in the check) are missing. This
verifier never answers ``TIMEOUT`` or ``RUNTIME_ERROR``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.math.check import check_answer
from grpo.verifiers.sdk import (
    PoolSettings,
    WorkerPool,
    make_score,
)
from grpo.verifiers.sdk.failures import pool_scores
from grpo.verifiers.sdk.pooled import PoolVerifier

__all__ = ["MathConfig", "MathVerifier"]

PRELOAD = ("grpo.verifiers.math.check", "grpo.verifiers.math.symbolic")


class MathConfig(BaseModel):
    """Configuration of the math outcome verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    answer_format: Literal["lenient", "boxed", "answer_tag", "gsm8k"] = Field(
        default="lenient",
        description="Where the final answer must be when a task does not say "
        "(Task.metadata['answer_format']): 'lenient' (answer tag, box, ####, answer phrase, "
        "final statement, in that precedence), or one strict format ('boxed', 'answer_tag', "
        "'gsm8k') that never falls back to guessing.",
    )
    approximation: Literal["exact", "tolerance"] = Field(
        default="exact",
        description="Decimals against values no finite decimal writes (1/3, sqrt(2)): 'exact' "
        "(the MATH convention: a decimal is the number it spells, so 0.333333 is not 1/3 "
        "unless the gold is that decimal) or 'tolerance' (equal within rel_tol and under one "
        "unit of the decimal's last place).",
    )
    rel_tol: float = Field(
        default=1e-6,
        gt=0,
        lt=0.01,
        description="Relative tolerance of approximation='tolerance' (unused otherwise); must "
        "stay far below 1 so that 1/2004! and 1/2006! differ.",
    )
    max_response_chars: int = Field(
        default=100_000,
        ge=100,
        description="Longer responses get status PARSE_ERROR without being parsed.",
    )
    pool: PoolSettings = Field(
        default_factory=PoolSettings, description="Worker processes that run the sympy checks."
    )


class MathVerifier(PoolVerifier):
    """Outcome verifier for math answers (``task.gold_answer``): the answer model, exact
    arithmetic and sympy equivalence.

    Args:
        config: tolerance, response size limit and worker pool settings.
        pool: an already started pool to use instead of starting one (it is not closed by
            :meth:`close`); it must have ``grpo.verifiers.math.check`` importable.
    """

    name: ClassVar[str] = "math"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("math", "arith")
    required_task_fields: ClassVar[tuple[str, ...]] = ("gold_answer",)

    def __init__(self, config: MathConfig | None = None, pool: WorkerPool | None = None) -> None:
        self.config: MathConfig = config or MathConfig()
        super().__init__(self.config, self.config.pool, PRELOAD, pool)

    def _args(
        self, task: common_pb2.Task, response: str
    ) -> tuple[str, str, str, float | None, str]:
        """``check_answer``'s arguments: the task's ``metadata["answer_format"]`` (else the
        config's), the tolerance when ``approximation`` is ``tolerance``, the prompt."""
        answer_format = task.metadata.get("answer_format") or self.config.answer_format
        rel_tol = self.config.rel_tol if self.config.approximation == "tolerance" else None
        return task.gold_answer, response, answer_format, rel_tol, task.prompt

    def score_many(
        self,
        items: Sequence[tuple[common_pb2.Task, str]],
        on_score: Callable[[int, common_pb2.Score], None] | None = None,
    ) -> list[common_pb2.Score]:
        """Score the final answer of each response against its ``task.gold_answer``, the
        checks sent to one pool worker in one message (``WorkerPool.call_many``: each under
        its own time limit).

        Returns:
            Per item, a Score with status OK and reward 1.0/0.0, or a failure status (module
            docstring); ``extracted_answer`` is the normalized extracted answer and
            ``latency_s`` the check's own time. A task whose ``metadata["answer_format"]`` is
            not one of the formats gets ``INTERNAL`` (a task error) naming it.
        """
        return pool_scores(
            self.pool,
            check_answer,
            items,
            args_of=self._args,
            score_of=lambda r: make_score(r[0], r[1], extracted=r[2], detail=r[3]),
            max_response_chars=self.config.max_response_chars,
            on_score=on_score,
        )
