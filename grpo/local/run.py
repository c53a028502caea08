"""``grpo run``: the whole pipeline on one machine, composed of three parts.

1. ``grpo.local.policy.prepare_policy``: a fresh tiny model (``model.path`` unset)
   and the SFT warm start, in this process before any service starts (so it may use every
   core);
   (before it, ``grpo.local.preflight.checked_tasks`` checks the run's verifiers against their
   routes: each endpoint's ``Describe``, each service's declared task types);
2. ``grpo.local.cluster.LocalCluster``: Redis (embedded unless
   ``redis_url``/``$REDIS_URL``), one settings YAML per service in ``<run_dir>/services/``, the
   verifiers, assembler, learner and rollout worker(s) as ``grpo serve`` processes on loopback
   ports (one torch thread each), healthy before anything is fed;
3. the run driver, launched like any other service (``grpo serve driver``,
   ``grpo.services.driver.service``; ``LocalCluster.start_driver``): the held-out
   accuracy of the warm-started policy (greedy, services idle) -> ``sft_accuracy``; prompts
   fed with backpressure until ``budget.steps`` learner steps, ``budget.generated_tokens`` or
   ``budget.wall_clock_s``, evaluating the latest published policy every ``eval.every_steps``
   steps; the last published policy -> ``final_accuracy``; ``summary.json``; exit 0.

This process supervises (``LocalCluster.check``: a dead service, the driver included, is
restarted; a restarted driver resumes from what it recorded in Redis), shows live progress
from the learner, the assembler and the driver's record, and once the driver is done stops the
cluster and adds the cluster's part to the summary (leftover processes, accounting, restarts,
deaths, outages). Ctrl-C/SIGTERM: the driver is stopped first (it still evaluates the last
policy and writes the summary, ``stop_reason: interrupted``), then every service. SFT stays a
separate step for a cluster (``grpo model sft``); here it runs before the services start.

One run per run dir, for its whole life: ``run_local`` holds the folder's lock
(``grpo.local.rundir.RunDirLock``, released by the kernel on death) and keeps the run's
identity in ``run.json`` (its id, which names the Redis namespace, and the digest of its data
and held-out ids, checked by ``--resume``).

A summary for every ending: however the run ends (the driver done, Ctrl-C, a service that
failed for good, Redis that cannot come back, a failed start), ``summary.json`` is written
(``grpo.services.driver.summary.RunSummary``), and everything it reads from Redis is read
before Redis stops: the accounting (after the services stopped, so it is exact), the
evaluations the driver recorded, the last published policy. A failed run's summary has
``stop_reason: error``, the failing service, its last error and a named cause when one is
recognised (a full disk, Redis out of memory), with every restart, death and stall.

Run directory: ``config.yaml`` (resolved RunConfig), ``run.json``, ``run.lock``,
``services/*.yaml``, ``logs/*.log``,
``model/`` (initial and SFT weights), ``redis/`` (the embedded Redis's append-only file), the
learner's ``metrics.jsonl``, ``groups.jsonl``, ``checkpoints/`` and ``weights/``, the
assembler's ``assembler_groups.jsonl``, ``eval.jsonl`` and ``summary.json``. The summary is
written also when the run fails (``stop_reason: error`` and ``failure``), with the accounting
of ``grpo.services.runtime.accounting.run_accounting``, restarts per service and outage seconds
per dependency per service (summed from the services' logs, ``LocalCluster.outages``).

``run_local(..., resume=True)`` (``grpo run --resume RUN_DIR``) continues a stopped or killed
run: no new model, no SFT; the services start from the run's policy folder, the embedded Redis
reloads ``redis/``, the learner restores its newest checkpoint and every stream consumer takes
over what was pending. A run stopped before GRPO started (during SFT or the services' start)
prepares its policy first: SFT continues from its newest intact checkpoint
(``<run_dir>/model/sft-checkpoints``), a finished SFT (``model/sft.done.json``) is not run
again, then GRPO starts as in a new run. ``resume_policy`` refuses clearly when the run cannot
be resumed.

A run that already ended on its budget is not restarted (:func:`ended_run`): its
``summary.json`` names a budget's stop reason (``steps``, ``generated_tokens``,
``wall_clock``, ``exhausted``) and the config of the resume (its ``config.yaml`` with the
overrides of the command line) leaves a budget the run already reached. ``--resume`` then
says so (stop reason, steps, what to raise) and exits 0 without starting anything. Raising
every budget the run reached (``--steps 6`` or ``--set budget.steps=6`` after 3 steps; a
larger ``budget.wall_clock_s`` than its ``grpo_wall_clock_s``, a
``budget.generated_tokens`` at least one job's worst case above its generated tokens
(``grpo.services.driver.token_budget``: below that no job fits), or 0) resumes it and
trains on to the new budget. A run that ran out of data (``exhausted``) cannot be extended. A
run that stopped on an interrupt or an error, or wrote no summary (killed), always resumes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import grpc
import yaml

from grpo.errors import FailedPreconditionError, GrpoError, UnavailableError
from grpo.local.cluster import LocalCluster
from grpo.local.policy import prepare_policy, sft_done
from grpo.local.preflight import checked_tasks
from grpo.local.processes import ServiceFailedError, disk_full, last_error, named_cause
from grpo.local.rundir import (
    DiskReserve,
    RunDirLock,
    RunIdentity,
    RunRefusedError,
    claim_run_dir,
)
from grpo.services.driver.driver import POLL_S, DriverRecord, Progress, RunDriver
from grpo.services.driver.summary import Death, Failure, Outages, RunSummary, Stall
from grpo.services.driver.token_budget import TokenCounts, TokenGate
from grpo.services.runtime.accounting import RunAccounting, read_run_accounting
from grpo.services.runtime.config import mask_secrets
from grpo.services.runtime.redis_server import resolve_redis_url
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import RunTasks
from grpo.v1 import common_pb2

__all__ = [
    "BUDGET_STOPS",
    "EndedRun",
    "default_run_dir",
    "ended_run",
    "resume_policy",
    "run_local",
    "write_run_config",
]

log = logging.getLogger(__name__)

STILL_STALLED_S = 10.0
"""A service silent on its health check this long when the run ends is listed in the
summary's ``stalls`` (not restarted)."""


