"""The local cluster of a run: Redis, one settings YAML per service, the service processes.

``LocalCluster`` starts Redis (``grpo.services.runtime.redis_server.resolve_redis``: ``redis_url``,
else ``$REDIS_URL``, else an embedded server), writes each service's settings into
``<run_dir>/services/`` (validated against the service's own model first), launches the
verifiers the run starts (built-in and SDK services; an endpoint runs elsewhere and is only
routed to, ``grpo.services.settings.verifiers``), the assembler, the learner and the rollout
worker(s) as ``grpo serve`` processes on loopback ports through ``ProcessSupervisor`` and waits
until each answers health checks.
``check()`` is the one place a dead or stalled service is handled: the supervisor restarts it
(same config, same port, with backoff; ``RunConfig.supervision``), kills and restarts one that
made no progress for ``supervision.stall_s`` (``grpo.local.liveness``), and gives up past the
policy; an embedded Redis that died, or stopped answering for ``stall_s``, is restarted on its
port from its append-only file (``<run_dir>/redis``, fsync every second). Redis out of memory
(its ``maxmemory`` reached under ``noeviction``: writes refused, every service waits and
retries) is named on the console once per episode and kept in ``warnings``. A Redis whose
``maxmemory-policy`` would evict keys is refused at start (``RunRefusedError``).
``outages()`` sums each service's outage seconds per dependency from its log. ``stop()``
drains the services in dependency order, stops Redis last, and reports any process left
behind.
"""

from __future__ import annotations

import contextlib
import logging
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import redis

from grpo.errors import FailedPreconditionError
from grpo.local.outages import service_outages
from grpo.local.processes import ProcessSupervisor
from grpo.local.rundir import RunRefusedError, legacy_namespace
from grpo.services.driver.status_client import StatusClient
from grpo.services.runtime.config import mask_secrets
from grpo.services.runtime.redis_server import (
    EmbeddedRedis,
    EvictingRedisError,
    connect,
    redis_client,
    resolve_redis_url,
)
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.settings.run import RunConfig
from grpo.services.settings.services import resolve_run, service_settings, write_service_config
from grpo.services.settings.verifiers import VerifierPlan, plan_verifiers
from grpo.v1 import assembler_pb2, learner_pb2

__all__ = ["LOCAL_SERVER", "LocalCluster", "RedisWatch", "local_placement", "namespace_for"]

log = logging.getLogger(__name__)


DEPENDENCIES: dict[str, tuple[str, ...]] = {
    "assembler": ("redis", "verifiers"),
    "learner": ("redis",),
    "rollout-worker": ("redis",),
    "driver": ("redis",),
}
"""Service kind -> the dependencies whose outages it rides out (``Outage``); the verifiers
have none."""


def namespace_for(config: RunConfig, run_dir: Path) -> str:
    """``config.namespace``, or ``run-<run dir name>`` (``rundir.legacy_namespace``): the
    namespace of a cluster not given one (``grpo run`` gives the run id's,
    ``grpo.local.rundir.RunIdentity``)."""
    return config.namespace or legacy_namespace(run_dir)


WATCH_EVERY_S = 2.0
"""Seconds between two looks at Redis by ``RedisWatch`` (liveness and memory)."""


