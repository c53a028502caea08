"""``grpo serve driver``: the run driver as a component of its own.

The same ``RunDriver`` that ``grpo run`` uses, behind one settings model (``DriverSettings``):
the run's ``RunConfig`` (data, evaluation, budget, G, B; ``run.redis_url`` and
``run.namespace`` locate its streams), the addresses of the learner, the assembler and the
verifiers, and where ``eval.jsonl`` and ``summary.json`` go. It serves health, reflection and
metrics like every service; its one worker runs ``RunDriver.drive`` and, when
``exit_when_done``, ends the process with exit code 0 once ``summary.json`` is written (a
Kubernetes Job completes; ``grpo run`` then stops the cluster).

Restartable: a driver that dies exits non-zero and is restarted (by ``grpo run``'s supervisor
or the Job's restart policy); the new one takes its recorded evaluations and spent seconds from
Redis (``DriverRecord``) and resumes feeding after the last prompt the stream holds
(``PromptFeeder.resume``): it never re-feeds or skips a prompt and never re-runs a recorded
evaluation. SIGTERM stops training and still evaluates the final policy and writes the summary
within ``server.grace_s``.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import threading
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import FailedPreconditionError, GrpoError, InternalError
from grpo.services.driver.driver import DriverRecord, RunDriver, RunYieldedError
from grpo.services.driver.lease import DriverLease
from grpo.services.driver.release import ReleaseSettings, release_workloads
from grpo.services.driver.status_client import StatusClient
from grpo.services.driver.summary import RunSummary
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServerSettings
from grpo.services.runtime.weights.puller import WeightPuller, WeightTransferConfig
from grpo.services.settings.run import RunConfig
from grpo.v1 import assembler_pb2, learner_pb2

__all__ = [
    "SERVICE",
    "DriverSettings",
    "DriverWorker",
    "PullingRunDriver",
    "RemoteEndpoints",
    "StoppedBeforeRunError",
    "build",
    "published_version_of",
]

log = logging.getLogger(__name__)


class DriverSettings(BaseModel):
    """The run driver: the run's config, the services' addresses, the output folder."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=lambda: ServerSettings(grace_s=900.0),
        description="gRPC server (health and metrics only); grace_s bounds the final "
        "evaluation after SIGTERM.",
    )
    run: RunConfig = Field(
        ...,
        description="The run (grpo.services.settings.run.RunConfig): tasks, evaluation, "
        "budget; run.redis_url (None = $REDIS_URL) and run.namespace locate its streams.",
    )
    out_dir: Path = Field(
        default=Path("runs/driver"), description="Where eval.jsonl and summary.json go."
    )
    learner_address: str = Field(..., min_length=1, description="host:port of the learner.")
    assembler_address: str = Field(..., min_length=1, description="host:port of the assembler.")
    verifier_addresses: dict[str, str] = Field(
        default_factory=dict,
        description="Verifier service name -> host:port (the outcome verifier scores "
        "held-out evaluations).",
    )
    initial_policy: str | None = Field(
        default=None,
        description="Folder of the initial policy evaluated as 'sft'; None = the folder the "
        "learner published as version 0.",
    )
    steps: int = Field(default=0, ge=0, description="Learner steps to reach; 0 = budget.steps.")
    exit_when_done: bool = Field(
        default=True, description="Exit 0 once summary.json is written (a Job completes)."
    )
    weights: WeightTransferConfig = Field(
        default_factory=WeightTransferConfig,
        description="How the evaluated policies arrive: shared_volume (read the published "
        "folder) or grpc (pull each evaluated version from the learner's weight server into "
        "cache_dir; a cluster without a shared volume).",
    )
    on_stop: Literal["finish", "yield"] = Field(
        default="finish",
        description="What SIGTERM means: finish (stop training, evaluate the final policy, "
        "write the summary: grpo run's Ctrl-C) or yield (leave the run to the next driver: "
        "record the spent seconds, free the lease and exit non-zero at once; a Kubernetes "
        "Job's pod being replaced by an upgrade or a drain).",
    )
    lease_ttl_s: float = Field(
        default=15.0,
        gt=0,
        description="Time to live of the run's driver lease (at most one driver drives a run; "
        "grpo.services.driver.lease): how long a driver that died elsewhere without freeing it "
        "keeps the next one waiting (seconds).",
    )
    release: ReleaseSettings = Field(
        default_factory=ReleaseSettings,
        description="Workloads scaled to zero once the run is complete (their GPUs given "
        "back; grpo.services.driver.release).",
    )

    @model_validator(mode="after")
    def _check(self) -> DriverSettings:
        if not self.run.namespace:
            raise ValueError("run.namespace must name the run's streams (it is '' here)")
        return self


