"""The rollout worker: turns ``PromptJob`` entries of the prompts stream into groups of rollouts.

Each iteration takes up to ``prompts_per_call`` jobs (waiting up to ``fill_wait_ms`` for a
call to fill) and samples their groups together: one ``generate_many`` call with one request
per job (n = the group's missing rollouts, P x G rows for P fresh jobs), at most
``max_rows_per_call`` rows per call (a larger group is split over consecutive calls). It
writes one ``Rollout`` per completion to the rollouts stream (DESIGN.md, "Data flow").
Guarantees:

- **No duplicate index.** Each rollout is written with the dedup key ``<group_id>:<index>``
  (``Streams.produce``'s atomic marker), so a replay never writes an index twice.
- **No lost index.** A prompt entry is acknowledged only after all G rollouts of its group
  are written (jobs of one call are acknowledged one by one as each group completes). A
  worker killed mid-call leaves the unfinished entries pending; a worker that reclaims one
  (XAUTOCLAIM after ``reclaim_idle_ms``, or its own pending entries at restart) checks which
  indices already have markers and samples only the missing ones, possibly in a call with
  fresh jobs.
- **Per-group sampling.** Every job's request has its own seed, derived from the configured
  seed, the group id and the indices it samples (``derived_seed``), so a group's samples do
  not depend on which jobs share its call or on ``prompts_per_call``.
- **Backpressure.** While the rollouts stream's lag for the downstream consumer group
  (undelivered + unacknowledged entries) is at or above ``max_rollout_lag``, no new job is
  taken.
- **Policy versions.** Before each iteration the worker reads the ``PolicyWeights`` under
  ``StreamNames.policy_key``; a newer version is loaded in place (``load_weights``, never in
  the middle of a call) and every rollout records the version that sampled it.

A job the backend rejects as invalid (e.g. a prompt longer than the context) is moved to
``<prompts>:dead`` with the reason and acknowledged (its call mates are retried one by one);
any other failure leaves the entries pending for a retry by reclaim.

The loop follows the one stream-consumer protocol (``grpo.services.runtime.streams.StreamConsumer``:
reclaim -> consume -> write rollouts -> acknowledge) and its crash policy
(``ConsumerLoop``): a Redis outage is ridden out with backoff for ``redis_outage_s`` seconds,
after which the worker reports dead and its supervisor restarts it.

Prometheus metrics: ``grpo_rollouts_written_total``, ``grpo_generated_tokens_total``,
``grpo_prompt_jobs_done_total``, ``grpo_prompt_jobs_dead_total``,
``grpo_worker_policy_version``, ``grpo_worker_generate_seconds`` (wall time of one
``generate_many`` call), ``grpo_worker_prompts_per_call`` (requests in one call).
"""

from __future__ import annotations

import logging
import os
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import redis
from prometheus_client import Counter, Gauge, Histogram
from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import InvalidArgumentError
from grpo.integrity import DamagedError, NoDigestsError, check_digests
from grpo.services.generation.backend import (
    GenerationBackend,
    SampleRequest,
    SamplingConfig,
    derived_seed,
)
from grpo.services.runtime.policy import read_policy
from grpo.services.runtime.streams import (
    ConsumerLoop,
    Outage,
    StreamConsumer,
    StreamEntry,
    StreamNames,
    Streams,
)
from grpo.v1 import common_pb2

if TYPE_CHECKING:
    from grpo.services.runtime.weights.puller import BackgroundPuller

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
PROMPTS_PER_CALL = Histogram(
    "grpo_worker_prompts_per_call",
    "Prompt jobs (requests) sampled together in one generate call.",
    buckets=(1, 2, 4, 8, 16, 32, 64),
)


def rollout_dedup_key(group_id: str, index: int) -> str:
    """Dedup key of rollout ``index`` of group ``group_id`` on the rollouts stream."""
    return f"{group_id}:{index}"