class RedisWatch:
    """Liveness and memory of the run's Redis, looked at every ``WATCH_EVERY_S`` from the
    supervising loop: ``silent_s`` (seconds since it last answered; a server that is loading
    its append-only file answers) and, from ``INFO errorstats``, writes refused for lack of
    memory (``errorstat_OOM``), which ``check`` turns into one named warning per episode."""

    def __init__(self, url: str, clock: Callable[[], float] = time.monotonic) -> None:
        """Args: url: the server; clock: monotonic seconds."""
        self._probe = redis_client(url, connect_timeout_s=2.0, reply_timeout_s=2.0)
        self._clock = clock
        self._next = 0.0
        self.last_ok = clock()
        self.oom_refused = 0
        self._oom_seen = 0

    def look(self) -> int:
        """Look when due; returns the writes newly refused for memory since the last look
        (0 when none or not due)."""
        now = self._clock()
        if now < self._next:
            return 0
        self._next = now + WATCH_EVERY_S
        try:
            stats = self._probe.info("errorstats")
        except redis.exceptions.BusyLoadingError:
            self.last_ok = now
            return 0
        except redis.RedisError:
            return 0
        self.last_ok = now
        count = int((stats.get("errorstat_OOM") or {}).get("count", 0))
        fresh = max(0, count - self._oom_seen) if self._oom_seen or count else 0
        self._oom_seen = count
        self.oom_refused += fresh
        return fresh

    def memory(self) -> str:
        """``used MB of maxmemory MB`` (or "" when unreadable)."""
        try:
            info = self._probe.info("memory")
        except redis.RedisError:
            return ""
        used, cap = int(info.get("used_memory", 0)), int(info.get("maxmemory", 0))
        return f"{used / 2**20:.1f} MB used of maxmemory {cap / 2**20:.1f} MB"

    def silent_s(self) -> float:
        """Seconds since Redis last answered."""
        return self._clock() - self.last_ok

    def reset(self) -> None:
        """A restarted server: its silence counts from now."""
        self.last_ok = self._clock()

    def close(self) -> None:
        """Close the probe's connection."""
        self._probe.close()


LOCAL_SERVER: dict[str, Any] = {"host": "127.0.0.1", "metrics_port": -1, "grace_s": 5.0}
"""The gRPC server block of every local service (loopback, no metrics port); the driver's
``grace_s`` is the run's (``DRIVER_GRACE_S``)."""


def local_placement(
    service: str,
    *,
    run_dir: Path,
    model: Path | str,
    addresses: dict[str, str],
    routing: dict[str, dict[str, Any]] | None = None,
    endpoint_tls: dict[str, Any] | None = None,
    verifier_addresses: dict[str, str] | None = None,
    index: int = 0,
    initial_policy: Path | str | None = None,
    steps: int | None = None,
) -> dict[str, Any]:
    """What ``grpo run`` decides for ``service`` on this machine (its placement,
    ``grpo.services.settings.services.PLACEMENT_KEYS``): loopback server, run dir paths, the
    started services' addresses, stable consumer names.

    Args:
        service: the ``grpo serve`` name (a verifier: any name but the pipeline's four).
        run_dir: the run folder; model: the initial policy's folder (or hub id).
        addresses: ``learner`` and ``assembler`` -> ``127.0.0.1:<port>`` once started.
        routing: the assembler's routing table (``VerifierPlan.routing``).
        endpoint_tls: address -> TLS of the endpoints with their own (the assembler's).
        verifier_addresses: the driver's verifier services -> their addresses.
        index: the rollout worker's index; initial_policy, steps: the driver's.

    Raises:
        KeyError: an address the placement needs is not in ``addresses``.
    """
    if service == "learner":
        return {
            "server": dict(LOCAL_SERVER),
            "model_path": str(model),
            "run_dir": str(run_dir),
            "assembler_address": addresses["assembler"],
        }
    if service == "rollout-worker":
        return {
            "server": dict(LOCAL_SERVER),
            "backend": {"model_path": str(model), "torch_threads": 1},
            "worker": {"consumer": f"worker-{index}"},
        }
    if service == "assembler":
        out: dict[str, Any] = {
            "server": dict(LOCAL_SERVER),
            "routing": routing or {},
            "group_log": str(run_dir / "assembler_groups.jsonl"),
            # A stable consumer name: a restarted assembler takes its own pending rollouts back.
            "consumer_name": "assembler-0",
        }
        if endpoint_tls:
            out["assembler"] = {"verifier": {"endpoint_tls": dict(endpoint_tls)}}
        return out
    if service == "driver":
        server = {k: v for k, v in LOCAL_SERVER.items() if k != "grace_s"}
        return {
            "server": server,
            "out_dir": str(run_dir),
            "learner_address": addresses["learner"],
            "assembler_address": addresses["assembler"],
            "verifier_addresses": dict(verifier_addresses or {}),
            "initial_policy": str(initial_policy) if initial_policy is not None else None,
            "steps": steps or 0,
        }
    return {"server": dict(LOCAL_SERVER)}


