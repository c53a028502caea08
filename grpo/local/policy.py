"""Preparing the policy of a local run, before any service starts: a fresh tiny model (when
``model.path`` is unset) and the optional SFT warm start (``model.sft``).

Runs in the calling process so it may use every core; SFT is a separate step that ``grpo run``
performs for the local job (on a cluster it is run beforehand, see docs/pipeline.md), and the
learner then publishes the resulting folder as policy version 0.

SFT is resumable: it checkpoints into ``<run_dir>/model/sft-checkpoints`` every
``model.sft.checkpoint_every_s`` and on Ctrl-C/SIGTERM (``grpo.learner.sft``), and a later
``warm_start`` in the same run dir (``grpo run --resume``) continues from the newest intact
checkpoint. A finished SFT writes ``<run_dir>/model/sft.done.json`` (fsynced, after the model)
and drops its checkpoints; with that file SFT is never run again.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from grpo.errors import FailedPreconditionError
from grpo.services.driver.heldout import heldout_accuracy, outcome_scorer
from grpo.services.evaluation.scorers import BatchScorer
from grpo.services.settings.run import RunConfig
from grpo.services.tasks.run_tasks import RunTasks

__all__ = ["SFT_DONE", "builds_model", "init_policy", "prepare_policy", "sft_done", "warm_start"]

SFT_DONE = "sft.done.json"
"""In ``<run_dir>/model/``: written once SFT finished and its model is saved (steps, loss)."""


def sft_done(run_dir: Path) -> bool:
    """Whether the run's SFT finished (``<run_dir>/model/sft.done.json``)."""
    return (run_dir / "model" / SFT_DONE).is_file()


def init_policy(config: RunConfig, run_dir: Path, log: Callable[[str], None]) -> Path | str:
    """The initial policy: ``model.path`` as given (an HF folder or hub id), else a fresh tiny
    model written to ``<run_dir>/model/init`` (``init_tiny_model``).

    Returns:
        The folder (or hub id) the run starts from.
    """
    if config.model.path is not None:
        path = Path(config.model.path)
        return path.resolve() if path.exists() else config.model.path
    from grpo.model import init_tiny_model

    tiny = config.model.tiny
    model_dir = init_tiny_model(
        run_dir / "model" / "init",
        seed=config.seed,
        hidden=tiny.hidden,
        layers=tiny.layers,
        heads=tiny.heads,
        kv_heads=tiny.kv_heads,
        intermediate=tiny.intermediate,
        max_positions=tiny.max_positions,
    )
    log(f"initialised tiny model in {model_dir}")
    return model_dir