class RemoteEndpoints:
    """``Endpoints`` over gRPC addresses; ``check`` is a no-op (a remote driver sees no
    processes: a dead service shows as failed calls, retried until it is back)."""

    def __init__(self, settings: DriverSettings) -> None:
        """Args: settings: the driver's settings (addresses)."""
        self._settings = settings
        self._status = StatusClient()

    def learner_status(self) -> learner_pb2.GetStatusResponse:
        """The learner's GetStatus (raises grpc.RpcError when it is down)."""
        return self._status.learner_status(self._settings.learner_address)

    def assembler_stats(self) -> assembler_pb2.AssemblerStats:
        """The assembler's GetStats counters (raises grpc.RpcError when it is down)."""
        return self._status.assembler_stats(self._settings.assembler_address)

    def set_learner_paused(self, paused: bool, timeout_s: float) -> learner_pb2.SetPausedResponse:
        """The learner's SetPaused (raises grpc.RpcError when it does not answer in time)."""
        return self._status.set_learner_paused(self._settings.learner_address, paused, timeout_s)

    def close(self) -> None:
        """Close the kept status channels."""
        self._status.close()

    def verifier_address(self, name: str) -> str:
        """``host:port`` of verifier ``name``.

        Raises:
            FailedPreconditionError: ``verifier_addresses`` does not name it.
        """
        address = self._settings.verifier_addresses.get(name)
        if not address:
            raise FailedPreconditionError(f"driver settings give no address for verifier {name!r}")
        return address

    def check(self) -> None:
        """Nothing to check from here (see the class docstring)."""


_VERSION_FOLDER = re.compile(r"^v(\d+)$")


def published_version_of(folder: Path | str) -> int:
    """The policy version of a folder the learner published (``<run_dir>/weights/v<N>``,
    ``grpo.services.learner.publish.weights_dir``).

    Raises:
        FailedPreconditionError: the folder's name is not ``v<N>`` (not a published version).
    """
    match = _VERSION_FOLDER.match(Path(folder).name)
    if match is None:
        raise FailedPreconditionError(
            f"{folder} is not a published policy folder (<run_dir>/weights/v<N>): with "
            "weights.mode grpc the driver evaluates only versions it can pull from the learner"
        )
    return int(match.group(1))


class StoppedBeforeRunError(GrpoError):
    """The driver was stopped before its run began (while waiting for version 0): nothing
    was trained or evaluated, so there is no summary to write and nothing failed."""


