"""The local cluster of a run: Redis, one settings YAML per service, the service processes.

``LocalCluster`` starts Redis (``grpo.services.runtime.redis_server.resolve_redis``: ``redis_url``,
else ``$REDIS_URL``, else an embedded server), writes each service's settings into
``<run_dir>/services/`` (validated against the service's own model first), launches the
verifiers, the assembler, the learner and the rollout worker(s) as ``grpo serve`` processes on
loopback ports through ``ProcessSupervisor`` and waits until each answers health checks.
``check()`` is the one place a dead service is handled: the supervisor restarts it (same
config, same port, with backoff; ``RunConfig.supervision``) and gives up past the policy; an
embedded Redis that died is restarted on its port from its append-only file
(``<run_dir>/redis``, fsync every second). ``outages()`` sums each service's outage seconds
per dependency from its log. ``stop()`` drains the services in dependency order,
stops Redis last, and reports any process left behind.
"""

from __future__ import annotations

import logging
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from grpo.errors import FailedPreconditionError
from grpo.local.outages import service_outages
from grpo.local.processes import ProcessSupervisor
from grpo.services.driver.status_client import StatusClient
from grpo.services.runtime.redis_server import EmbeddedRedis, connect, resolve_redis_url
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.settings.run import RunConfig
from grpo.services.settings.services import (
    assembler_settings,
    driver_settings,
    learner_settings,
    rollout_worker_settings,
    verifier_settings,
    write_service_config,
)
from grpo.v1 import assembler_pb2, learner_pb2

__all__ = ["LocalCluster", "namespace_for"]

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
    """``config.namespace``, or ``run-<run dir name>`` with non-alphanumerics as ``-``."""
    return config.namespace or "run-" + "".join(c if c.isalnum() else "-" for c in run_dir.name)


class LocalCluster:
    """Redis plus every service of a run as a local process (see the module docstring)."""

    def __init__(
        self, config: RunConfig, run_dir: Path, *, log_fn: Callable[[str], None] | None = None
    ) -> None:
        """Args: config: the run; run_dir: the run folder (``services/``, ``logs/`` go there);
        log_fn: receives human-readable milestones."""
        self.config = config
        self.run_dir = run_dir.resolve()
        self.namespace = namespace_for(config, self.run_dir)
        self.names = StreamNames(self.namespace)
        self.supervisor = ProcessSupervisor(
            self.run_dir / "logs", preload=config.supervision.preload
        )
        self._log = log_fn or log.info
        self._redis_server: EmbeddedRedis | None = None
        self.redis_url = ""
        self.client: Any = None
        self.streams: Streams | None = None
        self.model: Path | str | None = None
        self._services_stopped = False
        self._status = StatusClient()

    # ---------------------------------------------------------------- Redis
    def start_redis(self) -> str:
        """Connect to the run's Redis, starting an embedded server when none is named.

        Returns:
            Its URL (also ``self.redis_url``).

        Raises:
            UnavailableError: the named server does not answer.
        """
        url = resolve_redis_url(self.config.redis_url)
        if not url:
            # Durable by default: a resumed run (or a restarted server) reloads the run's state.
            self._redis_server = EmbeddedRedis(self.run_dir / "redis", appendonly=True)
            self._redis_server.__enter__()
            url = self._redis_server.url
            self._log(f"embedded Redis at {url}")
        self.redis_url = url
        self.client = connect(url)
        self.streams = Streams(self.client)
        return url

    # ---------------------------------------------------------------- services
    def _service_yaml(self, name: str, settings: dict[str, Any], service: str) -> Path:
        return write_service_config(service, settings, self.run_dir / "services" / f"{name}.yaml")

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
        if not self.redis_url:
            self.start_redis()
        sup = self.supervisor
        verifier_names = [cfg.verifiers.outcome]
        if cfg.verifiers.process:
            verifier_names.append(cfg.verifiers.process)
        for name in verifier_names:
            sup.start(name, self._service_yaml(name, verifier_settings(cfg, name), name))
        route: dict[str, list[str]] = {"outcome": [self.verifier_address(cfg.verifiers.outcome)]}
        if cfg.verifiers.process:
            route["process"] = [self.verifier_address(cfg.verifiers.process)]
        settings = assembler_settings(
            cfg,
            redis_url=self.redis_url,
            namespace=self.namespace,
            routing={task_type: route},
            group_log=self.run_dir / "assembler_groups.jsonl",
        )
        # A stable consumer name: a restarted assembler takes its own pending rollouts back.
        settings.setdefault("consumer_name", "assembler-0")
        sup.start("assembler", self._service_yaml("assembler", settings, "assembler"))
        self.start_learner()
        for i in range(cfg.generation.workers):
            name = f"rollout-worker-{i}"
            settings = rollout_worker_settings(
                cfg, redis_url=self.redis_url, namespace=self.namespace, model_path=model, index=i
            )
            sup.start(
                name, self._service_yaml(name, settings, "rollout-worker"), service="rollout-worker"
            )
        sup.wait_healthy(list(sup.services), cfg.budget.startup_timeout_s)
        self._log("services: " + ", ".join(f"{n}@{p.port}" for n, p in sup.services.items()))

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
        verifiers = [cfg.verifiers.outcome] + (
            [cfg.verifiers.process] if cfg.verifiers.process else []
        )
        settings = driver_settings(
            cfg,
            redis_url=self.redis_url,
            namespace=self.namespace,
            out_dir=self.run_dir,
            learner_address=self.address("learner"),
            assembler_address=self.address("assembler"),
            verifier_addresses={n: self.address(n) for n in verifiers},
            initial_policy=initial_policy,
            steps=steps,
        )
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
        settings = learner_settings(
            self.config,
            redis_url=self.redis_url,
            namespace=self.namespace,
            model_path=self.model,
            run_dir=self.run_dir,
        )
        settings.setdefault("assembler_address", self.address("assembler"))
        self.supervisor.start("learner", self._service_yaml("learner", settings, "learner"))

    def check(self) -> None:
        """The one place a dead service is handled: restart it per ``config.supervision``
        (an embedded Redis too, from its append-only file).

        Raises:
            ServiceFailedError: a service died more often than the policy allows (the
                message lists every death and quotes the last one's log tail).
            UnavailableError: the embedded Redis could not be restarted.
        """
        server = self._redis_server
        if server is not None and not server.alive():
            self._log("embedded Redis died; restarting it from its append-only file")
            server.restart()
            self.restarts["redis"] = self.restarts.get("redis", 0) + 1
        self.supervisor.supervise(self.config.supervision, say=self._log)

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
        if self.client is not None:
            self.client.close()
            self.client = None
        if self._redis_server is not None:
            self._redis_server.__exit__(None, None, None)
            self._redis_server = None
        return self.supervisor.reap_orphans()
