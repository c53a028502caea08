"""The rollout worker: turns ``PromptJob`` entries of the prompts stream into groups of rollouts.

It takes up to ``jobs_per_batch`` jobs at a time, samples each group's G completions in one
batched ``generate(prompts, n=G)`` call and writes one ``Rollout`` per completion to the
rollouts stream (DESIGN.md, "Data flow"). Guarantees:

- **No duplicate index.** Each rollout is written with the dedup key ``<group_id>:<index>``
  (``Streams.produce``'s atomic marker), so a replay never writes an index twice.
- **No lost index.** The prompt entry is acknowledged only after all G rollouts are written.
  A worker killed mid-group leaves the entry pending; a worker that reclaims it (XAUTOCLAIM
  after ``reclaim_idle_ms``) checks which indices already have markers and samples only the
  missing ones.
- **Backpressure.** While the rollouts stream's lag for the downstream consumer group
  (undelivered + unacknowledged entries) is at or above ``max_rollout_lag``, no new job is
  taken.
- **Policy versions.** Before each job the worker reads the ``PolicyWeights`` under
  ``StreamNames.policy_key``; a newer version is loaded in place (``load_weights``) and every
  rollout records the version that sampled it.

A job the backend rejects as invalid (e.g. a prompt longer than the context) is moved to
``<prompts>:dead`` with the reason and acknowledged; any other failure leaves it pending for a
retry by reclaim.

The loop follows the one stream-consumer protocol (``grpo.services.streams.StreamConsumer``:
reclaim -> consume -> write rollouts -> acknowledge) and its crash policy
(``ConsumerLoop``): a Redis outage is ridden out with backoff for ``redis_outage_s`` seconds,
after which the worker reports dead and its supervisor restarts it.

Prometheus metrics: ``grpo_rollouts_written_total``, ``grpo_generated_tokens_total``,
``grpo_prompt_jobs_done_total``, ``grpo_prompt_jobs_dead_total``,
``grpo_worker_policy_version``, ``grpo_worker_generate_seconds`` (batched generate wall time).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import redis
from prometheus_client import Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import InvalidArgumentError
from grpo.services.generation.backend import GenerationBackend, SamplingConfig
from grpo.services.learner.publish import read_policy
from grpo.services.streams import (
    ConsumerLoop,
    Outage,
    StreamConsumer,
    StreamEntry,
    StreamNames,
    Streams,
)
from grpo.v1 import common_pb2

if TYPE_CHECKING:
    from grpo.services.weights.puller import BackgroundPuller

__all__ = ["RolloutWorker", "RolloutWorkerConfig", "rollout_dedup_key"]

log = logging.getLogger(__name__)

ROLLOUTS_WRITTEN = Counter("grpo_rollouts_written", "Rollouts written to the rollouts stream.")
GENERATED_TOKENS = Counter("grpo_generated_tokens", "Tokens sampled by the rollout worker.")
GROUPS_DONE = Counter("grpo_prompt_jobs_done", "Prompt jobs acknowledged with all G rollouts.")
DEAD_JOBS = Counter("grpo_prompt_jobs_dead", "Invalid prompt jobs moved to dead letters.")
POLICY_VERSION = Gauge("grpo_worker_policy_version", "Policy version loaded by the worker.")
GENERATE_SECONDS = Histogram(
    "grpo_worker_generate_seconds",
    "Wall time of one batched generate call in seconds.",
    buckets=(0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 120.0),
)


def rollout_dedup_key(group_id: str, index: int) -> str:
    """Dedup key of rollout ``index`` of group ``group_id`` on the rollouts stream."""
    return f"{group_id}:{index}"


def _default_consumer() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class RolloutWorkerConfig(BaseModel):
    """Settings of the rollout worker loop."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    namespace: str = Field(default="grpo", description="Stream namespace of the run (StreamNames).")
    consumer_group: str = Field(
        default="rollout-workers",
        description="Consumer group of the workers on the prompts stream.",
    )
    consumer: str = Field(
        default_factory=_default_consumer,
        description="This worker's consumer name (unique per process; default host-pid).",
    )
    downstream_group: str = Field(
        default="assembler",
        description="Consumer group on the rollouts stream whose lag is bounded.",
    )
    max_rollout_lag: int = Field(
        default=512, ge=1, description="Hold back while the rollouts stream's lag is at least this."
    )
    sampling: SamplingConfig = Field(
        default_factory=SamplingConfig,
        description="Sampling parameters; a non-zero seed is mixed with the group id.",
    )
    reclaim_idle_ms: int = Field(
        default=60_000,
        ge=1,
        description="Take over prompt entries pending this long (their worker died); keep it "
        "well above the time one group takes to generate.",
    )
    jobs_per_batch: int = Field(
        default=4,
        ge=1,
        description="Prompt jobs sampled together in one generate call (n = G each); larger "
        "batches raise tokens/s (see bench generation).",
    )
    block_ms: int = Field(default=500, ge=1, description="How long one stream read waits (ms).")
    idle_sleep_s: float = Field(
        default=0.05, gt=0, description="Pause while held back by backpressure (seconds)."
    )
    error_backoff_s: float = Field(
        default=1.0, gt=0, description="Pause after an unexpected error before retrying (seconds)."
    )
    redis_outage_s: float = Field(
        default=120.0,
        gt=0,
        description="Longest Redis outage ridden out (reconnecting with backoff) before the "
        "worker reports dead and is restarted (seconds).",
    )