class PullingRunDriver(RunDriver):
    """A ``RunDriver`` that evaluates local, verified copies of the published versions,
    pulled from the learner's weight server (``weights.mode: grpc``), and adds the run's
    accounting block to its summary."""

    def __init__(
        self,
        *args: Any,
        puller: WeightPuller | None,
        initial_wait_s: float = 0.0,
        render_with_published: bool = False,
        **kwargs: Any,
    ) -> None:
        """Args: as ``RunDriver``; puller: pulls evaluated versions (None: read the published
        folders directly, a shared volume); initial_wait_s: how long ``drive`` waits for the
        learner to publish version 0 when no initial policy is given (every pod of a release
        starts at once); render_with_published: the tasks' prompts are still plain and are
        rendered through the chat template of the published version 0's tokenizer (pulled)
        once it is there: ``model.path`` is not on this pod (it is on the learner's claim)."""
        super().__init__(*args, **kwargs)
        self.puller = puller
        self.initial_wait_s = initial_wait_s
        self.render_with_published = render_with_published

    def drive(
        self,
        initial_model: Path | str | None = None,
        steps: int | None = None,
        *,
        started: float | None = None,
    ) -> RunSummary:
        """``RunDriver.drive``, first waiting up to ``initial_wait_s`` for version 0 when no
        initial policy is given (then ``RunDriver.drive`` raises FailedPreconditionError).

        Raises:
            StoppedBeforeRunError: ``stop_requested`` was set during that wait.
        """
        from grpo.services.runtime.streams import REDIS_ERRORS

        deadline = time.monotonic() + self.initial_wait_s
        while initial_model is None and time.monotonic() < deadline:
            try:
                policy = self.published_policy()
            except REDIS_ERRORS as exc:
                log.info("waiting for Redis: %s", exc)
                policy = None
            if policy is not None and policy.path:
                break
            if self.stop_requested.wait(1.0):
                raise StoppedBeforeRunError(
                    "stopped while waiting for the learner's version 0: no run began"
                )
        if self.render_with_published:
            self._render_with_published()
        return super().drive(initial_model, steps, started=started)

    def _render_with_published(self) -> None:
        """Render the plain tasks with the chat template of the published version 0 (its
        pulled copy holds the policy's tokenizer; ``grpo.services.tasks.run_tasks.render_chat``).

        Raises:
            FailedPreconditionError: version 0 is not published (or no puller).
            NotFoundError / UnavailableError / ContractError: the pull failed.
        """
        from grpo.services.tasks.run_tasks import render_chat

        first = self.published_policy()
        if self.puller is None or first is None or not first.path:
            raise FailedPreconditionError(
                "the prompts need the policy's chat template and model.path is not on this "
                "pod: the learner's version 0 must be published to read its tokenizer"
            )
        local = self._pull(published_version_of(first.path))
        model = self.config.model.model_copy(update={"path": str(local)})
        self.tasks = render_chat(self.tasks, self.config.model_copy(update={"model": model}))
        self.render_with_published = False

    def evaluate(self, model: Path | str, label: str, *, due: int | None = None) -> float:
        """``RunDriver.evaluate`` of the local copy of ``model`` (pulled unless recorded).

        Raises:
            FailedPreconditionError: ``model`` is no published version folder.
            NotFoundError / UnavailableError / ContractError: the pull failed.
        """
        if self.puller is None:
            return super().evaluate(model, label, due=due)
        version = published_version_of(model)
        local = self.puller.local_path(version)
        done = self.record.evaluation(label) if self.record is not None else None
        recorded = done is not None and (label != "final" or done.get("model_dir") == str(local))
        if not recorded and self.tasks.heldout:
            local = self._pull(version)
        return super().evaluate(local, label, due=due)

    def _pull(self, version: int) -> Path:
        """Pull ``version``, waiting (up to ``initial_wait_s``) while the learner's weight
        server is unreachable: a learner pod being replaced (an upgrade, a lost node) serves
        again once it restored its checkpoint.

        Raises:
            UnavailableError: still unreachable after ``initial_wait_s``, or stopped meanwhile.
            NotFoundError / ContractError: as ``WeightPuller.pull``.
        """
        from grpo.errors import UnavailableError

        assert self.puller is not None
        deadline = time.monotonic() + self.initial_wait_s
        while True:
            try:
                return self.puller.pull(version).path
            except UnavailableError as exc:
                if time.monotonic() > deadline or self.stop_requested.wait(2.0):
                    raise
                log.info("waiting for the learner's weight server: %s", exc)

    def summary(self, **kwargs: Any) -> RunSummary:
        """``RunDriver.summary`` with the run's accounting read from Redis now
        (``read_run_accounting``, while the services still run: ``unaccounted`` can be off by
        the assembler's batch in flight; ``grpo run`` reads it again once the services
        stopped). When Redis does not answer, the counters of the last poll."""
        from grpo.services.runtime.accounting import read_run_accounting

        if kwargs.get("accounting") is None:
            try:
                kwargs["accounting"] = read_run_accounting(
                    self.streams.client,
                    self.names.namespace,
                    self.names.rollouts,
                    self.config.assembler.consumer_group,
                )
            except Exception as exc:  # the summary is still written
                log.warning("accounting for the summary failed: %s", exc)
        return super().summary(**kwargs)


