"""The prompt feeder: writes PromptJobs for the training tasks, with backpressure.

Each pass ("epoch") over the tasks uses a fresh seeded shuffle; the group id of a job is
``<task id>/e<epoch>``, also its dedup key, so re-feeding after a restart writes nothing twice.
The feeder only adds jobs while (a) the prompts stream's lag for the rollout workers' consumer
group is below ``prompts_ahead`` and (b) the groups stream's lag for the learner's consumer
group, counting only groups not yet delivered (the learner acknowledges at checkpoints), is
below ``groups_ahead``: generation never runs far ahead of training, which bounds
how stale (off-policy) a group can be when the learner consumes it.

Restart: the job order is a pure function of the seed, and jobs are written strictly in that
order, so the jobs already written are a prefix of it. ``resume()`` (called by the
constructor) finds the prefix's length from the streams' dedup markers of the prompts stream
(binary search, O(log n) reads) and continues right after it: a restarted feeder never
re-feeds a prompt and never skips one.

Prompt curriculum (``data.curriculum``): with a ``PassRateCurriculum`` the feeder asks, for
each prompt in that order, whether to feed it now (``grpo.services.driver.curriculum``: from
its difficulty bucket's recent share of mixed groups, read from the assembler's closed-groups
stream ``StreamNames.closed``); a skipped prompt gets a skip marker
(``<prompts>:skipped:<group id>``) and comes back in the next pass. Every position of the
order is then decided once, written or skipped, in order, so the decided positions are still a
prefix and ``resume()`` finds it the same way; a restarted curriculum re-reads the closed
groups from the stream's start.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

from grpo.errors import InvalidArgumentError
from grpo.services.driver.curriculum import PassRateCurriculum
from grpo.services.runtime.streams import PAYLOAD_FIELD, StreamNames, Streams
from grpo.v1 import common_pb2

__all__ = ["PromptFeeder"]

CLOSED_BATCH = 1000
"""Closed-group entries read per ``XRANGE`` of the curriculum's closed stream."""


