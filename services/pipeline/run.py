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
``model/`` (initial and SFT weights), the learner's ``metrics.jsonl``, ``groups.jsonl``,
``checkpoints/`` and ``weights/``, the assembler's ``assembler_groups.jsonl``, ``eval.jsonl``
and ``summary.json``.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from grpo.services.pipeline.cluster import LocalCluster
from grpo.services.pipeline.config import RunConfig
from grpo.services.pipeline.driver import Progress, RunDriver
from grpo.services.pipeline.policy import prepare_policy
from grpo.services.pipeline.tasks import load_run_tasks

__all__ = ["default_run_dir", "run_local", "write_run_config"]

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


def run_local(
    config: RunConfig,
    run_dir: Path,
    *,
    steps: int | None = None,
    on_progress: Callable[[Progress], None] | None = None,
    log_fn: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """The whole job (see the module docstring); returns the summary written to disk.

    Args:
        config: the run; run_dir: output folder (created); steps: learner steps (default
        ``budget.steps``); on_progress: called each poll; log_fn: human-readable milestones.

    Raises:
        GrpoError: a bad config, a service that failed to start or died.
        KeyboardInterrupt: Ctrl-C/SIGTERM before GRPO started (SFT); after that an interrupt
            ends training and the summary says ``stop_reason: interrupted``.
    """
    say = log_fn or log.info
    started = time.time()
    run_dir = run_dir.resolve()
    write_run_config(config, run_dir)
    tasks = load_run_tasks(config)
    model = prepare_policy(config, run_dir, tasks, say)
    cluster = LocalCluster(config, run_dir, log_fn=say)
    driver: RunDriver | None = None
    training = False
    stop_reason = "error"
    sft_accuracy = float("nan")
    policy = None
    final_step = 0
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
        sft_accuracy = driver.evaluate(model, "sft")
        training = True
        stop_reason = driver.train(steps)
    except KeyboardInterrupt:
        if not training:
            raise
        stop_reason = "interrupted"
        say("interrupted: stopping services")
    finally:
        if training and driver is not None:
            final_step = driver.progress.step
            with contextlib.suppress(Exception):
                driver.poll()
            with contextlib.suppress(Exception):
                policy = driver.wait_for_publish(driver.progress.step)
        left = cluster.stop()
    assert driver is not None
    final_dir = policy.path if policy is not None and policy.path else model
    import torch

    torch.set_num_threads(1)
    final_accuracy = driver.evaluate(final_dir, "final")
    return driver.summary(
        stop_reason=stop_reason,
        sft_accuracy=sft_accuracy,
        final_accuracy=final_accuracy,
        final_step=final_step,
        policy=policy,
        started=started,
        leftover_processes=left,
    )
