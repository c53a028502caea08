"""The Assembler service: the rollouts-stream consumer, the Assembler gRPC servicer and SERVICE.

``grpo serve assembler --config FILE`` builds, from :class:`AssemblerSettings`:

- :class:`AssemblerWorker`, a background thread that reads the rollouts stream in a consumer
  group, hands batches to :class:`~grpo.services.assembler.assembler.Assembler`, and
  acknowledges them only after ``submit`` returned (member writes and closes durable in Redis);
  every ``reclaim_every_s`` it takes over entries left pending by a dead consumer (XAUTOCLAIM)
  and every ``sweep_interval_s`` it closes groups whose deadline passed;
- the servicer: ``SubmitRollouts`` (same path as the stream, idempotent per (group id, index))
  and ``GetStats`` (counters kept in Redis, so a restarted assembler keeps them).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.assembler.assembler import Assembler
from grpo.services.assembler.config import AssemblerConfig
from grpo.services.assembler.sampling import GroupVerdict
from grpo.services.assembler.stats import stats_from_counters
from grpo.services.assembler.store import GroupStore
from grpo.services.assembler.verifier_client import VerifierClient
from grpo.services.discovery import DiscoverySettings, discovery_worker
from grpo.errors import ContractError
from grpo.services.redis_server import connect
from grpo.services.registry import BackgroundWorker, LoopWorker, ServiceParts, ServiceSpec
from grpo.services.routing import RouteConfig, RoutingTable
from grpo.services.server import ServerSettings, ServiceBinding
from grpo.services.streams import StreamNames, Streams
from grpo.v1 import assembler_pb2, assembler_pb2_grpc, common_pb2

__all__ = [
    "SERVICE",
    "AssemblerServicer",
    "AssemblerSettings",
    "AssemblerWorker",
    "StreamGroupSink",
    "build_assembler",
]

log = logging.getLogger(__name__)


class AssemblerSettings(BaseModel):
    """Settings of ``grpo serve assembler`` (YAML < GRPO_* environment < CLI flags)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server settings."
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0", description="Redis holding the streams and state."
    )
    namespace: str = Field(
        default="grpo", min_length=1, description="Run namespace of stream and key names."
    )
    routing: dict[str, RouteConfig] = Field(
        default_factory=dict,
        description="Task type -> {outcome: [host:port], process: [host:port]} verifiers.",
    )
    assembler: AssemblerConfig = Field(
        default_factory=AssemblerConfig, description="Group assembly and dynamic sampling."
    )
    consumer_name: str = Field(
        default="",
        description="Consumer name in the rollouts consumer group; '' = hostname-pid.",
    )
    reclaim_every_s: float = Field(
        default=5.0, gt=0, description="How often pending entries of dead consumers are reclaimed."
    )
    group_log: Path | None = Field(
        default=None,
        description="JSONL file receiving one line per closed group (verdict, rewards); none if "
        "unset.",
    )
    discovery: DiscoverySettings = Field(
        default_factory=DiscoverySettings,
        description="Kubernetes verifier discovery: routes labelled verifier Services on top of "
        "the static routing table, updated without restarts (off outside Kubernetes).",
    )


class StreamGroupSink:
    """Writes accepted groups and regeneration jobs to Redis streams, idempotently."""

    def __init__(self, streams: Streams, names: StreamNames) -> None:
        """Args: streams: the stream client; names: the run's stream names."""
        self._streams = streams
        self._names = names

    def write_group(self, group: common_pb2.Group) -> None:
        """XADD the group to the groups stream with dedup key = group id."""
        self._streams.produce(self._names.groups, group, dedup_key=group.group_id)

    def write_regeneration(self, job: common_pb2.PromptJob) -> None:
        """XADD the job to the prompts stream with dedup key = its group id."""
        self._streams.produce(self._names.prompts, job, dedup_key=job.group_id)