def default_run_dir(config: RunConfig, root: Path = Path("runs")) -> Path:
    """``runs/<UTC timestamp>-<config name>``."""
    return root / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{config.name}"


def write_run_config(config: RunConfig, run_dir: Path) -> Path:
    """Create ``run_dir`` and write the resolved config to ``<run_dir>/config.yaml``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return path


BUDGET_STOPS = ("steps", "generated_tokens", "wall_clock", "exhausted")
"""Stop reasons of a run that ended on its budget (or its data): a resume restarts it only
when the budget it reached was raised (:func:`ended_run`)."""


@dataclass(frozen=True)
class EndedRun:
    """A run that already ended on its budget, as :func:`ended_run` finds it.

    Attributes:
        summary: its ``summary.json``.
        reached: the budgets of the resume's config that the run has already reached, each
            with how to raise it (``budget.steps 3 (reached: 3 steps; --steps N > 3)``).
    """

    summary: RunSummary
    reached: tuple[str, ...]

    def message(self, run_dir: Path) -> str:
        """One line: the run ended, its stop reason and steps, and what to raise."""
        s = self.summary
        return (
            f"run {run_dir} already ended (stop reason {s.stop_reason}, {s.steps} steps, "
            f"final accuracy {s.final_accuracy:.3f}; {run_dir / 'summary.json'}); nothing "
            f"started. To train on, raise what it reached: {'; '.join(self.reached)}"
        )


def ended_run(config: RunConfig, run_dir: Path, steps: int | None = None) -> EndedRun | None:
    """Whether a resume of ``run_dir`` under ``config`` would restart a run that already
    ended on its budget (module docstring).

    Args:
        config: the resume's config (the run's ``config.yaml`` with the overrides).
        run_dir: the run's folder; steps: the ``--steps`` of the resume (None: budget.steps).

    Returns:
        An :class:`EndedRun` when ``summary.json`` names a budget's stop reason
        (:data:`BUDGET_STOPS`) and a budget of ``config`` is already reached; None when the
        run may be resumed (no summary, an interrupt or an error, or every budget it reached
        raised).
    """
    from grpo.errors import GrpoError

    try:
        summary = RunSummary.read(run_dir / "summary.json")
    except (GrpoError, OSError, ValueError, KeyError, TypeError):
        return None  # no summary (killed) or unreadable: resume as before
    if summary.stop_reason not in BUDGET_STOPS:
        return None
    budget = config.budget
    target = steps or budget.steps
    tokens = summary.accounting.generated_tokens
    spent = summary.grpo_wall_clock_s
    reached = []
    if summary.stop_reason == "exhausted":
        reached.append("nothing: its data ran out (start a new run)")
    if target <= summary.steps:
        reached.append(f"budget.steps {target} (--steps N with N > {summary.steps})")
    gate = TokenGate.of(config)  # spent when no further job fits (token_budget)
    if gate.spent(TokenCounts(counted=tokens, issued_jobs=0, received=0, late=0, closed=0)):
        reached.append(
            f"budget.generated_tokens {budget.generated_tokens} (--set "
            f"budget.generated_tokens=N with N >= {tokens + gate.job_worst_case}: "
            f"{tokens} generated and one job's worst case {gate.job_worst_case}, or 0 for no "
            "bound)"
        )
    if budget.wall_clock_s <= spent:
        reached.append(
            f"budget.wall_clock_s {budget.wall_clock_s:g} (--set budget.wall_clock_s=S with "
            f"S > {spent:g}, the GRPO seconds it spent)"
        )
    return EndedRun(summary, tuple(reached)) if reached else None


def resume_policy(config: RunConfig, run_dir: Path) -> Path | str | None:
    """The policy folder a resumed run starts its services from, after checking the run dir;
    None when the run stopped before GRPO started (no Redis state, no learner checkpoint, or
    SFT unfinished): the resume prepares the policy then, continuing SFT from its newest
    checkpoint (``grpo.local.policy``), and starts GRPO as a new run does.

    Raises:
        RunRefusedError: no ``config.yaml``; GRPO trained (summary.json) but no state is
            left (neither an embedded Redis append-only file nor a learner checkpoint); or
            the policy folder is gone though the learner checkpointed; the message says which.
    """
    if not (run_dir / "config.yaml").is_file():
        raise RunRefusedError(f"cannot resume {run_dir}: it has no config.yaml")
    has_redis = (run_dir / "redis" / "appendonlydir").is_dir() or bool(config.redis_url)
    has_ckpt = any((run_dir / "checkpoints").glob("step-*"))
    sft = config.model.sft.enabled
    if sft and not sft_done(run_dir) and (run_dir / "model" / "sft-checkpoints").is_dir():
        return None  # SFT began (it made its checkpoint folder) and never finished
    if not has_redis and not has_ckpt:
        if (trained := _summary_steps(run_dir)) > 0:
            raise RunRefusedError(
                f"cannot resume {run_dir}: it trained {trained} GRPO steps (summary.json) but "
                "has no Redis state (redis/appendonlydir) and no learner checkpoint left; start "
                f"a new run with another --run-dir, or delete {run_dir} first"
            )
        return None  # stopped before GRPO trained: prepare the policy, start GRPO
    if config.model.path is not None and not sft:
        path = Path(config.model.path)
        return path.resolve() if path.exists() else config.model.path
    folder = run_dir / "model" / ("sft" if sft else "init")
    if not (folder / "config.json").is_file():
        if not has_ckpt:
            return None  # not prepared yet (a shared Redis): prepare it, as a new run does
        raise RunRefusedError(
            f"cannot resume {run_dir}: the policy folder {folder} is missing (the run stopped "
            "before its model was prepared); start a new run instead"
        )
    return folder


def _summary_steps(run_dir: Path) -> int:
    """The GRPO steps ``run_dir``'s summary.json records (0 without a readable one)."""
    try:
        return int(json.loads((run_dir / "summary.json").read_text())["steps"])
    except (OSError, ValueError, KeyError, TypeError):
        return 0


