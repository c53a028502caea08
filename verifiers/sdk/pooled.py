"""The base of a verifier whose checks run in a :class:`~grpo.verifiers.sdk.pool.WorkerPool`.

:class:`PoolVerifier` owns the pool (or borrows one), scores a ScoreBatch in one run per pool
worker (``lanes``), and scores one item as a run of one, so single and batched scoring share
one path: a subclass implements only :meth:`Verifier.score_many`, usually by returning
``grpo.verifiers.sdk.failures.pool_scores``.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel

from grpo.v1 import common_pb2
from grpo.verifiers.sdk.base import Verifier
from grpo.verifiers.sdk.pool import PoolSettings, WorkerPool

__all__ = ["PoolVerifier"]


class PoolVerifier(Verifier):
    """A verifier with a worker pool (module docstring).

    Args:
        config: the verifier's frozen config (None when it has none).
        settings: the pool's settings (used when ``pool`` is None).
        preload: modules the pool's workers import once.
        pool: an already started pool to use instead (not closed by :meth:`close`).
    """

    def __init__(
        self,
        config: BaseModel | None,
        settings: PoolSettings,
        preload: Sequence[str],
        pool: WorkerPool | None = None,
    ) -> None:
        super().__init__(config)
        self._own_pool = pool is None
        self.pool = pool or WorkerPool(settings, preload=preload)

    def lanes(self) -> int:
        """One :meth:`score_many` run per pool worker."""
        return self.pool.settings.workers

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """``score_many`` of the one item."""
        (result,) = self.score_many([(task, response)])
        return result

    def close(self) -> None:
        """Stop the worker pool (when this verifier started it)."""
        if self._own_pool:
            self.pool.close()