class RolloutWorker(ConsumerLoop):
    """Consumes prompt jobs and produces groups of rollouts; a ``BackgroundWorker``."""

    thread_name = "rollout-worker"

    def __init__(
        self,
        client: redis.Redis,
        backend: GenerationBackend,
        config: RolloutWorkerConfig,
        *,
        on_rollout_written: Callable[[common_pb2.Rollout], None] | None = None,
        weights_puller: BackgroundPuller | None = None,
    ) -> None:
        """Wrap a Redis client (``decode_responses=False``) and a backend.

        Args:
            on_rollout_written: hook called after each rollout is durable (tests inject faults
                here; metrics may count).
            weights_puller: pulls announced versions from the learner's weight server in the
                background (``weights.mode: grpc``); None = load ``PolicyWeights.path`` from a
                shared volume.
        """
        self._puller = weights_puller
        self._client = client
        self._streams = Streams(client)
        self._names = StreamNames(config.namespace)
        self._backend = backend
        self._config = config
        self._hook = on_rollout_written
        super().__init__(Outage(config.redis_outage_s, what="redis (rollout worker)"))
        self.error_backoff_s = config.error_backoff_s
        self.jobs = StreamConsumer(
            self._streams,
            self._names.prompts,
            config.consumer_group,
            config.consumer,
            common_pb2.PromptJob,
            reclaim_idle_ms=config.reclaim_idle_ms,
            reclaim_every_s=0.0,
        )
        self.groups_done = 0
        self.rollouts_written = 0

    # ---- one iteration ------------------------------------------------------------------

    def run_once(self) -> int:
        """Reload weights if a newer version is published, then process up to
        ``jobs_per_batch`` jobs (reclaimed ones first) with batched generation.

        Returns:
            Rollouts written in this call (0 when held back or nothing arrived).
        """
        cfg = self._config
        self.maybe_reload_weights()
        if self._streams.lag(self._names.rollouts, cfg.downstream_group) >= cfg.max_rollout_lag:
            self._stop.wait(cfg.idle_sleep_s)
            return 0
        return self.process(self.jobs.poll(cfg.jobs_per_batch, cfg.block_ms))

    def maybe_reload_weights(self) -> bool:
        """Load the published policy if its version is newer than the backend's.

        Returns:
            True if weights were loaded.
        """
        weights = read_policy(self._client, self._names)
        if weights is None or weights.policy_version <= self._backend.policy_version:
            return False
        located = self._weights_to_load(weights)
        if located is None:
            return False  # a pull is in flight: keep generating with the loaded weights
        version, path = located
        load_s = self._backend.load_weights(version, path)
        POLICY_VERSION.set(version)
        log.info(
            "policy weights loaded", extra={"policy_version": version, "load_s": round(load_s, 3)}
        )
        return True

    def _weights_to_load(self, weights: common_pb2.PolicyWeights) -> tuple[int, str] | None:
        """(version, local folder) to load for an announced newer ``weights``, or None yet.

        Shared volume: the announced path itself. gRPC: a finished, verified pull newer than
        the loaded version; otherwise a background pull of the announced version is started
        (if none is in flight) and None is returned without waiting.
        """
        if self._puller is None:
            return int(weights.policy_version), weights.path
        pulled = self._puller.poll(int(weights.policy_version))
        if pulled is None or pulled.policy_version <= self._backend.policy_version:
            return None
        return pulled.policy_version, str(pulled.path)

    def _written_indices(self, group_id: str, group_size: int) -> set[int]:
        pipe = self._client.pipeline(transaction=False)
        for i in range(group_size):
            pipe.exists(
                self._streams.dedup_marker(self._names.rollouts, rollout_dedup_key(group_id, i))
            )
        return {i for i, found in enumerate(pipe.execute()) if found}

    def _sampling_for(self, key: str) -> SamplingConfig:
        """The configured sampling; a non-zero seed is mixed with ``key`` (the batch's groups
        and how many of their rollouts existed), so every batch draws fresh samples."""
        seed = self._config.sampling.seed
        if not seed:
            return self._config.sampling
        digest = hashlib.sha256(f"{seed}:{key}".encode()).digest()
        return self._config.sampling.model_copy(
            update={"seed": int.from_bytes(digest[:7], "big") or 1}
        )

    def process(self, entries: list[StreamEntry[common_pb2.PromptJob]]) -> int:
        """Write the missing rollouts of each job's group, then acknowledge each job.

        Jobs missing the same number of rollouts share one ``generate`` call. A job the
        backend rejects (InvalidArgumentError) is dead-lettered; the others proceed.

        Returns:
            Rollouts written now (0 if every index already existed).
        """
        by_count: dict[int, list[tuple[StreamEntry[common_pb2.PromptJob], list[int]]]] = {}
        done: list[str] = []
        for entry in entries:
            job = entry.message
            if not job.group_id or job.group_size < 1 or not job.task.prompt:
                self._dead_letter(
                    entry, f"prompt job {entry.id} needs group_id, group_size >= 1 and task.prompt"
                )
                continue
            written = self._written_indices(job.group_id, job.group_size)
            missing = [i for i in range(job.group_size) if i not in written]
            if missing:
                by_count.setdefault(len(missing), []).append((entry, missing))
            else:
                done.append(entry.id)
        self._ack(done)
        return sum(self._sample_and_write(plans) for plans in by_count.values())

    def _sample_and_write(
        self, plans: list[tuple[StreamEntry[common_pb2.PromptJob], list[int]]]
    ) -> int:
        """One generate call for jobs missing the same number n of rollouts; write; ack."""
        jobs = [entry.message for entry, _ in plans]
        n = len(plans[0][1])
        started, t0 = time.time(), time.perf_counter()
        key = ",".join(f"{job.group_id}/{job.group_size - n}" for job in jobs)
        try:
            results = self._backend.generate(
                [j.task.prompt for j in jobs], n, self._sampling_for(key)
            )
        except InvalidArgumentError as exc:
            if len(plans) == 1:
                self._dead_letter(plans[0][0], str(exc))
                return 0
            return sum(self._sample_and_write([plan]) for plan in plans)  # isolate the bad one
        generation_s = time.perf_counter() - t0
        GENERATE_SECONDS.observe(generation_s)
        count = 0
        for (entry, missing), result in zip(plans, results, strict=True):
            job = entry.message
            for index, completion in zip(missing, result.completions, strict=True):
                rollout = common_pb2.Rollout(
                    group_id=job.group_id,
                    index=index,
                    group_size=job.group_size,
                    prompt_id=job.task.id,
                    task=job.task,
                    prompt_token_ids=result.prompt_token_ids,
                    completion=completion.to_proto(),
                    timings=common_pb2.RolloutTimings(
                        started_unix_s=started,
                        generation_s=generation_s,
                        produced_unix_s=time.time(),
                    ),
                    round=job.round,
                )
                new_id = self._streams.produce(
                    self._names.rollouts, rollout, dedup_key=rollout_dedup_key(job.group_id, index)
                )
                if new_id is not None:
                    count += 1
                    self.rollouts_written += 1
                    ROLLOUTS_WRITTEN.inc()
                    GENERATED_TOKENS.inc(len(completion.token_ids))
                if self._hook is not None:
                    self._hook(rollout)
            self._ack([entry.id])  # all G of this group now exist
        return count

    def _ack(self, ids: list[str]) -> None:
        if ids:
            self.jobs.ack(ids)
            self.groups_done += len(ids)
            GROUPS_DONE.inc(len(ids))

    def _dead_letter(self, entry: StreamEntry[common_pb2.PromptJob], reason: str) -> None:
        log.error(
            "invalid prompt job moved to dead letters",
            extra={"entry_id": entry.id, "reason": reason},
        )
        DEAD_JOBS.inc()
        self.jobs.dead_letter(entry, reason)