def warm_start(
    config: RunConfig,
    model: Path | str,
    tasks: RunTasks,
    run_dir: Path,
    log: Callable[[str], None],
) -> Path | str:
    """SFT of ``model`` on ``tasks.sft`` into ``<run_dir>/model/sft`` when ``model.sft`` is
    enabled (``grpo.learner.sft.run_sft``), stopping at ``target_accuracy`` on ``tasks.dev``;
    with prompts rendered through the chat template (``tasks.chat_template``) each target
    ends as the template ends an assistant turn, not with EOS. It continues from the newest
    intact checkpoint in ``<run_dir>/model/sft-checkpoints`` and is skipped once
    ``sft.done.json`` says it finished (module docstring).

    Returns:
        The SFT folder, or ``model`` unchanged when SFT is off.

    Raises:
        FailedPreconditionError: SFT is enabled but the data source has no worked solutions.
    """
    sft = config.model.sft
    if not sft.enabled:
        return model
    if not tasks.sft:
        raise FailedPreconditionError(
            f"model.sft.enabled but data.source={config.data.source!r} has no "
            "worked solutions; disable SFT or use data.source: arith"
        )
    out = run_dir / "model" / "sft"
    if sft_done(run_dir):
        log(f"SFT finished earlier ({run_dir / 'model' / SFT_DONE}): not run again")
        return out
    from grpo.learner.sft import run_sft

    checkpoints = run_dir / "model" / "sft-checkpoints"
    checkpoints.mkdir(parents=True, exist_ok=True)  # says SFT began (``resume_policy``)
    started = time.perf_counter()
    # one outcome verifier for every dev-set check (its worker pool starts once)
    scorer = outcome_scorer(config, task_type=tasks.task_type) if sft.target_accuracy > 0 else None
    check = _dev_check(config, tasks, log, scorer) if scorer is not None else None
    try:
        result = run_sft(
            model,
            tasks.sft,
            out_dir=out,
            steps=sft.steps or None,
            epochs=sft.epochs or None,
            time_budget_s=sft.time_budget_s or None,
            lr=sft.lr,
            batch_size=sft.batch_size,
            warmup_steps=sft.warmup_steps,
            schedule=sft.schedule,
            seed=config.seed,
            log_every=200,
            on_log=lambda step, loss: log(f"SFT step {step}: loss {loss:.3f}"),
            check_every=sft.check_every,
            check=check,
            chat_template=tasks.chat_template,
            checkpoint_dir=checkpoints,
            checkpoint_every_s=sft.checkpoint_every_s,
        )
    finally:
        if scorer is not None:
            scorer.close()
    reached = ""
    if result.stopped_by_check:
        reached = f", dev accuracy {result.checks[-1][1]:.3f} reached the target"
    elif check is not None:
        last = (
            f"last dev accuracy {result.checks[-1][1]:.3f} at step {result.checks[-1][0]}"
            if result.checks
            else "never checked"
        )
        reached = f", target {sft.target_accuracy:.3f} NOT reached ({last})"
    resumed = f", resumed from step {result.resumed_from}" if result.resumed_from else ""
    if result.checkpoints:
        resumed += f", {result.checkpoints} checkpoints ({result.checkpoint_s:.1f} s)"
    log(
        f"SFT: {result.steps} steps, loss {result.final_loss:.3f}{reached}, "
        f"{time.perf_counter() - started:.0f} s{resumed}"
    )
    _mark_done(run_dir, result.steps, result.final_loss)
    shutil.rmtree(checkpoints, ignore_errors=True)  # a finished SFT is never continued
    return out


def _mark_done(run_dir: Path, steps: int, loss: float) -> None:
    """Write ``sft.done.json`` durably, after the SFT model's files (each fsynced; then a
    temp file, fsync, rename, fsync of the folder)."""
    folder = run_dir / "model"
    for path in sorted((folder / "sft").rglob("*")):
        if path.is_file():
            with path.open("rb") as fh:
                os.fsync(fh.fileno())
    tmp = folder / f".{SFT_DONE}.{os.getpid()}.tmp"
    with tmp.open("w") as fh:
        json.dump({"steps": steps, "final_loss": loss}, fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, folder / SFT_DONE)
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _dev_check(
    config: RunConfig, tasks: RunTasks, log: Callable[[str], None], scorer: BatchScorer
) -> Callable[[Path, int], tuple[float, bool]]:
    """``run_sft``'s check: greedy accuracy on the dev set, scored by the run's outcome
    verifier (``scorer``); stop at ``target_accuracy``."""
    target = config.model.sft.target_accuracy

    def check(model_dir: Path, step: int) -> tuple[float, bool]:
        accuracy = float(
            heldout_accuracy(
                model_dir, tasks.dev, config=config, task_type=tasks.task_type, scorer=scorer
            ).accuracy
        )
        log(f"SFT step {step}: dev accuracy {accuracy:.3f} (target {target:.3f})")
        return accuracy, accuracy >= target

    return check


def builds_model(config: RunConfig) -> bool:
    """Whether :func:`prepare_policy` creates or trains a model in this process (a new tiny
    model, or SFT), and so imports torch and transformers."""
    return config.model.path is None or config.model.sft.enabled


def prepare_policy(
    config: RunConfig, run_dir: Path, tasks: RunTasks, log: Callable[[str], None]
) -> Path | str:
    """``init_policy`` then ``warm_start``, with one torch thread (2 threads lose 4-8x as soon
    as anything else runs on this machine). From a given model without SFT, torch is not
    imported here (the services load the model).

    Returns:
        The folder (or hub id) of the policy the learner publishes as version 0.
    """
    if builds_model(config):
        import torch

        torch.set_num_threads(1)
    return warm_start(config, init_policy(config, run_dir, log), tasks, run_dir, log)