class PromptFeeder:
    """Feeds PromptJobs for ``tasks`` in seeded shuffled passes (see the module docstring)."""

    def __init__(
        self,
        streams: Streams,
        names: StreamNames,
        tasks: Sequence[common_pb2.Task],
        *,
        group_size: int,
        prompts_ahead: int,
        groups_ahead: int,
        worker_group: str,
        learner_group: str,
        seed: int = 0,
        repeats: int = 1,
        curriculum: PassRateCurriculum | None = None,
        correct_threshold: float = 1.0,
    ) -> None:
        """Args:
        streams, names: Redis streams of the run.
        tasks: training tasks (non-empty).
        group_size: G rollouts per job.
        prompts_ahead: most unfinished jobs in the prompts stream (backpressure).
        groups_ahead: most unconsumed groups in the groups stream (backpressure).
        worker_group: consumer group of the rollout workers on the prompts stream.
        learner_group: consumer group of the learner on the groups stream.
        seed: seed of the shuffles.
        repeats: passes over the tasks before the feeder is exhausted.
        curriculum: chooses which prompts to feed now (module docstring); None feeds all.
        correct_threshold: a valid outcome reward >= this is correct (the assembler's
            ``dynamic_sampling.correct_threshold``), for the curriculum's mixed/unmixed count.

        Raises:
            InvalidArgumentError: no tasks, G < 2, or a bound < 1.
        """
        if not tasks:
            raise InvalidArgumentError("the feeder needs at least one training task")
        if group_size < 2 or prompts_ahead < 1 or groups_ahead < 1:
            raise InvalidArgumentError(
                f"need group_size >= 2 and bounds >= 1, got G={group_size}, "
                f"prompts_ahead={prompts_ahead}, groups_ahead={groups_ahead}"
            )
        self._streams = streams
        self._names = names
        self._tasks = list(tasks)
        self._group_size = group_size
        self._prompts_ahead = prompts_ahead
        self._groups_ahead = groups_ahead
        self._worker_group = worker_group
        self._learner_group = learner_group
        self._seed = seed
        self._repeats = repeats
        self._epoch = 0
        self._order: list[int] = []
        self._again: tuple[common_pb2.Task, int] | None = None  # refused by Redis: retried first
        self.fed = 0
        self.skipped = 0
        self.curriculum = curriculum
        self._correct_threshold = correct_threshold
        self._tasks_by_id = {t.id: t for t in self._tasks}
        self._closed_after = "0-0"  # last closed-groups entry the curriculum observed
        self.resumed_at = self.resume()

    def _job_id(self, position: int) -> str:
        """Group id of the job at ``position`` of the whole feed (all passes)."""
        epoch, index = divmod(position, len(self._tasks))
        order = list(range(len(self._tasks)))
        random.Random(self._seed * 1_000_003 + epoch).shuffle(order)
        return f"{self._tasks[order[index]].id}/e{epoch}"

    def _skip_marker(self, job_id: str) -> str:
        return f"{self._names.prompts}:skipped:{job_id}"

    def _decided(self, position: int) -> bool:
        """Whether the job at ``position`` was written, or skipped by the curriculum."""
        job_id = self._job_id(position)
        marker = self._streams.dedup_marker(self._names.prompts, job_id)
        return bool(self._streams.client.exists(marker, self._skip_marker(job_id)))

    def resume(self) -> int:
        """Skip the jobs an earlier feeder of the same stream already wrote (or skipped).

        Returns:
            How many positions were already decided (0 for a fresh run).
        """
        total = len(self._tasks) * self._repeats
        lo, hi = 0, total  # invariant: positions < lo are written, positions >= hi are not
        while lo < hi:
            mid = (lo + hi) // 2
            if self._decided(mid):
                lo = mid + 1
            else:
                hi = mid
        self._epoch, self._order = 0, []
        for _ in range(lo):
            self._next_task()
        return lo

    @property
    def exhausted(self) -> bool:
        """True once every pass has been fed."""
        return self._epoch >= self._repeats and not self._order and self._again is None

    def _next_task(self) -> tuple[common_pb2.Task, int] | None:
        if self._again is not None:  # a job Redis refused last time goes first
            item, self._again = self._again, None
            return item
        if not self._order:
            if self._epoch >= self._repeats:
                return None
            self._order = list(range(len(self._tasks)))
            random.Random(self._seed * 1_000_003 + self._epoch).shuffle(self._order)
            self._order.reverse()
            self._epoch += 1
        return self._tasks[self._order.pop()], self._epoch - 1

    def observe_closed(self, count: int = CLOSED_BATCH) -> int:
        """Feed the curriculum the closed groups the assembler appended since the last call.

        Returns:
            Closed-group entries read (0 without a curriculum).
        """
        if self.curriculum is None:
            return 0
        reply: Any = self._streams.client.xrange(
            self._names.closed, min=f"({self._closed_after}", count=count
        )
        raw: list[tuple[Any, Any]] = list(reply or [])
        groups = []
        for entry_id, fields in raw:
            self._closed_after = entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)
            payload = fields.get(PAYLOAD_FIELD) if fields else None
            if isinstance(payload, bytes):
                groups.append(common_pb2.Group.FromString(payload))
        self.curriculum.observe_groups(groups, self._tasks_by_id, self._correct_threshold)
        return len(raw)

    def pump(self, limit: int = 64) -> int:
        """Write jobs while both lags are under their bounds; at most ``limit`` per call (and
        at most ``4 * limit`` curriculum decisions).

        Returns:
            Jobs written by this call (already-written ids count 0).
        """
        # Both lags are read once per pump (the prompts lag first: a full queue, the common
        # case between a worker's calls, costs one XINFO); each job written adds one to the
        # prompts lag (workers taking jobs meanwhile only lower it). Groups the learner has
        # read but not yet acknowledged (it acks at checkpoints) are consumed already: only
        # undelivered groups count.
        prompts_lag = self._streams.lag(self._names.prompts, self._worker_group)
        if prompts_lag >= self._prompts_ahead:
            return 0
        groups_lag, _ = self._streams.backlog(self._names.groups, self._learner_group)
        if groups_lag >= self._groups_ahead:
            return 0
        while self.observe_closed(CLOSED_BATCH) == CLOSED_BATCH:  # a short read was the last
            pass
        written = decided = 0
        while written < limit and decided < 4 * limit:
            if prompts_lag >= self._prompts_ahead:
                break
            item = self._next_task()
            if item is None:
                break
            task, epoch = item
            decided += 1
            group_id = f"{task.id}/e{epoch}"
            if self.curriculum is not None and not self.curriculum.decide(task, group_id):
                ttl = self._streams.dedup_ttl_s or None
                self._streams.client.set(self._skip_marker(group_id), b"1", ex=ttl)
                self.skipped += 1
                continue
            job = common_pb2.PromptJob(
                group_id=f"{task.id}/e{epoch}", task=task, group_size=self._group_size, round=0
            )
            try:
                wrote = self._streams.produce(self._names.prompts, job, dedup_key=job.group_id)
            except BaseException:
                self._again = (task, epoch)  # not written (Redis out or full): next pump
                raise
            if wrote:
                written += 1
                prompts_lag += 1
                self.fed += 1
        return written
