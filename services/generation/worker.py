"""The rollout worker: turns ``PromptJob`` entries of the prompts stream into groups of rollouts.

For each job it samples the group's G completions with one ``generate(n=G)`` call and writes
one ``Rollout`` per completion to the rollouts stream (DESIGN.md, "Data flow"). Guarantees:

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
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
import threading
import time
from collections.abc import Callable

import redis
from pydantic import BaseModel, ConfigDict, Field

from grpo.services.errors import InvalidArgumentError
from grpo.services.generation.backend import GenerationBackend, SamplingConfig
from grpo.services.streams import StreamEntry, StreamNames, Streams
from grpo.v1 import common_pb2

__all__ = ["RolloutWorker", "RolloutWorkerConfig", "rollout_dedup_key"]

log = logging.getLogger(__name__)


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
    block_ms: int = Field(default=500, ge=1, description="How long one stream read waits (ms).")
    idle_sleep_s: float = Field(
        default=0.05, gt=0, description="Pause while held back by backpressure (seconds)."
    )
    error_backoff_s: float = Field(
        default=1.0, gt=0, description="Pause after an unexpected error before retrying (seconds)."
    )


class RolloutWorker:
    """Consumes prompt jobs and produces groups of rollouts; a ``BackgroundWorker``."""

    def __init__(
        self,
        client: redis.Redis,
        backend: GenerationBackend,
        config: RolloutWorkerConfig,
        *,
        on_rollout_written: Callable[[common_pb2.Rollout], None] | None = None,
    ) -> None:
        """Wrap a Redis client (``decode_responses=False``) and a backend.

        Args:
            on_rollout_written: hook called after each rollout is durable (tests inject faults
                here; metrics may count).
        """
        self._client = client
        self._streams = Streams(client)
        self._names = StreamNames(config.namespace)
        self._backend = backend
        self._config = config
        self._hook = on_rollout_written
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._group_ready = False
        self.groups_done = 0
        self.rollouts_written = 0

    # ---- BackgroundWorker ---------------------------------------------------------------

    def start(self) -> None:
        """Run the loop in a daemon thread."""
        self._stop.clear()
        self._thread = threading.Thread(target=self._loop, name="rollout-worker", daemon=True)
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        """Ask the loop to stop after the current group and join it within ``timeout_s``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_once()
            except Exception:
                log.exception("rollout worker iteration failed; retrying")
                self._stop.wait(self._config.error_backoff_s)

    # ---- one iteration ------------------------------------------------------------------

    def run_once(self) -> int:
        """Reload weights if a newer version is published, then process at most one job.

        Returns:
            Rollouts written in this call (0 when held back or nothing arrived).
        """
        names, cfg = self._names, self._config
        if not self._group_ready:
            self._streams.ensure_group(names.prompts, cfg.consumer_group)
            self._group_ready = True
        self.maybe_reload_weights()
        if self._streams.lag(names.rollouts, cfg.downstream_group) >= cfg.max_rollout_lag:
            self._stop.wait(cfg.idle_sleep_s)
            return 0
        entries = self._streams.reclaim(
            names.prompts, cfg.consumer_group, cfg.consumer, common_pb2.PromptJob,
            cfg.reclaim_idle_ms, count=1,
        )  # fmt: skip
        if not entries:
            entries = self._streams.consume(
                names.prompts, cfg.consumer_group, cfg.consumer, common_pb2.PromptJob,
                count=1, block_ms=cfg.block_ms,
            )  # fmt: skip
        return sum(self.process(entry) for entry in entries)

    def maybe_reload_weights(self) -> bool:
        """Load the published policy if its version is newer than the backend's.

        Returns:
            True if weights were loaded.
        """
        raw = self._client.get(self._names.policy_key)
        if raw is None:
            return False
        weights = common_pb2.PolicyWeights.FromString(raw)  # type: ignore[arg-type]
        if weights.policy_version <= self._backend.policy_version:
            return False
        load_s = self._backend.load_weights(weights.policy_version, weights.path)
        log.info(
            "policy weights loaded",
            extra={"policy_version": weights.policy_version, "load_s": round(load_s, 3)},
        )
        return True

    def _written_indices(self, group_id: str, group_size: int) -> set[int]:
        pipe = self._client.pipeline(transaction=False)
        for i in range(group_size):
            pipe.exists(
                self._streams.dedup_marker(self._names.rollouts, rollout_dedup_key(group_id, i))
            )
        return {i for i, found in enumerate(pipe.execute()) if found}

    def _sampling_for(self, group_id: str, attempt: int) -> SamplingConfig:
        seed = self._config.sampling.seed
        if not seed:
            return self._config.sampling
        digest = hashlib.sha256(f"{seed}:{group_id}:{attempt}".encode()).digest()
        return self._config.sampling.model_copy(
            update={"seed": int.from_bytes(digest[:7], "big") or 1}
        )

    def process(self, entry: StreamEntry[common_pb2.PromptJob]) -> int:
        """Write the missing rollouts of one job's group, then acknowledge the job.

        Returns:
            Rollouts written now (0 if all G already existed).
        """
        job, cfg, names = entry.message, self._config, self._names
        try:
            if not job.group_id or job.group_size < 1 or not job.task.prompt:
                raise InvalidArgumentError(
                    f"prompt job {entry.id} needs group_id, group_size >= 1 and task.prompt"
                )
            written = self._written_indices(job.group_id, job.group_size)
            missing = [i for i in range(job.group_size) if i not in written]
            count = 0
            if missing:
                started = time.time()
                t0 = time.perf_counter()
                sampling = self._sampling_for(job.group_id, len(written))
                result = self._backend.generate([job.task.prompt], len(missing), sampling)[0]
                generation_s = time.perf_counter() - t0
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
                        names.rollouts, rollout, dedup_key=rollout_dedup_key(job.group_id, index)
                    )
                    if new_id is not None:
                        count += 1
                        self.rollouts_written += 1
                    if self._hook is not None:
                        self._hook(rollout)
        except InvalidArgumentError as exc:
            log.error("invalid prompt job moved to dead letters", extra={"entry_id": entry.id})
            pipe = self._client.pipeline(transaction=True)
            pipe.xadd(
                f"{names.prompts}:dead",
                {b"pb": job.SerializeToString(), b"_source_id": entry.id, b"_reason": str(exc)},
            )
            pipe.xack(names.prompts, cfg.consumer_group, entry.id)
            pipe.execute()
            return 0
        self._streams.ack(names.prompts, cfg.consumer_group, [entry.id])
        self.groups_done += 1
        return count