def run_local(
    config: RunConfig,
    run_dir: Path,
    *,
    steps: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    log_fn: Callable[[str], None] | None = None,
    resume: bool = False,
    lock: RunDirLock | None = None,
) -> RunSummary:
    """The whole job (see the module docstring); returns the summary written to disk.

    Args:
        config: the run; run_dir: output folder (created); steps: learner steps (default
        ``budget.steps``); on_progress: called each poll; log_fn: human-readable milestones;
        resume: continue the run in ``run_dir`` (``resume_policy``) instead of starting one;
        a run that already ended on its budget, none of it raised (:func:`ended_run`), is
        not started: its summary is returned as read;
        lock: the run dir's lock when the caller took it already (else taken here).

    Raises:
        RunRefusedError: the run must not start (the folder is no folder, is in use by
            another process, already holds a run (a new run), cannot be resumed, its data
            changed, or its Redis evicts keys); nothing was started or written then.
        GrpoError (and the errors of ``load_run_tasks``): a new run's data or verifiers
            refused before its folder was created (nothing is left, as with ``grpo run``).
        GrpoError: the policy could not be prepared, a service failed to start or died for
            good, Redis could not come back (summary.json is written first, with the failure).
        KeyboardInterrupt: Ctrl-C/SIGTERM before GRPO started (SFT, service start: SFT wrote
            its checkpoint, ``--resume`` continues it); after
            that an interrupt stops the driver, which evaluates the final policy and writes
            the summary with ``stop_reason: interrupted``.
    """
    say = log_fn or log.info
    started = time.time()
    run_dir = run_dir.resolve()
    tasks: RunTasks | None = None
    if lock is None and not resume:
        # A new run is checked before its folder exists, as grpo run checks it: a refusal
        # (a config whose data or verifiers fail) leaves nothing behind.
        tasks = checked_tasks(config, say)
    held = lock if lock is not None else claim_run_dir(run_dir, resume=resume)
    try:
        if resume and (ended := ended_run(config, run_dir, steps)) is not None:
            say(ended.message(run_dir))  # ended on its budget, none raised: nothing starts
            return ended.summary
        if tasks is None:
            tasks = checked_tasks(config, say)  # the verifiers cover their routes (issue 29)
        if resume:
            resumed = resume_policy(config, run_dir)
            shared = bool(resolve_redis_url(config.redis_url))
            identity = RunIdentity.resume(config, run_dir, tasks, shared_redis=shared)
            if resumed is None:
                say(
                    f"resuming {run_dir} (run {identity.run_id}): it stopped before GRPO "
                    "started; preparing its policy (SFT continues from its newest checkpoint, "
                    "a finished SFT is kept)"
                )
                model = _prepared_policy(config, run_dir, tasks, identity, say, started)
            else:
                model = resumed
                say(f"resuming {run_dir} (run {identity.run_id}) from {model}")
        else:
            write_run_config(config, run_dir)
            identity = RunIdentity.create(config, run_dir, tasks)
            model = _prepared_policy(config, run_dir, tasks, identity, say, started)
        (run_dir / "summary.json").unlink(missing_ok=True)  # the driver writes the new one
        reserve = DiskReserve.take(run_dir)  # room for the summary when the disk fills up
        run = _LocalRun(config, run_dir, identity, tasks, say, started=started, resume=resume)
        run.reserve = reserve
        return run.run(model, steps, on_progress)
    finally:
        DiskReserve(run_dir).release()
        if lock is None:
            held.release()