class LocalCluster:
    """Redis plus every service of a run as a local process (see the module docstring)."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        *,
        namespace: str | None = None,
        log_fn: Callable[[str], None] | None = None,
    ) -> None:
        """Args: config: the run; run_dir: the run folder (``services/``, ``logs/`` go there);
        namespace: the run's Redis namespace (None: ``namespace_for``); log_fn: receives
        human-readable milestones."""
        self.config = config
        self.run_dir = run_dir.resolve()
        self.namespace = namespace or namespace_for(config, self.run_dir)
        self.names = StreamNames(self.namespace)
        self.supervisor = ProcessSupervisor(
            self.run_dir / "logs", preload=config.supervision.preload
        )
        self.supervisor.startup_timeout_s = config.budget.startup_timeout_s
        self.warnings: list[str] = []
        """Named conditions the figures do not show (Redis out of memory, stalls)."""
        self._redis_watch: RedisWatch | None = None
        self._oom_since: float | None = None
        self._silence_named = False
        self._next_damaged_look = 0.0
        # Checkpoints moved aside before this run (an earlier run's) are not named again.
        self._damaged_seen = {p.name for p in (self.run_dir / "checkpoints").glob("damaged-*")}
        self._log = log_fn or log.info
        self._redis_server: EmbeddedRedis | None = None
        self.redis_url = ""
        self.client: Any = None
        self.streams: Streams | None = None
        self.model: Path | str | None = None
        self.task_type = ""
        self._services_stopped = False
        # Short deadlines: these calls only refresh the live display, from the supervising loop.
        self._status = StatusClient(timeout_s=2.0)
        self.plan: VerifierPlan | None = None
        """The run's verifiers (``plan_verifiers``), set by ``start``."""

    # ---------------------------------------------------------------- Redis
    def start_redis(self) -> str:
        """Connect to the run's Redis, starting an embedded server when none is named.

        Returns:
            Its URL (also ``self.redis_url``).

        Raises:
            UnavailableError: the named server does not answer.
            RunRefusedError: its ``maxmemory-policy`` would evict keys (``require_noeviction``).
        """
        url = resolve_redis_url(self.config.redis_url)
        if not url:
            # Durable by default: a resumed run (or a restarted server) reloads the run's state.
            self._redis_server = EmbeddedRedis(self.run_dir / "redis", appendonly=True)
            self._redis_server.__enter__()
            url = self._redis_server.url
            self._log(f"embedded Redis at {url}")
        self.redis_url = url
        try:
            # Bounded replies (supervision.redis_reply_timeout_s): the supervising loop must go
            # on (and restart a stopped Redis) whatever Redis does.
            self.client = connect(url, read_timeout_s=self.config.supervision.redis_reply_timeout_s)
        except EvictingRedisError as exc:
            raise RunRefusedError(str(exc)) from exc
        self.streams = Streams(self.client)
        self._redis_watch = RedisWatch(url)
        return url

    # ---------------------------------------------------------------- services
    def _service_yaml(self, name: str, settings: dict[str, Any], service: str = "") -> Path:
        return write_service_config(
            service or name, settings, self.run_dir / "services" / f"{name}.yaml"
        )

    def start(self, model: Path | str, task_type: str) -> None:
        """Write each service's YAML and launch verifiers, assembler, learner and workers.

        Args:
            model: folder (or hub id) of the initial policy.
            task_type: the routing key of the run's tasks.

        Raises:
            InvalidArgumentError: a derived service config does not validate.
            FailedPreconditionError / DeadlineExceededError: a service failed to start (its
                log tail is in the message).
        """
        cfg = self.config
        self.model = model
        self.task_type = task_type
        if not self.redis_url:
            self.start_redis()
        sup = self.supervisor
        plan = self.plan = plan_verifiers(cfg.verifiers, [task_type])
        for name, verifier in plan.services().items():  # endpoints run elsewhere
            path = self._service_yaml(name, self.settings_for(verifier.text), verifier.text)
            sup.start(name, path, service=verifier.text)
        sup.start("assembler", self._service_yaml("assembler", self.settings_for("assembler")))
        self.start_learner()
        for i in range(cfg.generation.workers):
            name = f"rollout-worker-{i}"
            settings = self.settings_for("rollout-worker", index=i)
            sup.start(
                name, self._service_yaml(name, settings, "rollout-worker"), service="rollout-worker"
            )
        sup.wait_healthy(list(sup.services), cfg.budget.startup_timeout_s)
        self._log("services: " + ", ".join(f"{n}@{p.port}" for n, p in sup.services.items()))

    def settings_for(
        self,
        service: str,
        *,
        index: int = 0,
        initial_policy: Path | str | None = None,
        steps: int | None = None,
    ) -> dict[str, Any]:
        """The settings document of ``service`` (a ``grpo serve`` name, or how the run config
        names a verifier) in this cluster: the one derivation
        (``grpo.services.settings.services.service_settings``) over the resolved run and this
        machine's placement (``local_placement``).

        Raises:
            FailedPreconditionError: ``start`` has not run (no model, Redis or plan yet), or
                an address it needs is of a service not started.
            InvalidArgumentError: the run's settings for it are invalid.
        """
        if self.model is None or not self.redis_url or self.plan is None:
            raise FailedPreconditionError("LocalCluster.settings_for before start()")
        run = resolve_run(self.config, namespace=self.namespace, redis_url=self.redis_url)
        plan = self.plan
        addresses = {}
        for name in ("learner", "assembler"):
            with contextlib.suppress(FailedPreconditionError):  # not started (yet)
                addresses[name] = self.address(name)
        placement = local_placement(
            service,
            run_dir=self.run_dir,
            model=self.model,
            addresses=addresses,
            routing=plan.routing(self.verifier_address) if service == "assembler" else None,
            endpoint_tls={a: t.model_dump(mode="json") for a, t in plan.endpoint_tls().items()},
            verifier_addresses=(
                {n: self.address(n) for n in plan.services()} if service == "driver" else None
            ),
            index=index,
            initial_policy=initial_policy,
            steps=steps,
        )
        return service_settings(run, service, placement, index=index)

    def start_driver(self, initial_policy: Path | str, steps: int | None = None) -> None:
        """Launch the run driver (``grpo serve driver``) against the started services and wait
        until it is healthy (or already finished: a short run can end before the first health
        check answers); it exits 0 once ``summary.json`` is written (``driver_finished``).

        Raises:
            FailedPreconditionError: ``start`` has not run, or the driver exited non-zero
                while starting.
        """
        if self.model is None:
            raise FailedPreconditionError("LocalCluster.start_driver before start()")
        cfg = self.config
        settings = self.settings_for("driver", initial_policy=initial_policy, steps=steps)
        self.supervisor.start("driver", self._service_yaml("driver", settings, "driver"))
        try:
            self.supervisor.wait_healthy(["driver"], cfg.budget.startup_timeout_s)
        except FailedPreconditionError:
            if not self.driver_finished():  # a short run may be done before a health check
                raise

    def driver_finished(self) -> bool:
        """True once the driver process has exited with code 0 (its summary is written)."""
        proc = self.supervisor.services.get("driver")
        return proc is not None and not proc.alive() and proc.popen.returncode == 0

    def stop_driver(self) -> int | None:
        """SIGTERM the driver and wait for it: it stops training, evaluates the final policy
        and writes the summary (bounded by its ``server.grace_s``).

        Returns:
            The driver's exit code (non-zero: it failed while stopping, no summary written,
            why is in ``logs/driver.log``), or None when it was not running.
        """
        proc = self.supervisor.services.get("driver")
        if proc is None or not proc.alive():
            return None
        self.supervisor.kill("driver", signal.SIGTERM)
        return proc.popen.returncode

    def start_learner(self) -> None:
        """(Re)start the learner process; it resumes from its last checkpoint in the run dir."""
        if self.model is None:
            raise FailedPreconditionError("LocalCluster.start_learner before start()")
        settings = self.settings_for("learner")
        self.supervisor.start("learner", self._service_yaml("learner", settings, "learner"))

    def check(self) -> None:
        """The one place a dead service is handled: restart it per ``config.supervision``
        (an embedded Redis too, from its append-only file).

        Raises:
            ServiceFailedError: a service died more often than the policy allows (the
                message lists every death and quotes the last one's log tail).
            UnavailableError: the embedded Redis could not be restarted.
        """
        self._check_redis()
        self._name_damaged()
        self.supervisor.supervise(self.config.supervision, say=self._log)

    def _name_damaged(self) -> None:
        """Name each checkpoint the learner moved aside as damaged (``DAMAGED.txt`` beside
        it, ``grpo.learner.checkpoint.quarantine``) once on the console and in
        ``warnings``."""
        now = time.monotonic()
        if now < self._next_damaged_look:
            return
        self._next_damaged_look = now + WATCH_EVERY_S
        for note in sorted((self.run_dir / "checkpoints").glob("damaged-*/DAMAGED.txt")):
            if note.parent.name in self._damaged_seen:
                continue
            self._damaged_seen.add(note.parent.name)
            why = note.read_text(errors="replace").strip()
            line = f"checkpoint {note.parent.name} was damaged and skipped ({why[:300]})"
            self._log(f"warning: {line}")
            self.warnings.append(line)

    def _check_redis(self) -> None:
        """Restart a dead (or, past ``supervision.stall_s``, silent) embedded Redis from its
        append-only file; name Redis out of memory once per episode.

        Raises:
            UnavailableError: the embedded Redis could not be restarted.
        """
        server, watch, stall_s = (
            self._redis_server,
            self._redis_watch,
            self.config.supervision.stall_s,
        )
        refused = watch.look() if watch is not None else 0
        if server is not None and watch is not None and server.alive() and stall_s:
            silent = watch.silent_s()
            if silent >= stall_s:
                self._log(f"embedded Redis stalled ({silent:.0f} s without an answer, "
                          f"supervision.stall_s {stall_s:g}); killing it to restart")  # fmt: skip
                self.supervisor.stalls.append(("redis", round(silent, 1)))
                server.kill()
        if watch is not None and (server is None or not stall_s):
            self._name_silence(watch.silent_s())
        if server is not None and not server.alive():
            self._log("embedded Redis died; restarting it from its append-only file")
            server.restart()
            self.restarts["redis"] = self.restarts.get("redis", 0) + 1
            if watch is not None:
                watch.reset()
        self._name_oom(refused)

    def _name_silence(self, silent: float) -> None:
        """One console line when a Redis this run does not restart (an external
        ``redis_url``, or the embedded one with ``supervision.stall_s`` 0) stops answering for
        ``supervision.redis_reply_timeout_s``, and one when it answers again: meanwhile each
        service's bounded Redis calls time out and ride it out as an outage
        (``outage_s.redis``)."""
        limit = self.config.supervision.redis_reply_timeout_s
        if silent >= limit and not self._silence_named:
            self._silence_named = True
            line = (
                f"Redis at {mask_secrets(self.redis_url or '')} is not answering "
                f"({silent:.0f} s without a reply); not restarted by this run: the services "
                "ride it out as a Redis outage until it answers or their redis_outage_s ends"
            )
            self._log(f"warning: {line}")
            self.warnings.append(line)
        elif silent < limit and self._silence_named:
            self._silence_named = False
            self._log("Redis answers again")

    def _name_oom(self, refused: int) -> None:
        """One console warning per out-of-memory episode (writes refused since the last look;
        an episode ends after a minute without refusals)."""
        now = time.monotonic()
        if not refused:
            if self._oom_since is not None and now - self._oom_since > 60:
                self._oom_since = None
            return
        if self._oom_since is None:
            memory = self._redis_watch.memory() if self._redis_watch is not None else ""
            line = (
                f"Redis is out of memory ({memory}; maxmemory-policy noeviction): it refuses "
                "writes, and every service waits and retries them (backpressure) until memory "
                "is freed or maxmemory raised (CONFIG SET maxmemory)"
            )
            self._log(f"warning: {line}")
            self.warnings.append(line)
        self._oom_since = now

    def outages(self, end: float) -> dict[str, dict[str, float]]:
        """Outage seconds per dependency per service (summary.json's ``outage_s``), summed
        from every service's log, its restarts included
        (``grpo.local.outages.service_outages``).

        Args:
            end: ``time.time()`` where an outage still open stops (seconds since the epoch).
        """
        uses = {
            name: DEPENDENCIES.get(proc.service, ())
            for name, proc in self.supervisor.services.items()
        }
        return service_outages(self.supervisor.log_dir, uses, end=end)

    def redis_silent_s(self) -> float:
        """Seconds the run's Redis has not answered the watch (0.0 without a watch)."""
        return self._redis_watch.silent_s() if self._redis_watch is not None else 0.0

    @property
    def restarts(self) -> dict[str, int]:
        """Restarts per service so far (the embedded Redis as ``redis``)."""
        return self.supervisor.restarts

    # ---------------------------------------------------------------- addresses and RPCs
    def address(self, name: str) -> str:
        """``127.0.0.1:<port>`` of a started service.

        Raises:
            FailedPreconditionError: no service of that name was started.
        """
        proc = self.supervisor.services.get(name)
        if proc is None:
            raise FailedPreconditionError(f"service {name!r} is not part of this cluster")
        return proc.address

    def verifier_address(self, name: str) -> str:
        """Address of the verifier service ``name`` (see ``address``)."""
        return self.address(name)

    def learner_status(self) -> learner_pb2.GetStatusResponse:
        """The learner's GetStatus (raises grpc.RpcError when it is down)."""
        return self._status.learner_status(self.address("learner"))

    def set_learner_paused(self, paused: bool, timeout_s: float) -> learner_pb2.SetPausedResponse:
        """The learner's SetPaused (raises grpc.RpcError when it does not answer in time)."""
        return self._status.set_learner_paused(self.address("learner"), paused, timeout_s)

    def assembler_stats(self) -> assembler_pb2.AssemblerStats:
        """The assembler's GetStats counters (raises grpc.RpcError when it is down)."""
        return self._status.assembler_stats(self.address("assembler"))

    # ---------------------------------------------------------------- stop
    def stop_services(self) -> None:
        """Stop every service in dependency order (SIGTERM, then SIGKILL after the grace);
        Redis keeps running, so what the services left in it can still be read. Idempotent."""
        if self._services_stopped:
            return
        self._services_stopped = True
        codes = self.supervisor.stop_all(self.config.budget.stop_grace_s)
        if codes:
            self._log("stopped services: " + ", ".join(f"{n}={c}" for n, c in codes.items()))

    def stop(self) -> list[int]:
        """Stop every service (``stop_services``), then Redis.

        Returns:
            Pids of processes still alive afterwards that had to be killed (should be empty).
        """
        self.stop_services()
        self._status.close()
        if self._redis_watch is not None:
            self._redis_watch.close()
            self._redis_watch = None
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._redis_server is not None:
            self._redis_server.__exit__(None, None, None)
            self._redis_server = None
        return self.supervisor.reap_orphans()