class DriverWorker:
    """Runs ``RunDriver.drive`` in a thread (a ``BackgroundWorker`` of ``grpo serve``).

    The drive starts once this driver holds the run's lease (``DriverLease``: a second driver
    of the run waits for the first to stop); the lease is renewed while it runs and freed when
    it ends. Once the summary is written and the run ended on a budget, the workloads of
    ``settings.release`` are scaled to zero (``release_workloads``), then the process exits 0.

    A drive that fails while the service runs ends the thread: ``serve`` sees it dead and
    exits non-zero (the process is restarted and resumes). On SIGTERM (``stop``), with
    ``on_stop: finish`` training stops and the final evaluation and the summary still run; a
    drive that fails then, or does not end within the stop's timeout, makes ``stop`` raise,
    so ``serve`` exits non-zero: the run has no summary, and exit 0 would report it complete.
    With ``on_stop: yield`` (or when the lease was lost to another driver) the driver leaves
    the run to the next one: no pause, no final evaluation, no summary; ``stop`` raises so the
    process exits non-zero. A driver stopped before its run began (waiting for the lease or
    for the learner's version 0) exits 0: nothing failed.
    """

    def __init__(
        self, driver: RunDriver, settings: DriverSettings, lease: DriverLease | None = None
    ) -> None:
        """Args: driver: the run driver; settings: its settings (initial policy, steps,
        on_stop, release); lease: the run's driver lease (None: none taken, a test)."""
        self.driver = driver
        self._settings = settings
        self._lease = lease
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.summary: RunSummary | None = None
        self.released: list[str] = []
        """``Kind/name`` of the workloads scaled to zero after the run."""
        self.failure: Exception | None = None
        """What ``drive`` raised (None while it runs or after it succeeded)."""

    def start(self) -> None:
        """Start the drive thread (returns at once)."""
        self._thread = threading.Thread(target=self._run, name="run-driver", daemon=True)
        self._thread.start()

    def _yield(self) -> None:
        """Leave the run to another driver: stop feeding and skip the final evaluation."""
        self.driver.yield_requested.set()
        self.driver.stop_requested.set()

    def _run(self) -> None:
        s = self._settings
        lease = self._lease
        if lease is not None:
            if not lease.acquire(self._stop):
                log.info("run driver stopped while waiting for the run's lease")
                return
            lease.keep(on_lost=self._yield)
        try:
            self._drive()
        finally:
            if lease is not None:
                lease.release()
        if s.exit_when_done and not self._stop.is_set():
            os.kill(os.getpid(), signal.SIGTERM)  # serve drains and returns: exit code 0
        self._stop.wait()  # alive until stopped, so serve never takes "done" for "died"

    def _drive(self) -> None:
        s = self._settings
        try:
            self.summary = self.driver.drive(s.initial_policy, s.steps or None, started=time.time())
        except StoppedBeforeRunError as exc:
            log.info("run driver stopped: %s", exc)
            return
        except RunYieldedError as exc:
            self.failure = exc
            log.warning("run driver yielded: %s", exc)
            raise
        except Exception as exc:
            self.failure = exc
            if self._stop.is_set():
                log.exception("run driver failed while stopping; no summary written")
            else:
                log.exception("run driver failed; exiting to be restarted")
            raise
        done = self.summary
        if done.stop_reason != "interrupted":
            try:
                self.released = release_workloads(s.release)
            except GrpoError as exc:
                self.failure = exc
                log.exception("releasing the run's workloads failed; exiting to retry")
                raise
        log.info(  # the line `kubectl logs job/<release>-driver` ends with
            "run driver done",
            extra={
                "stop_reason": done.stop_reason,
                "steps": done.steps,
                "sft_accuracy": done.sft_accuracy,
                "final_accuracy": done.final_accuracy,
                "generated_tokens": done.accounting.generated_tokens,
                "summary": str(s.out_dir / "summary.json"),
                "released": self.released,
            },
        )

    def stop(self, timeout_s: float) -> None:
        """Stop training and join in ``timeout_s``: with ``on_stop: finish`` the final
        evaluation and summary still run; with ``yield`` the run is left to the next driver.

        Raises:
            InternalError: ``drive`` failed (the message holds its error), it was still
                running after ``timeout_s`` seconds, or it yielded; in each case no summary
                was written.
        """
        if self._settings.on_stop == "yield":
            self._yield()
        self.driver.stop_requested.set()
        self._stop.set()
        if self._thread is None:
            return
        self._thread.join(timeout_s)
        if self.failure is not None:
            raise InternalError(
                f"run driver failed: {type(self.failure).__name__}: {self.failure}"
            ) from self.failure
        if self._thread.is_alive():
            log.error("run driver still running %.0f s after the stop; no summary", timeout_s)
            raise InternalError(
                f"run driver did not finish within {timeout_s:.0f} s of the stop "
                "(server.grace_s); no summary written"
            )

    def is_alive(self) -> bool:
        """True while the drive thread runs (False after a failure: the process restarts)."""
        return self._thread is not None and self._thread.is_alive()


