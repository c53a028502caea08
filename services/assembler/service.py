"""The Assembler service: the rollouts-stream consumer, the Assembler gRPC servicer and SERVICE.

``grpo serve assembler --config FILE`` builds, from :class:`AssemblerSettings`:

- :class:`AssemblerWorker`, a background thread that follows the one stream-consumer
  protocol (``grpo.services.runtime.streams.StreamConsumer``): it takes back its own pending entries
  after a restart, every ``reclaim_every_s`` takes over entries a dead consumer left pending
  (XAUTOCLAIM), reads new ones, hands them to
  :class:`~grpo.services.assembler.assembler.Assembler` and acknowledges them only after
  ``submit`` returned (member writes and closes durable in Redis). Before its first read it
  waits until every routed verifier answers health SERVING. Rollouts whose verifier is
  unavailable are *held*: unacknowledged, retried with backoff, and no new rollout is read
  meanwhile (the rollouts stream's lag grows and holds generation back), until the verifier
  outage lasts longer than ``assembler.verifier.outage_budget_s``; only then are their rewards
  marked missing. A Redis outage is ridden out for ``redis_outage_s`` (then the process
  reports dead and is restarted);
- a sweeper thread closing groups whose deadline passed every ``sweep_interval_s``, also while
  a verifier call is in flight, but never a group whose members are in that call; it pauses
  while the call has run past one attempt's deadline (a stall) or a verifier outage is
  declared, and afterwards every open deadline moves on by the stall or outage, so the
  verifiers' trouble never closes groups short; a stall that ends in an answer counts as
  verifier outage;
- the servicer: ``SubmitRollouts`` (same path as the stream, idempotent per (group id, index))
  and ``GetStats`` (counters kept in Redis, so a restarted assembler keeps them, plus this
  process's live values: rollouts held, outage seconds).

Every closed group, accepted or rejected, is also appended to the closed-groups stream
(:class:`ClosedGroupStream`, ``StreamNames.closed``) for the run driver's prompt curriculum.

At start the assembler checks its routes as ``grpo run`` checks a run's verifiers
(:class:`RouteCheck`, ``grpo.services.settings.verifiers.check_routes``): every routed
address's ``Describe``, bounded, each declaring the kind and accepting the task type of its
routes. Until that passes, health is NOT_SERVING with the reason (``service not ready ...:
verifier routes: routing.math.outcome: verifier ...: Describe failed (UNAVAILABLE) ...``; on
Kubernetes: the pod stays unready, the reason in its log); it is tried again every
``route_recheck_s`` and whenever discovery changes the table. The first try runs before the
server starts, so a release whose verifiers are up is ready at once.
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

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import ContractError, GrpoError
from grpo.services.assembler.assembler import Assembler
from grpo.services.assembler.sampling import GroupVerdict
from grpo.services.assembler.store import GroupStore
from grpo.services.runtime.accounting import stats_from_counters
from grpo.services.runtime.channels import CHECK_TIMEOUT_S
from grpo.services.runtime.discovery import DiscoverySettings, discovery_worker
from grpo.services.runtime.redis_server import (
    check_block_below_reply,
    connect,
    resolve_redis_url,
)
from grpo.services.runtime.registry import BackgroundWorker, ServiceParts, ServiceSpec
from grpo.services.runtime.routing import RouteConfig, RoutingTable
from grpo.services.runtime.score_status import member_reward
from grpo.services.runtime.server import ServerSettings, ServiceBinding
from grpo.services.runtime.streams import (
    REDIS_ERRORS,
    ConsumerLoop,
    Outage,
    OutageBudgetExceededError,
    StreamConsumer,
    StreamEntry,
    StreamNames,
    Streams,
)
from grpo.services.runtime.verifier_client import VerifierClient, VerifierClientConfig
from grpo.services.settings.assembler import AssemblerConfig
from grpo.v1 import assembler_pb2, assembler_pb2_grpc, common_pb2

__all__ = [
    "SERVICE",
    "AssemblerServicer",
    "AssemblerSettings",
    "AssemblerWorker",
    "ClosedGroupStream",
    "RouteCheck",
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
    redis_url: str | None = Field(
        default=None,
        description="Redis holding the streams and state; None = $REDIS_URL (required one way "
        "or the other, grpo.services.runtime.redis_server.resolve_redis_url).",
    )
    namespace: str = Field(
        default="grpo", min_length=1, description="Run namespace of stream and key names."
    )
    routing: dict[str, RouteConfig] = Field(
        default_factory=dict,
        description="Task type -> {outcome: [host:port], process: [host:port]} verifiers, "
        "optionally with name, weight and rewards: [{name, weight, addresses}] (several "
        "weighted rewards; docs/add-a-verifier.md).",
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
    redis_outage_s: float = Field(
        default=120.0,
        gt=0,
        description="Longest Redis outage ridden out (reconnecting with backoff) before the "
        "assembler reports dead and is restarted (seconds).",
    )
    wait_for_verifiers_s: float = Field(
        default=300.0,
        ge=0,
        description="Before its first read, wait up to this long for every routed verifier "
        "to answer health SERVING (seconds; 0 = do not wait). After it, rollouts whose "
        "verifier is down are held (see assembler.verifier.outage_budget_s).",
    )
    check_routes: bool = Field(
        default=True,
        description="At start, call every routed verifier's Describe (bounded by 1.5 s) and "
        "check it declares the kind and accepts the task type of its routes; health stays "
        "NOT_SERVING with the reason until it passes (RouteCheck).",
    )
    route_recheck_s: float = Field(
        default=5.0,
        gt=0,
        description="While the route check fails, how often it is tried again (seconds); also "
        "how often a table changed by discovery is checked.",
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

    @model_validator(mode="after")
    def _check(self) -> AssemblerSettings:
        check_block_below_reply(
            self.assembler.block_ms, self.server.redis_reply_timeout_s, "assembler.block_ms"
        )
        return self


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


class ClosedGroupStream:
    """Appends every closed group (accepted or rejected) to ``StreamNames.closed``, members
    reduced to their index and outcome score, with dedup key = group id and metadata
    ``verdict`` and ``tokens``: what the run driver's prompt curriculum reads
    (``grpo.services.driver.curriculum``). A Redis error is logged and the record dropped:
    it is a statistic, never a reward, and the group itself is already durable."""

    def __init__(self, streams: Streams, names: StreamNames) -> None:
        """Args: streams: the stream client; names: the run's stream names."""
        self._streams = streams
        self._names = names

    def __call__(self, group: common_pb2.Group, verdict: GroupVerdict) -> None:
        slim = common_pb2.Group(
            group_id=group.group_id,
            prompt_id=group.prompt_id,
            group_size=group.group_size,
            status=group.status,
            round=group.round,
            opened_unix_s=group.opened_unix_s,
            closed_unix_s=group.closed_unix_s,
            straggler_wait_s=group.straggler_wait_s,
        )
        for m in group.members:
            slim.members.add(
                rollout=common_pb2.Rollout(index=m.rollout.index),
                outcome=m.outcome,
                missing=m.missing,
            )
        tokens = sum(len(m.rollout.completion.token_ids) for m in group.members)
        try:
            self._streams.produce(
                self._names.closed,
                slim,
                dedup_key=group.group_id,
                metadata={"verdict": verdict.value, "tokens": str(tokens)},
            )
        except REDIS_ERRORS as exc:
            log.warning("closed-group record of %s dropped: %s", group.group_id, exc)


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
            "rewards": [member_reward(m) for m in group.members],
            "tokens": sum(len(m.rollout.completion.token_ids) for m in group.members),
            "straggler_wait_s": round(group.straggler_wait_s, 4),
            "closed_unix_s": group.closed_unix_s,
        }
        with self._lock, self._path.open("a") as fh:
            fh.write(json.dumps(line) + "\n")