def _prepared_policy(
    config: RunConfig,
    run_dir: Path,
    tasks: RunTasks,
    identity: RunIdentity,
    say: Callable[[str], None],
    started: float,
) -> Path | str:
    """``prepare_policy`` of a new run whose folder is written: a failure (a model that
    cannot be loaded, SFT that fails) writes ``summary.json`` (``stop_reason: error``, the
    failure with its cause) before it is re-raised, as every later failure does (an error
    that is no ``GrpoError``, e.g. a damaged weights file, as ``FailedPreconditionError``).
    An interrupt (Ctrl-C during SFT) writes none."""
    try:
        return prepare_policy(config, run_dir, tasks, say)
    except Exception as exc:
        error = f"{type(exc).__name__}: {exc}"
        text = f"preparing the policy (model, SFT) failed: {error}"
        RunSummary(
            config=config.name, stop_reason="error", sft_accuracy=float("nan"),
            final_accuracy=float("nan"), steps=0, final_policy_version=0, final_policy_step=0,
            accounting=RunAccounting.from_stats(Progress().stats), grpo_wall_clock_s=0.0,
            wall_clock_s=round(time.time() - started, 1),
            failure=Failure(text[:4000], None, named_cause(str(exc)), error),
            run_id=identity.run_id, resumed=False,
        ).write(run_dir / "summary.json")  # fmt: skip
        say(f"run failed: {text}")
        if isinstance(exc, GrpoError):
            raise
        raise FailedPreconditionError(text) from exc  # one line, as every run failure


