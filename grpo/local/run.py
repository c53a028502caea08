"""``grpo run``: the whole pipeline on one machine, composed of three parts.

1. ``grpo.local.policy.prepare_policy``: a fresh tiny model (``model.path`` unset)
   and the SFT warm start, in this process before any service starts (so it may use every
   core);
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

Run directory: ``config.yaml`` (resolved RunConfig), ``services/*.yaml``, ``logs/*.log``,
``model/`` (initial and SFT weights), ``redis/`` (the embedded Redis's append-only file), the
learner's ``metrics.jsonl``, ``groups.jsonl``, ``checkpoints/`` and ``weights/``, the
assembler's ``assembler_groups.jsonl``, ``eval.jsonl`` and ``summary.json``. The summary is
written also when the run fails (``stop_reason: error`` and ``failure``), with the accounting
of ``grpo.services.runtime.accounting.run_accounting``, restarts per service and outage seconds
per dependency per service (summed from the services' logs, ``LocalCluster.outages``).

``run_local(..., resume=True)`` (``grpo run --resume RUN_DIR``) continues a stopped or killed
run: no new model, no SFT; the services start from the run's policy folder, the embedded Redis
reloads ``redis/``, the learner restores its newest checkpoint and every stream consumer takes
over what was pending. ``resume_policy`` refuses clearly when the run cannot be resumed.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import grpc
import yaml

from grpo.errors import FailedPreconditionError, InternalError
from grpo.local.cluster import LocalCluster
from grpo.local.policy import prepare_policy
from grpo.services.driver.driver import POLL_S, DriverRecord, Progress, RunDriver
from grpo.services.runtime.accounting import read_accounting, run_accounting
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import load_run_tasks
from grpo.v1 import common_pb2

__all__ = ["default_run_dir", "resume_policy", "run_local", "write_run_config"]

log = logging.getLogger(__name__)


def default_run_dir(config: RunConfig, root: Path = Path("runs")) -> Path:
    """``runs/<UTC timestamp>-<config name>``."""
    return root / f"{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}-{config.name}"


def write_run_config(config: RunConfig, run_dir: Path) -> Path:
    """Create ``run_dir`` and write the resolved config to ``<run_dir>/config.yaml``."""
    run_dir.mkdir(parents=True, exist_ok=True)
    path = run_dir / "config.yaml"
    path.write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    return path


def resume_policy(config: RunConfig, run_dir: Path) -> Path | str:
    """The policy folder a resumed run starts its services from, after checking the run dir.

    Raises:
        FailedPreconditionError: no ``config.yaml``, no state to resume (neither an embedded
            Redis append-only file nor a learner checkpoint), or the policy folder is gone;
            the message says which.
    """
    if not (run_dir / "config.yaml").is_file():
        raise FailedPreconditionError(f"cannot resume {run_dir}: it has no config.yaml")
    has_redis = (run_dir / "redis" / "appendonlydir").is_dir() or bool(config.redis_url)
    has_ckpt = any((run_dir / "checkpoints").glob("step-*"))
    if not has_redis and not has_ckpt:
        raise FailedPreconditionError(
            f"cannot resume {run_dir}: no Redis state (redis/appendonlydir) and no learner "
            "checkpoint; start a new run instead"
        )
    if config.model.path is not None:
        path = Path(config.model.path)
        return path.resolve() if path.exists() else config.model.path
    folder = run_dir / "model" / ("sft" if config.model.sft.enabled else "init")
    if not (folder / "config.json").is_file():
        raise FailedPreconditionError(
            f"cannot resume {run_dir}: the policy folder {folder} is missing (the run stopped "
            "before its model was prepared); start a new run instead"
        )
    return folder


def run_local(
    config: RunConfig,
    run_dir: Path,
    *,
    steps: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    log_fn: Callable[[str], None] | None = None,
    resume: bool = False,
) -> dict[str, Any]:
    """The whole job (see the module docstring); returns the summary written to disk.

    Args:
        config: the run; run_dir: output folder (created); steps: learner steps (default
        ``budget.steps``); on_progress: called each poll; log_fn: human-readable milestones;
        resume: continue the run in ``run_dir`` (``resume_policy``) instead of starting one.

    Raises:
        GrpoError: a bad config, a run that cannot be resumed, a service that failed to start
            or died more often than ``supervision`` allows (summary.json is written first).
        KeyboardInterrupt: Ctrl-C/SIGTERM before GRPO started (SFT, service start); after
            that an interrupt stops the driver, which evaluates the final policy and writes
            the summary with ``stop_reason: interrupted``.
    """
    say = log_fn or log.info
    started = time.time()
    run_dir = run_dir.resolve()
    tasks = load_run_tasks(config)
    if resume:
        model = resume_policy(config, run_dir)
        say(f"resuming {run_dir} from {model}")
    else:
        write_run_config(config, run_dir)
        model = prepare_policy(config, run_dir, tasks, say)
    (run_dir / "summary.json").unlink(missing_ok=True)  # the driver writes the new one
    cluster = LocalCluster(config, run_dir, log_fn=say)
    monitor: RunDriver | None = None
    driving = interrupted = False
    failure: BaseException | None = None
    extra: dict[str, Any] = {}
    last_policy: common_pb2.PolicyWeights | None = None
    sft_record: dict[str, Any] | None = None
    shown: set[str] = set()
    try:
        cluster.start_redis()
        assert cluster.streams is not None
        # Reads what the driver process records and the services report (it feeds nothing).
        monitor = RunDriver(
            config,
            tasks,
            streams=cluster.streams,
            names=cluster.names,
            endpoints=cluster,
            out_dir=run_dir,
            on_progress=on_progress,
            log_fn=say,
            record=DriverRecord(cluster.client, cluster.names),
        )
        cluster.start(model, tasks.task_type)
        cluster.start_driver(model, steps)
        driving = True
        while not cluster.driver_finished():
            cluster.check()
            _show(monitor, shown, say)
            time.sleep(POLL_S)
    except KeyboardInterrupt:
        if not driving:
            cluster.stop()
            raise
        interrupted = True
        say("interrupted: the driver evaluates the last policy, then services stop")
    except Exception as exc:  # the summary is written, then the error re-raised
        if monitor is None:
            cluster.stop()
            raise
        failure = exc
        say(f"run failed: {exc}")
    finally:
        if interrupted:
            code = cluster.stop_driver()
            if code:  # the final evaluation or the summary failed: the run did not complete
                failure = InternalError(
                    f"the run driver failed while stopping (exit code {code}); see "
                    f"{run_dir / 'logs' / 'driver.log'}"
                )
                say(f"run failed: {failure}")
        if monitor is not None:
            _show(monitor, shown, say)
        # The services stop first, so the accounting reads a pipeline at rest (nothing
        # produced, recorded or acknowledged meanwhile); Redis stops after the reads.
        cluster.stop_services()
        if monitor is not None:
            extra = _accounting(cluster, monitor)
            with contextlib.suppress(Exception):  # for a summary the driver did not write
                last_policy = monitor.published_policy()
                if monitor.record is not None:
                    sft_record = monitor.record.evaluation("sft")
    left = cluster.stop()
    assert monitor is not None
    path = run_dir / "summary.json"
    if failure is None and path.is_file():
        summary = json.loads(path.read_text())
    else:  # the driver wrote none (a failure, or it was killed): what the record holds
        sft = sft_record
        summary = monitor.summary(
            stop_reason="interrupted" if failure is None else "error",
            sft_accuracy=float(sft["accuracy"]) if sft else float("nan"),
            final_accuracy=float("nan"),
            final_step=monitor.progress.step,
            policy=last_policy,
            started=started,
            leftover_processes=left,
        )
        if failure is not None:
            extra["failure"] = str(failure)[:4000]
    summary.update(extra)
    if last_policy is not None:  # the learner may have gone on during a final evaluation
        summary["last_published_policy_version"] = int(last_policy.policy_version)
        summary["last_published_step"] = int(last_policy.step)
    summary["leftover_processes"] = left
    summary["wall_clock_s"] = round(time.time() - started, 1)
    summary["resumed"] = resume
    path.write_text(json.dumps(summary, indent=2) + "\n")
    if failure is not None:
        raise failure
    return summary


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


def _accounting(cluster: LocalCluster, driver: RunDriver) -> dict[str, Any]:
    """Accounting, restarts and outages for the summary, read after the services stopped and
    before Redis does: the assembler's counters, rollouts produced and queued straight from
    Redis (``read_accounting``, ``run_accounting``; when Redis does not answer, the counters
    of the last poll and None for produced, queued and unaccounted), restarts and deaths per
    service, and ``outage_s`` = seconds per dependency per service from the services' logs
    (``LocalCluster.outages``: every process of a service, restarts included)."""
    stats = driver.progress.stats
    produced = queued = None
    try:
        stats, produced, queued = read_accounting(
            cluster.client,
            cluster.namespace,
            cluster.names.rollouts,
            cluster.config.assembler.consumer_group,
        )
    except Exception as exc:  # the summary is still written
        log.warning("accounting for the summary: Redis did not answer (%s)", exc)
    return {
        "groups_opened": stats.groups_opened,
        "groups_pending": stats.groups_pending,
        "groups_closed_short": stats.groups_closed_short,
        "accounting": run_accounting(stats, produced, queued),
        "restarts": dict(cluster.restarts),
        "deaths": [{"service": d.name, "reason": d.reason} for d in cluster.supervisor.deaths],
        "outage_s": cluster.outages(end=time.time()),
        "outage_source": "service logs",
    }