def build(settings: DriverSettings) -> ServiceParts:
    """Load the task sets, connect to Redis, and return the drive worker (no RPC binding).

    Raises:
        FailedPreconditionError: no Redis URL (``run.redis_url`` or ``$REDIS_URL``).
        InvalidArgumentError / NotFoundError: the data section cannot be loaded.
    """
    import torch

    from grpo.services.runtime.redis_server import connect, resolve_redis_url
    from grpo.services.runtime.streams import StreamNames, Streams
    from grpo.services.tasks.run_tasks import load_run_tasks

    torch.set_num_threads(1)
    try:  # no per-call progress bars in the log (model loads at every evaluation)
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
    except ImportError:
        pass
    run = settings.run
    # Bounded replies (supervision.redis_reply_timeout_s; no blocking reads here): the
    # driver's clock (budget.wall_clock_s) and its outage policy hold whatever Redis does, a
    # stopped server included.
    client = connect(
        str(resolve_redis_url(run.redis_url, required_by="run driver")),
        read_timeout_s=run.supervision.redis_reply_timeout_s,
    )
    names = StreamNames(run.namespace)
    puller = WeightPuller(settings.weights) if settings.weights.mode == "grpc" else None
    endpoints = RemoteEndpoints(settings)
    # On Kubernetes model.path is on the learner's claim, not here: the chat template is read
    # from the published version 0 once it is pulled (PullingRunDriver.drive).
    later = (
        puller is not None
        and run.data.chat.template != "none"
        and run.model.path is not None
        and not Path(run.model.path).is_dir()
    )
    tasks = load_run_tasks(run, render=not later)
    record = DriverRecord(client, names)
    record.check_data(tasks)  # a restarted driver on data changed meanwhile: refused
    driver = PullingRunDriver(
        run,
        tasks,
        streams=Streams(client),
        names=names,
        endpoints=endpoints,
        out_dir=settings.out_dir,
        log_fn=log.info,
        record=record,
        puller=puller,
        initial_wait_s=settings.weights.startup_wait_s,
        render_with_published=later,
    )

    def close() -> None:
        client.close()
        endpoints.close()
        if puller is not None:
            puller.close()

    lease = DriverLease(client, names, ttl_s=settings.lease_ttl_s)
    worker = DriverWorker(driver, settings, lease)
    return ServiceParts(bindings=[], workers=[worker], close=close)


SERVICE = ServiceSpec(name="driver", settings_cls=DriverSettings, build=build)