class _LocalRun:
    """One ``run_local`` after its preparation: the cluster, the wait, the summary."""

    def __init__(
        self,
        config: RunConfig,
        run_dir: Path,
        identity: RunIdentity,
        tasks: RunTasks,
        say: Callable[[str], None],
        *,
        started: float,
        resume: bool,
    ) -> None:
        self.config = config
        self.run_dir = run_dir
        self.identity = identity
        self.tasks = tasks
        self.say = say
        self.started = started
        self.resume = resume
        self.cluster = LocalCluster(config, run_dir, namespace=identity.namespace, log_fn=say)
        self.monitor: RunDriver | None = None
        self.reserve: DiskReserve | None = None

    def run(
        self, model: Path | str, steps: int | None, on_progress: Callable[[Progress], None] | None
    ) -> RunSummary:
        """Start Redis, the services and the driver, supervise until the driver is done,
        then stop everything and write the summary (module docstring).

        Raises:
            RunRefusedError: Redis would evict keys (nothing started besides Redis).
            GrpoError: the run failed (after the summary is written).
        """
        cluster = self.cluster
        driving = interrupted = False
        failure: BaseException | None = None
        shown: set[str] = set()
        try:
            cluster.start_redis()
            assert cluster.streams is not None
            # Reads what the driver process records and the services report (it feeds nothing).
            self.monitor = RunDriver(
                self.config, self.tasks, streams=cluster.streams, names=cluster.names,
                endpoints=cluster, out_dir=self.run_dir, on_progress=on_progress,
                log_fn=self.say, record=DriverRecord(cluster.client, cluster.names),
            )  # fmt: skip
            cluster.start(model, self.tasks.task_type)
            cluster.start_driver(model, steps)
            driving = True
            while not cluster.driver_finished():
                cluster.check()
                self._check_redis_past_wall_clock()
                _show(self.monitor, shown, self.say)
                time.sleep(POLL_S)
        except RunRefusedError:
            cluster.stop()
            raise
        except KeyboardInterrupt:
            if not driving:
                cluster.stop()
                raise
            interrupted = True
            self.say("interrupted: the driver evaluates the last policy, then services stop")
        except Exception as exc:  # the summary is written, then the error re-raised
            failure = exc
            self.say(f"run failed: {exc}")
        if interrupted:
            failure = self._stop_driver()
        summary = self._finish(failure, interrupted, shown)
        if failure is not None:
            raise failure
        return summary

    def _stop_driver(self) -> BaseException | None:
        """Ctrl-C: the driver evaluates the last policy and writes the summary; its failure
        (non-zero exit) is the run's."""
        code = self.cluster.stop_driver()
        if not code:
            return None
        failure = ServiceFailedError(
            f"the run driver failed while stopping (exit code {code}); see "
            f"{self.run_dir / 'logs' / 'driver.log'}",
            service="driver",
        )
        self.say(f"run failed: {failure}")
        return failure

    def _check_redis_past_wall_clock(self) -> None:
        """End the run once it is past ``budget.wall_clock_s`` (+ ``stop_grace_s``; counted
        from the start of ``grpo run``, SFT included) while its Redis answers nothing (for
        ``supervision.redis_reply_timeout_s`` or more): the driver cannot finish without
        Redis, and a Redis this run does not restart (an external one, or ``stall_s`` 0) may
        never answer again. The summary then names Redis (``failed_service: redis``).

        Raises:
            UnavailableError: past the wall clock with Redis silent.
        """
        budget, cluster = self.config.budget, self.cluster
        silent = cluster.redis_silent_s()
        past = time.time() - self.started - budget.wall_clock_s - budget.stop_grace_s
        if past > 0 and silent >= self.config.supervision.redis_reply_timeout_s:
            raise UnavailableError(
                f"Redis at {mask_secrets(cluster.redis_url or '')} not answering ({silent:.0f} s "
                f"without a reply) and the run is past budget.wall_clock_s "
                f"{budget.wall_clock_s:g} s: ending it"
            )

    def _finish(
        self, failure: BaseException | None, interrupted: bool, shown: set[str]
    ) -> RunSummary:
        """Stop the services, read what the summary needs while Redis still runs, stop
        Redis, write and return the summary."""
        cluster, monitor = self.cluster, self.monitor
        still = cluster.supervisor.silent(STILL_STALLED_S)
        if cluster.redis_silent_s() >= STILL_STALLED_S:  # a stopped Redis, never restarted
            still["redis"] = round(cluster.redis_silent_s(), 1)
        if monitor is not None:
            with contextlib.suppress(Exception):
                _show(monitor, shown, self.say)
        # The services stop first, so the accounting reads a pipeline at rest (nothing
        # produced, recorded or acknowledged meanwhile); Redis stops after every read.
        cluster.stop_services()
        summary = self._summary(failure, interrupted, still)
        left = cluster.stop()
        summary = summary.replace(
            leftover_processes=tuple(left), wall_clock_s=round(time.time() - self.started, 1)
        )
        if self.reserve is not None:  # its room is the summary's (a full disk included)
            self.reserve.release()
        summary.write(self.run_dir / "summary.json")
        for line in summary.warnings:
            self.say(f"warning: {line}")
        return summary

    def _summary(
        self, failure: BaseException | None, interrupted: bool, still: dict[str, float]
    ) -> RunSummary:
        """The summary, from the driver's file (a run it completed) or the record in Redis
        (any other ending), with what only ``grpo run`` knows; read before Redis stops."""
        cluster, monitor = self.cluster, self.monitor
        path = self.run_dir / "summary.json"
        last_policy = None
        if monitor is not None:
            with contextlib.suppress(Exception):
                last_policy = monitor.published_policy()
        if failure is None and path.is_file():
            base = RunSummary.read(path)
        else:  # the driver wrote none (a failure, or it was killed): what the record holds
            base = self._from_record(failure, interrupted, last_policy)
        stalls = [Stall(n, s, True) for n, s in cluster.supervisor.stalls]
        stalls += [Stall(n, s, False) for n, s in still.items()]
        return base.replace(
            accounting=self._accounting(base.accounting),
            outages=Outages(cluster.outages(end=time.time()), "service logs"),
            restarts=dict(cluster.restarts),
            deaths=tuple(Death(d.name, d.reason) for d in cluster.supervisor.deaths),
            stalls=tuple(stalls),
            failure=_failure(failure, cluster) if failure is not None else None,
            run_id=self.identity.run_id,
            resumed=self.resume,
            last_published_policy_version=(
                int(last_policy.policy_version) if last_policy is not None else None
            ),
            last_published_step=int(last_policy.step) if last_policy is not None else None,
            warnings=tuple(cluster.warnings),
        )

    def _from_record(
        self,
        failure: BaseException | None,
        interrupted: bool,
        last_policy: common_pb2.PolicyWeights | None,
    ) -> RunSummary:
        """A summary for a run the driver did not complete, from what its record holds."""
        monitor = self.monitor
        stop_reason = "interrupted" if failure is None else "error"
        if monitor is None:  # failed before the driver's view existed
            return RunSummary(
                config=self.config.name, stop_reason=stop_reason, sft_accuracy=float("nan"),
                final_accuracy=float("nan"), steps=0, final_policy_version=0,
                final_policy_step=0, accounting=RunAccounting.from_stats(Progress().stats),
                grpo_wall_clock_s=0.0, wall_clock_s=0.0,
            )  # fmt: skip
        sft = None
        with contextlib.suppress(Exception):
            sft = monitor.record.evaluation("sft") if monitor.record is not None else None
        return monitor.summary(
            stop_reason=stop_reason,
            sft_accuracy=float(sft["accuracy"]) if sft else float("nan"),
            final_accuracy=float("nan"),
            final_step=monitor.progress.step,
            policy=last_policy,
            started=self.started,
            write=False,
        )

    def _accounting(self, fallback: RunAccounting) -> RunAccounting:
        """The accounting read from Redis now (services stopped: exact); ``fallback`` (the
        counters of the last poll, produced/queued unknown) when Redis does not answer."""
        cluster = self.cluster
        try:
            return read_run_accounting(
                cluster.client,
                cluster.namespace,
                cluster.names.rollouts,
                self.config.assembler.consumer_group,
            )
        except Exception as exc:  # the summary is still written
            log.warning("accounting for the summary: Redis did not answer (%s)", exc)
            stats = self.monitor.progress.stats if self.monitor is not None else None
            return RunAccounting.from_stats(stats) if stats is not None else fallback