class _GroupLog:
    """Appends one JSON line per closed group (thread-safe)."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._path = path
        self._lock = threading.Lock()

    def __call__(self, group: common_pb2.Group, verdict: GroupVerdict) -> None:
        line = {
            "group_id": group.group_id,
            "prompt_id": group.prompt_id,
            "round": group.round,
            "verdict": verdict.value,
            "status": common_pb2.GroupStatus.Name(group.status),
            "members": len(group.members),
            "rewards": [None if m.missing else m.outcome.reward for m in group.members],
            "tokens": sum(len(m.rollout.completion.token_ids) for m in group.members),
            "straggler_wait_s": round(group.straggler_wait_s, 4),
            "closed_unix_s": group.closed_unix_s,
        }
        with self._lock, self._path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")


class AssemblerWorker(LoopWorker):
    """Background consumer of the rollouts stream (see the module docstring)."""

    thread_name = "assembler-worker"

    def __init__(
        self,
        assembler: Assembler,
        streams: Streams,
        names: StreamNames,
        config: AssemblerConfig,
        *,
        consumer: str,
        reclaim_every_s: float = 5.0,
    ) -> None:
        """Args: assembler: the domain object; streams/names: Redis streams; config: batch
        and timing settings; consumer: this consumer's name; reclaim_every_s: reclaim period."""
        self._assembler = assembler
        self._streams = streams
        self._names = names
        self._config = config
        self._consumer = consumer
        self._reclaim_every_s = reclaim_every_s
        super().__init__()
        self._next_sweep = 0.0
        self._next_reclaim = 0.0

    def start(self) -> None:
        """Create the consumer group if needed and start the loop thread."""
        self._streams.ensure_group(self._names.rollouts, self._config.consumer_group)
        super().start()

    def run_once(self) -> int:
        """One iteration: reclaim (when due), read a batch, submit, ack, sweep (when due).

        Returns:
            Number of stream entries processed.
        """
        cfg = self._config
        now = time.monotonic()
        entries = []
        if now >= self._next_reclaim:
            self._next_reclaim = now + self._reclaim_every_s
            entries += self._streams.reclaim(
                self._names.rollouts,
                cfg.consumer_group,
                self._consumer,
                common_pb2.Rollout,
                cfg.reclaim_idle_ms,
                cfg.consume_count,
            )
        if not entries:
            entries = self._streams.consume(
                self._names.rollouts,
                cfg.consumer_group,
                self._consumer,
                common_pb2.Rollout,
                cfg.consume_count,
                cfg.block_ms,
            )
        if entries:
            self._submit([e.message for e in entries])
            self._streams.ack(self._names.rollouts, cfg.consumer_group, [e.id for e in entries])
        if time.monotonic() >= self._next_sweep:
            self._next_sweep = time.monotonic() + cfg.sweep_interval_s
            self._assembler.sweep()
        return len(entries)

    def _submit(self, rollouts: list[Any]) -> None:
        try:
            self._assembler.submit(rollouts)
        except ContractError:
            # One malformed rollout must not block the others: submit one by one and drop
            # (log) the offenders, which can never become valid by retrying.
            for rollout in rollouts:
                try:
                    self._assembler.submit([rollout])
                except ContractError as exc:
                    log.error("dropping malformed rollout: %s", exc)


class AssemblerServicer(assembler_pb2_grpc.AssemblerServicer):
    """Thin adapter: SubmitRollouts -> Assembler.submit; GetStats -> the Redis counters."""

    def __init__(self, assembler: Assembler) -> None:
        """Args: assembler: the domain object shared with the stream worker."""
        self._assembler = assembler

    def SubmitRollouts(
        self, request: assembler_pb2.SubmitRolloutsRequest, context: Any
    ) -> assembler_pb2.SubmitRolloutsResponse:
        """Record rollouts (idempotent per (group id, index)); INVALID_ARGUMENT if malformed."""
        result = self._assembler.submit(list(request.rollouts))
        return assembler_pb2.SubmitRolloutsResponse(
            accepted=result.accepted, duplicates=result.duplicates
        )

    def GetStats(
        self, request: assembler_pb2.GetStatsRequest, context: Any
    ) -> assembler_pb2.GetStatsResponse:
        """Counters since the run's state was created (they survive assembler restarts)."""
        store = self._assembler.store
        return assembler_pb2.GetStatsResponse(
            stats=stats_from_counters(store.counters(), store.pending())
        )


def routing_table(settings: AssemblerSettings) -> RoutingTable:
    """The static routing table of ``settings`` (discovery, when enabled, updates it live).

    Raises:
        InvalidArgumentError: a malformed routing table.
    """
    return RoutingTable.from_config({k: v.model_dump() for k, v in settings.routing.items()})


def build_assembler(
    settings: AssemblerSettings, client: Any, *, scorer: Any = None
) -> tuple[Assembler, Streams, StreamNames, VerifierClient | None]:
    """Wire an Assembler from settings and a redis-py client.

    Args:
        settings: the service settings.
        client: redis-py client (binary responses).
        scorer: replaces the gRPC VerifierClient (tests); None builds one from ``routing``.

    Returns:
        (assembler, streams, stream names, the verifier client it built or None).

    Raises:
        InvalidArgumentError: a malformed routing table.
    """
    names = StreamNames(settings.namespace)
    streams = Streams(client)
    store = GroupStore(
        client, settings.namespace, group_deadline_s=settings.assembler.group_deadline_s
    )
    client_obj = None
    if scorer is None:
        scorer = client_obj = VerifierClient(routing_table(settings), settings.assembler.verifier)
    on_close = _GroupLog(settings.group_log) if settings.group_log is not None else None
    assembler = Assembler(
        store, scorer, StreamGroupSink(streams, names), settings.assembler, on_close=on_close
    )
    return assembler, streams, names, client_obj


def _build(settings: AssemblerSettings) -> ServiceParts:
    client = connect(settings.redis_url)
    assembler, streams, names, verifier = build_assembler(settings, client)
    consumer = settings.consumer_name or f"{socket.gethostname()}-{os.getpid()}"
    worker = AssemblerWorker(
        assembler,
        streams,
        names,
        settings.assembler,
        consumer=consumer,
        reclaim_every_s=settings.reclaim_every_s,
    )
    workers: list[BackgroundWorker] = [worker]
    if verifier is not None:
        watcher = discovery_worker(verifier.routing, settings.discovery)
        if watcher is not None:
            workers.append(watcher)
    binding = ServiceBinding(
        name="grpo.v1.Assembler",
        add_to_server=assembler_pb2_grpc.add_AssemblerServicer_to_server,
        servicer=AssemblerServicer(assembler),
    )

    def close() -> None:
        if verifier is not None:
            verifier.close()
        client.close()

    return ServiceParts(bindings=[binding], workers=workers, close=close)


SERVICE = ServiceSpec(name="assembler", settings_cls=AssemblerSettings, build=_build)