class AssemblerWorker(ConsumerLoop):
    """Background consumer of the rollouts stream, plus the deadline sweeper (module docstring)."""

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
        redis_outage_s: float = 120.0,
        verifiers_down: Any = None,
        wait_for_verifiers_s: float = 0.0,
    ) -> None:
        """Args:
        assembler: the domain object.
        streams, names: Redis streams and the run's names.
        config: batch, timing and verifier settings.
        consumer: this consumer's name (stable across restarts to take back its own entries).
        reclaim_every_s: period of reclaim scans for dead consumers' entries (seconds).
        redis_outage_s: Redis outage budget (seconds).
        verifiers_down: returns the routed verifier addresses not serving
            (``VerifierClient.ready``); None = do not wait.
        wait_for_verifiers_s: longest wait for them before the first read (seconds).
        """
        super().__init__(Outage(redis_outage_s, what="redis (assembler)"))
        self._assembler = assembler
        self._streams = streams
        self._names = names
        self._config = config
        self.rollouts = StreamConsumer(
            streams,
            names.rollouts,
            config.consumer_group,
            consumer,
            common_pb2.Rollout,
            reclaim_idle_ms=config.reclaim_idle_ms,
            reclaim_every_s=reclaim_every_s,
        )
        verifier = config.verifier
        self.verifier_outage = Outage(
            verifier.outage_budget_s,
            backoff_initial_s=max(verifier.backoff_initial_s, 0.05),
            backoff_max_s=max(verifier.backoff_max_s, verifier.backoff_initial_s, 0.05),
            what="verifiers",
        )
        self._verifiers_down = verifiers_down
        self._wait_for_verifiers_s = wait_for_verifiers_s
        self._waited_since: float | None = None
        self._ready = verifiers_down is None or wait_for_verifiers_s == 0
        self._held: list[StreamEntry[common_pb2.Rollout]] = []
        self._retry_at = 0.0
        self._sweeper: threading.Thread | None = None
        self._call_since: float | None = None  # monotonic start of the submit in progress
        self._in_flight: frozenset[str] = frozenset()  # its groups: never swept meanwhile

    @property
    def held(self) -> int:
        """Rollouts held unacknowledged while their verifier is unavailable."""
        return len(self._held)

    def start(self) -> None:
        """Create the consumer group if needed, start the sweeper and the loop thread."""
        self._streams.ensure_group(self._names.rollouts, self._config.consumer_group)
        super().start()
        self._sweeper = threading.Thread(target=self._sweep_loop, name="assembler-sweeper",
                                         daemon=True)  # fmt: skip
        self._sweeper.start()

    def stop(self, timeout_s: float) -> None:
        """Stop the loop and the sweeper; held rollouts stay pending (a restart takes them)."""
        super().stop(timeout_s)
        if self._sweeper is not None:
            self._sweeper.join(timeout_s)

    def _sweep_loop(self) -> None:
        while not self._stop.wait(self._config.sweep_interval_s):
            if self.verifier_outage.in_outage and self._held:
                continue  # our own outage must not close groups short
            if self.stalled_s() > 0:
                continue  # nor a verifier call past its deadline, being retried
            try:
                self._assembler.sweep(exclude=self._in_flight)
            except REDIS_ERRORS as exc:
                log.debug("sweep skipped, redis unreachable: %s", exc)
            except Exception:
                log.exception("sweep failed; retrying")

    def _wait_ready(self) -> bool:
        """True once every routed verifier serves (or the wait is over)."""
        now = time.monotonic()
        if self._waited_since is None:
            self._waited_since = now
        down = self._verifiers_down()
        if not down:
            self._ready = True
            return True
        if now - self._waited_since > self._wait_for_verifiers_s:
            log.warning("verifiers %s still not serving; consuming anyway (rollouts held)", down)
            self._ready = True
            return True
        self._stop.wait(0.5)
        return False

    def reconnected(self) -> None:
        """After a Redis outage: take back this consumer's pending rollouts at once (a Redis
        restarted from its append-only file may have lost their acks; already recorded ones
        are acknowledged without being counted again)."""
        self.rollouts.retake_own()

    def run_once(self) -> int:
        """One iteration: retry held rollouts (when due) or read a batch; submit; acknowledge.

        Returns:
            Number of stream entries acknowledged.
        """
        if not self._ready and not self._wait_ready():
            return 0
        cfg = self._config
        if self._held:
            pause = self._retry_at - time.monotonic()
            if pause > 0:
                self._stop.wait(min(pause, 0.5))
                return 0
            entries = self._held
        else:
            entries = self.rollouts.poll(cfg.consume_count, cfg.block_ms)
        if not entries:
            return 0
        self.rollouts.hold(e.id for e in entries)
        budget_left = True
        if self.verifier_outage.in_outage:
            try:
                self.verifier_outage.failed(_StillDown())
            except OutageBudgetExceededError:
                budget_left = False
        started = time.monotonic()
        self._in_flight = frozenset(e.message.group_id for e in entries)
        self._call_since = started
        try:
            held = self._submit(entries, hold_unavailable=budget_left)
        except BaseException:
            # Redis refused or dropped the records (an outage, out of memory): the entries are
            # no longer worked on, so a retry must be able to take them back (a held id is
            # never reclaimed nor retaken; left held, they would stay pending for good).
            self.rollouts.release(e.id for e in entries)
            self._held, self._in_flight = [], frozenset()
            raise
        finally:
            self._call_since = None
        done = [e.id for i, e in enumerate(entries) if i not in held]
        self.rollouts.ack(done)
        self._held = [entries[i] for i in sorted(held)]
        self._in_flight = frozenset(e.message.group_id for e in self._held)
        took = time.monotonic() - started
        if held:
            try:  # the outage began when this call did (its attempts timed out first)
                pause = self.verifier_outage.failed(_StillDown(), since=started)
            except OutageBudgetExceededError:
                pause = 0.0  # the next try records them as missing
            self._retry_at = time.monotonic() + pause
        else:
            length = self.verifier_outage.ok()
            if not length and took > self._config.verifier.timeout_s:
                length = self._stall(took)
            if length:
                self._assembler.store.add("verifier_outage_ms", int(length * 1000))
                self._assembler.store.postpone(length)
        return len(done)

    def stalled_s(self) -> float:
        """Seconds the verifier call in progress has run past one attempt's deadline
        (``verifier.timeout_s``: an attempt timed out and is being retried); 0.0 when none
        is: the sweeper pauses meanwhile."""
        since = self._call_since
        if since is None:
            return 0.0
        return max(0.0, time.monotonic() - since - self._config.verifier.timeout_s)

    def _stall(self, took: float) -> float:
        """A call that outlasted one attempt's deadline and then succeeded: the verifier
        stalled (stopped, swapped out, overloaded) for about that long. Logged as an outage
        of the verifiers (opened and closed at once, so ``grpo run`` sums it with the rest)
        and returned, to be counted like one."""
        log.warning(
            "verifiers stalled: a scoring call took %.1f s (> the %.1f s deadline of one "
            "attempt; retried), counted as verifier outage",
            took,
            self._config.verifier.timeout_s,
            extra={"outage_of": "verifiers", "outage": "closed", "outage_s": round(took, 3)},
        )
        return took

    def _submit(self, entries: list[StreamEntry[common_pb2.Rollout]], *,
                hold_unavailable: bool) -> set[int]:  # fmt: skip
        """Submit; returns the positions held (verifier unavailable)."""
        rollouts = [e.message for e in entries]
        try:
            return set(self._assembler.submit(rollouts, hold_unavailable=hold_unavailable).held)
        except ContractError:
            # One malformed rollout must not block the others: submit one by one and drop
            # (log) the offenders, which can never become valid by retrying.
            held: set[int] = set()
            for i, rollout in enumerate(rollouts):
                try:
                    result = self._assembler.submit([rollout], hold_unavailable=hold_unavailable)
                except ContractError as exc:
                    log.error("dropping malformed rollout: %s", exc)
                    continue
                if result.held:
                    held.add(i)
            return held