def _failure(exc: BaseException, cluster: LocalCluster) -> Failure:
    """What the summary says about a failure: its text, the failing service, that
    service's last error and the named cause (``named_cause``), when they are known."""
    service = getattr(exc, "service", None)
    death = getattr(exc, "death", None)
    if isinstance(exc, UnavailableError) and service is None and "Redis" in str(exc):
        service = "redis"
    error = death.last_error if death is not None and death.last_error else None
    if error is None and service is not None and service in cluster.supervisor.services:
        error = last_error(cluster.supervisor.services[service].log_tail(3000)) or None
    if error is None and isinstance(exc, ServiceFailedError):
        error = death.reason if death is not None else None
    cause = (
        named_cause(error or "")
        or named_cause(str(exc).split("\n", 1)[0])
        or (death.cause if death is not None else None)
        or disk_full(cluster.run_dir)
    )
    silent = cluster.redis_silent_s()
    if cause is None and silent >= STILL_STALLED_S:
        # The service that failed waited on Redis, which answers nothing (stopped, wedged;
        # supervision.stall_s 0 never restarts it): Redis is the culprit.
        cause = f"Redis not answering ({silent:.0f} s without a reply)"
        service = "redis"
    return Failure(str(exc)[:4000], service, cause, error)


_WARNED = "<no-signal warning>"
"""Entry of ``_show``'s ``shown`` set once the no-signal warning was given."""


def _show(monitor: RunDriver, shown: set[str], say: Callable[[str], None]) -> None:
    """Refresh the progress from the services and the driver's record (a restarting service
    answers nothing for a moment: the display keeps its last values); log each evaluation the
    driver recorded since the last call (labels in ``shown`` are not logged again) and, once,
    the warning that no closed group was kept (``RunDriver.warn_if_no_signal``)."""
    rows = monitor.recorded_evals()
    for row in rows:
        if row["label"] not in shown:
            shown.add(row["label"])
            say(
                f"held-out accuracy ({row['label']}): {row['accuracy']:.3f} "
                f"({row['correct']}/{row['total']})"
            )
    if rows:  # the newest evaluation, the final one once it is recorded
        monitor.progress.heldout_accuracy = float(rows[-1]["accuracy"])
    with contextlib.suppress(grpc.RpcError):
        progress = monitor.poll()
        if _WARNED not in shown and monitor.warn_if_no_signal(progress.stats):
            shown.add(_WARNED)
