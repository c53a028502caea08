"""``grpo run``: the whole pipeline on one machine, composed of three parts.

1. ``grpo.services.pipeline.policy.prepare_policy``: a fresh tiny model (``model.path`` unset)
   and the SFT warm start, in this process before any service starts (so it may use every
   core);
2. ``grpo.services.pipeline.cluster.LocalCluster``: Redis (embedded unless
   ``redis_url``/``$REDIS_URL``), one settings YAML per service in ``<run_dir>/services/``, the
   verifiers, assembler, learner and rollout worker(s) as ``grpo serve`` processes on loopback
   ports (one torch thread each), healthy before anything is fed;
3. ``grpo.services.pipeline.driver.RunDriver``: the held-out accuracy of the warm-started
   policy (greedy, services idle) -> ``sft_accuracy``; prompts fed with backpressure and live
   progress until ``budget.steps`` learner steps, ``budget.generated_tokens`` or
   ``budget.wall_clock_s`` (or Ctrl-C), evaluating the latest published policy every
   ``eval.every_steps`` steps; then, once the cluster has stopped (no process left), the last
   published policy -> ``final_accuracy`` and ``summary.json``.

Run directory: ``config.yaml`` (resolved RunConfig), ``services/*.yaml``, ``logs/*.log``,
``model/`` (initial and SFT weights), ``redis/`` (the embedded Redis's append-only file), the
learner's ``metrics.jsonl``, ``groups.jsonl``, ``checkpoints/`` and ``weights/``, the
assembler's ``assembler_groups.jsonl``, ``eval.jsonl`` and ``summary.json``. The summary is
written also when the run fails (``stop_reason: error`` and ``failure``), with the accounting
of ``grpo.services.assembler.stats.run_accounting``, restarts per service and outage seconds
per dependency.

``run_local(..., resume=True)`` (``grpo run --resume RUN_DIR``) continues a stopped or killed
run: no new model, no SFT; the services start from the run's policy folder, the embedded Redis
reloads ``redis/``, the learner restores its newest checkpoint and every stream consumer takes
over what was pending. ``resume_policy`` refuses clearly when the run cannot be resumed.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from grpo.errors import FailedPreconditionError
from grpo.services.assembler.stats import run_accounting
from grpo.services.pipeline.cluster import LocalCluster
from grpo.services.pipeline.config import RunConfig
from grpo.services.pipeline.driver import Progress, RunDriver
from grpo.services.pipeline.policy import prepare_policy
from grpo.services.pipeline.tasks import load_run_tasks

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


def _sft_accuracy(run_dir: Path) -> float:
    """The ``sft`` evaluation recorded in ``eval.jsonl`` by the first run (nan if none)."""
    import json

    path = run_dir / "eval.jsonl"
    for line in path.read_text().splitlines() if path.is_file() else []:
        row = json.loads(line)
        if row.get("label") == "sft":
            return float(row["accuracy"])
    return float("nan")


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
        KeyboardInterrupt: Ctrl-C/SIGTERM before GRPO started (SFT); after that an interrupt
            ends training and the summary says ``stop_reason: interrupted``.
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
    cluster = LocalCluster(config, run_dir, log_fn=say)
    driver: RunDriver | None = None
    training = False
    stop_reason = "error"
    sft_accuracy = _sft_accuracy(run_dir) if resume else float("nan")
    policy = None
    final_step = 0
    failure: BaseException | None = None
    extra: dict[str, Any] = {}
    try:
        cluster.start_redis()
        assert cluster.streams is not None
        driver = RunDriver(
            config,
            tasks,
            streams=cluster.streams,
            names=cluster.names,
            endpoints=cluster,
            out_dir=run_dir,
            on_progress=on_progress,
            log_fn=say,
        )
        cluster.start(model, tasks.task_type)
        if not resume:
            sft_accuracy = driver.evaluate(model, "sft")
        training = True
        stop_reason = driver.train(steps)
    except KeyboardInterrupt:
        if not training:
            raise
        stop_reason = "interrupted"
        say("interrupted: stopping services")
    except Exception as exc:  # the summary is written, then the error re-raised
        if driver is None:
            raise
        failure, stop_reason = exc, "error"
        say(f"run failed: {exc}")
    finally:
        if training and driver is not None:
            final_step = driver.progress.step
            with contextlib.suppress(Exception):
                driver.poll()
            if failure is None:
                with contextlib.suppress(Exception):
                    policy = driver.wait_for_publish(driver.progress.step)
        if driver is not None:
            extra = _accounting(cluster, driver)
        left = cluster.stop()
    assert driver is not None
    final_accuracy = float("nan")
    if failure is None:
        final_dir = policy.path if policy is not None and policy.path else model
        import torch

        torch.set_num_threads(1)
        final_accuracy = driver.evaluate(final_dir, "final")
    else:
        extra["failure"] = str(failure)[:4000]
    extra["resumed"] = resume
    summary = driver.summary(
        stop_reason=stop_reason,
        sft_accuracy=sft_accuracy,
        final_accuracy=final_accuracy,
        final_step=final_step,
        policy=policy,
        started=started,
        leftover_processes=left,
        extra=extra,
    )
    if failure is not None:
        raise failure
    return summary


def _accounting(cluster: LocalCluster, driver: RunDriver) -> dict[str, Any]:
    """Accounting, restarts and outages for the summary, read before the cluster stops."""
    stats = driver.progress.stats
    produced = -1
    with contextlib.suppress(Exception):
        produced = int(driver.streams.client.xlen(driver.names.rollouts))
    return {
        "groups_opened": stats.groups_opened,
        "groups_pending": stats.groups_pending,
        "groups_closed_short": stats.groups_closed_short,
        "accounting": run_accounting(stats, produced),
        "restarts": dict(cluster.restarts),
        "deaths": [{"service": d.name, "reason": d.reason} for d in cluster.supervisor.deaths],
        "outage_s": {
            "redis": round(driver.redis_outage.total_s, 2),
            "verifiers": round(stats.verifier_outage_s, 2),
        },
    }