class _StillDown(Exception):
    """Marks one more failed try of a verifier outage (the reason was logged by the client)."""

    def __str__(self) -> str:
        return "verifier unavailable"


class AssemblerServicer(assembler_pb2_grpc.AssemblerServicer):
    """Thin adapter: SubmitRollouts -> Assembler.submit; GetStats -> the Redis counters."""

    def __init__(self, assembler: Assembler, worker: AssemblerWorker | None = None) -> None:
        """Args: assembler: the domain object shared with the stream worker; worker: the
        stream worker whose live values (held rollouts, outages) GetStats reports."""
        self._assembler = assembler
        self._worker = worker

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
        counters, pending = self._assembler.store.snapshot()  # one consistent read
        worker = self._worker
        return assembler_pb2.GetStatsResponse(
            stats=stats_from_counters(
                counters,
                pending,
                rollouts_held=worker.held if worker is not None else 0,
                verifier_outage_open_s=worker.verifier_outage.open_s if worker else 0.0,
                redis_outage_s=worker.outage.total_s if worker is not None else 0.0,
            ),
            verifiers=self._assembler.store.endpoint_stats(),
        )


class RouteCheck:
    """The assembler's readiness: its routes checked (module docstring).

    ``check_now`` runs ``check_routes`` on the table's current routes; ``reason`` (the
    service's ``readiness``) returns at once the last outcome: None once the routes passed,
    else ``verifier routes: <the one-line refusal>``. As a background worker it tries again
    every ``recheck_s`` while the check fails, and when the table's routes changed
    (discovery; a relist that changed nothing is not checked again).

    Args:
        routing: the table the verifier client scores with.
        client: the verifier client's settings (TLS, ``endpoint_tls``, message limits).
        recheck_s: seconds between tries.
        timeout_s: the bound of each ``Describe``.
        check: ``check_routes`` (injectable for tests; None = it, imported on use: the
            run config's models it sits beside load in ~0.3 s).
    """

    def __init__(
        self,
        routing: RoutingTable,
        client: VerifierClientConfig,
        *,
        recheck_s: float = 5.0,
        timeout_s: float = CHECK_TIMEOUT_S,
        check: Any = None,
    ) -> None:
        self._routing = routing
        self._client = client
        self._recheck_s = recheck_s
        self._timeout_s = timeout_s
        if check is None:
            from grpo.services.settings.verifiers import check_routes as check
        self._check = check
        self._reason: str | None = "verifier routes not checked yet"
        self._checked: dict[str, Any] | None = None  # the routes that passed
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def reason(self) -> str | None:
        """Why the assembler is not ready (None: its routes passed); returns at once."""
        return self._reason

    def check_now(self) -> str | None:
        """Check the current routes once; returns (and keeps) the reason, None when passed."""
        routes = self._routing.snapshot()
        try:
            answers = self._check(routes, self._client, timeout_s=self._timeout_s)
        except GrpoError as exc:
            self._reason = f"verifier routes: {exc}"
            return self._reason
        if self._reason is not None or routes != self._checked:
            log.info(
                "verifier routes checked",
                extra={"verifiers": {a: f"{i.name} {i.version}" for a, i in answers.items()}},
            )
        self._checked = routes
        self._reason = None
        return None

    def start(self) -> None:
        """Try again in a daemon thread while the check fails or the table changes."""
        self._thread = threading.Thread(target=self._loop, name="route-check", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._recheck_s):
            # a relist that changed nothing (discovery bumps the version anyway) is not checked
            if self._reason is not None or self._routing.snapshot() != self._checked:
                self.check_now()

    def stop(self, timeout_s: float) -> None:
        """Stop trying; joins within ``timeout_s``."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout_s)


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
    record = ClosedGroupStream(streams, names)
    group_log = _GroupLog(settings.group_log) if settings.group_log is not None else None

    def on_close(group: common_pb2.Group, verdict: GroupVerdict) -> None:
        record(group, verdict)
        if group_log is not None:
            group_log(group, verdict)

    assembler = Assembler(
        store, scorer, StreamGroupSink(streams, names), settings.assembler, on_close=on_close
    )
    return assembler, streams, names, client_obj


def _build(settings: AssemblerSettings) -> ServiceParts:
    url = resolve_redis_url(settings.redis_url, required_by="assembler")
    client = connect(str(url), read_timeout_s=settings.server.redis_reply_timeout_s)
    assembler, streams, names, verifier = build_assembler(settings, client)
    consumer = settings.consumer_name or f"{socket.gethostname()}-{os.getpid()}"
    worker = AssemblerWorker(
        assembler,
        streams,
        names,
        settings.assembler,
        consumer=consumer,
        reclaim_every_s=settings.reclaim_every_s,
        redis_outage_s=settings.redis_outage_s,
        verifiers_down=verifier.ready if verifier is not None else None,
        wait_for_verifiers_s=settings.wait_for_verifiers_s,
    )
    workers: list[BackgroundWorker] = [worker]
    route_check = None
    if verifier is not None:
        watcher = discovery_worker(verifier.routing, settings.discovery)
        if watcher is not None:
            workers.append(watcher)
        if settings.check_routes:
            route_check = RouteCheck(
                verifier.routing, settings.assembler.verifier,
                recheck_s=settings.route_recheck_s,
            )  # fmt: skip
            route_check.check_now()  # before the server starts: ready at once when it passes
            workers.append(route_check)
    binding = ServiceBinding(
        name="grpo.v1.Assembler",
        add_to_server=assembler_pb2_grpc.add_AssemblerServicer_to_server,
        servicer=AssemblerServicer(assembler, worker),
    )

    def close() -> None:
        if verifier is not None:
            verifier.close()
        client.close()

    return ServiceParts(
        bindings=[binding],
        workers=workers,
        close=close,
        readiness=route_check.reason if route_check is not None else None,
    )


SERVICE = ServiceSpec(name="assembler", settings_cls=AssemblerSettings, build=_build)