@dataclass(frozen=True)
class _Piece:
    """Missing rollout ``indices`` of one job sampled as one request; ``last``: the job's
    final piece (its entry is acknowledged after it)."""

    entry: StreamEntry[common_pb2.PromptJob]
    indices: list[int]
    last: bool


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
        description="Sampling parameters of every job; a non-zero seed is mixed with each "
        "group id (and the indices sampled) into a seed per job.",
    )
    reclaim_idle_ms: int = Field(
        default=60_000,
        ge=1,
        description="Take over prompt entries pending this long (their worker died); keep it "
        "well above the time one group takes to generate.",
    )
    prompts_per_call: int = Field(
        default=8,
        ge=1,
        description="Prompt jobs sampled together in one generate call (P x G rows); on the "
        "2-core development machine 8 gave ~3x the rollout tokens per CPU-second of 1 at G = 8 "
        "(python -m bench generation). Keep generation.prompts_ahead >= this so a call can "
        "fill (2x also queues the next call's jobs, for staler groups).",
    )
    max_rows_per_call: int = Field(
        default=64,
        ge=1,
        description="Most rows (completions) in one generate call; jobs beyond it wait for the "
        "next call and a group larger than it is split over several calls.",
    )
    fill_wait_ms: int = Field(
        default=100,
        ge=0,
        description="After the first job of a call arrives, wait up to this long (ms) for more "
        "jobs to fill prompts_per_call; 0 = take what is there.",
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
        self.calls = 0
        self._damaged: set[int] = set()  # published versions that failed their digests

    # ---- one iteration ------------------------------------------------------------------

    def reconnected(self) -> None:
        """After a Redis outage: take back this worker's pending jobs at once (a Redis
        restarted from its append-only file may have lost their acks; the dedup markers leave
        only missing indices to sample)."""
        self.jobs.retake_own()

    def run_once(self) -> int:
        """Reload weights if a newer version is published, then take up to
        ``prompts_per_call`` jobs (reclaimed ones first, waiting up to ``fill_wait_ms`` for
        the call to fill) and sample them in batched calls.

        Returns:
            Rollouts written in this call (0 when held back or nothing arrived).
        """
        cfg = self._config
        self.maybe_reload_weights()
        if self._streams.lag(self._names.rollouts, cfg.downstream_group) >= cfg.max_rollout_lag:
            self._stop.wait(cfg.idle_sleep_s)
            return 0
        return self.process(self._take_jobs())

    def _take_jobs(self) -> list[StreamEntry[common_pb2.PromptJob]]:
        """Up to ``prompts_per_call`` entries: what the first read returns, then more reads
        until the call is full (jobs or rows) or ``fill_wait_ms`` has passed since it."""
        cfg = self._config
        entries = self.jobs.poll(cfg.prompts_per_call, cfg.block_ms)
        if not entries or cfg.fill_wait_ms == 0:
            return entries
        deadline = time.monotonic() + cfg.fill_wait_ms / 1000
        while len(entries) < cfg.prompts_per_call and not self._stop.is_set():
            rows = sum(max(1, e.message.group_size) for e in entries)
            left_ms = int((deadline - time.monotonic()) * 1000)
            if rows >= cfg.max_rows_per_call or left_ms <= 0:
                break
            # each read waits at most block_ms (checked against the Redis reply timeout):
            # a long fill wait is several reads, never one read past the reply timeout
            read_ms = min(left_ms, cfg.block_ms)
            entries += self.jobs.poll(cfg.prompts_per_call - len(entries), read_ms)
        return entries

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

        Shared volume: the announced path itself once its files match their digests
        (``grpo.integrity``; a damaged version is never loaded). gRPC: a finished, verified
        pull newer than
        the loaded version; otherwise a background pull of the announced version is started
        (if none is in flight) and None is returned without waiting.
        """
        if self._puller is None:
            version = int(weights.policy_version)
            if version in self._damaged:
                return None
            try:
                check_digests(Path(weights.path))
            except NoDigestsError:
                pass  # published before digests existed: trusted as before
            except DamagedError as exc:
                # One clear line per damaged version; generation goes on with the loaded
                # weights until the learner publishes a newer version.
                self._damaged.add(version)
                log.error(
                    "published weights v%d are damaged (%s); not loaded, generating with v%d",
                    version, exc, self._backend.policy_version,
                    extra={"weights_damaged": version},
                )  # fmt: skip
                return None
            return version, weights.path
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

    def _sampling_for(self, group_id: str, indices: list[int]) -> SamplingConfig:
        """The configured sampling with, when its seed is non-zero, a seed of this request's
        own: derived from the seed, the group id and the indices sampled, so every group (and
        every retry of missing indices) draws fresh samples whatever shares its call."""
        sampling = self._config.sampling
        if not sampling.seed:
            return sampling
        key = f"{group_id}/{indices[0]}+{len(indices)}"
        return sampling.model_copy(update={"seed": derived_seed(sampling.seed, key)})

    def process(self, entries: list[StreamEntry[common_pb2.PromptJob]]) -> int:
        """Write the missing rollouts of each job's group, then acknowledge each job.

        The jobs' missing rollouts are sampled in as few ``generate_many`` calls as
        ``prompts_per_call`` and ``max_rows_per_call`` allow (one request per job and call, in
        entry order). A job is acknowledged once all its G rollouts exist. A job the backend
        rejects (InvalidArgumentError) is dead-lettered; the others proceed.

        Returns:
            Rollouts written now (0 if every index already existed).
        """
        pieces: list[_Piece] = []
        done: list[str] = []
        limit = self._config.max_rows_per_call
        for entry in entries:
            job = entry.message
            if not job.group_id or job.group_size < 1 or not job.task.prompt:
                self._dead_letter(
                    entry, f"prompt job {entry.id} needs group_id, group_size >= 1 and task.prompt"
                )
                continue
            written = self._written_indices(job.group_id, job.group_size)
            missing = [i for i in range(job.group_size) if i not in written]
            if not missing:
                done.append(entry.id)
                continue
            for start in range(0, len(missing), limit):  # a group above the bound is split
                chunk = missing[start : start + limit]
                pieces.append(_Piece(entry, chunk, last=start + limit >= len(missing)))
        self._ack(done)
        dead: set[str] = set()
        return sum(self._sample_and_write(call, dead) for call in self._calls(pieces))

    def _calls(self, pieces: list[_Piece]) -> list[list[_Piece]]:
        """``pieces`` in order, cut into calls of at most ``prompts_per_call`` requests and
        ``max_rows_per_call`` rows."""
        cfg = self._config
        calls: list[list[_Piece]] = []
        rows = 0
        for piece in pieces:
            if (
                not calls
                or len(calls[-1]) >= cfg.prompts_per_call
                or rows + len(piece.indices) > cfg.max_rows_per_call
            ):
                calls.append([])
                rows = 0
            calls[-1].append(piece)
            rows += len(piece.indices)
        return calls

    def _sample_and_write(self, call: list[_Piece], dead: set[str]) -> int:
        """One ``generate_many`` call for ``call``'s pieces; write their rollouts; acknowledge
        each job whose last piece this is. Entries in ``dead`` (dead-lettered earlier in this
        iteration) are skipped; a rejected call is retried piece by piece to isolate the bad
        job."""
        call = [piece for piece in call if piece.entry.id not in dead]
        if not call:
            return 0
        requests = [
            SampleRequest(
                p.entry.message.task.prompt,
                len(p.indices),
                self._sampling_for(p.entry.message.group_id, p.indices),
            )
            for p in call
        ]
        started, t0 = time.time(), time.perf_counter()
        try:
            results = self._backend.generate_many(requests)
        except InvalidArgumentError as exc:
            if len(call) == 1:
                dead.add(call[0].entry.id)
                self._dead_letter(call[0].entry, str(exc))
                return 0
            return sum(self._sample_and_write([piece], dead) for piece in call)
        generation_s = time.perf_counter() - t0
        GENERATE_SECONDS.observe(generation_s)
        PROMPTS_PER_CALL.observe(len(call))
        self.calls += 1
        count = 0
        for piece, result in zip(call, results, strict=True):
            job = piece.entry.message
            for index, completion in zip(piece.indices, result.completions, strict=True):
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
            if piece.last:
                self._ack([piece.entry.id])  # all G of this group now exist
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
