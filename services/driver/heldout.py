"""The held-out evaluation of a run: one call, ``heldout_accuracy``, used by the run driver
(before GRPO, every ``eval.every_steps`` steps, after GRPO), by the SFT target check and by
``grpo eval --run-config`` (so ``grpo eval`` of a policy gives the run's accuracy).

Greedy decoding (one sample per task, ``eval.max_new_tokens``, ``eval.batch_size`` prompts per
call) with the transformers backend (one thread), scored by the run's outcome verifier
(``verifiers.outcome`` with its ``verifiers.extra`` settings) for every task type: over gRPC
when its address is given, else the same service built in this process. A sample is correct
when its status is a verdict and its reward reaches
``assembler.dynamic_sampling.correct_threshold`` — what the reward of training measures. The
loop is ``grpo.services.evaluation.evaluate`` (``grpo eval``'s).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from grpo.services.evaluation.evaluate import (
    EvalReport,
    EvalSettings,
    evaluate_model,
    greedy_sampling,
)
from grpo.services.evaluation.scorers import BatchScorer, check_verifier
from grpo.services.settings.run import RunConfig
from grpo.v1 import common_pb2, verifier_pb2

__all__ = ["heldout_accuracy", "heldout_settings", "outcome_scorer"]


def heldout_settings(config: RunConfig) -> EvalSettings:
    """The evaluation settings of a run: greedy, one sample, the run's budget and threshold."""
    return EvalSettings(
        samples=1,
        sampling=greedy_sampling(config.eval.max_new_tokens),
        correct_threshold=config.assembler.dynamic_sampling.correct_threshold,
        batch_prompts=config.eval.batch_size,
    )


def outcome_scorer(config: RunConfig, outcome_address: str | None = None) -> BatchScorer:
    """The run's outcome verifier: at ``outcome_address`` over gRPC, else built in process
    from ``verifiers.outcome`` and its ``verifiers.extra`` settings (the caller closes it)."""
    from grpo.services.evaluation.scorers import LocalScorer, RemoteScorer
    from grpo.services.settings.services import verifier_settings

    if outcome_address:
        from grpo.services.runtime.verifier_client import VerifierClientConfig

        return RemoteScorer(outcome_address, VerifierClientConfig(timeout_s=120.0))
    name = config.verifiers.outcome
    settings = verifier_settings(config, name)
    settings.pop("server", None)
    return LocalScorer.from_service(name, settings)


def heldout_accuracy(
    model_dir: Path | str,
    tasks: Sequence[common_pb2.Task],
    *,
    config: RunConfig,
    task_type: str,
    outcome_address: str | None = None,
    scorer: BatchScorer | None = None,
    out_dir: Path | None = None,
    resume: bool = False,
    overwrite: bool = True,
    on_progress: Callable[[int, int], None] | None = None,
) -> EvalReport:
    """Greedy accuracy of the policy in ``model_dir`` on ``tasks``, scored by the outcome verifier.

    Args:
        model_dir: ``save_pretrained`` folder of the policy.
        tasks: tasks with ``prompt`` and what the verifier needs (gold answer, tests).
        config: the run (``eval``, ``verifiers``, the correct threshold).
        task_type: the run's routing key (checked against the verifier's ``Describe``).
        outcome_address: ``host:port`` of the running outcome verifier; None builds it here.
        scorer: an outcome scorer to reuse (e.g. across SFT checks); not closed here.
        out_dir: folder for ``samples.jsonl`` and ``summary.json`` (None: not kept).
        resume, overwrite: for an ``out_dir`` that holds samples (see ``ResultsFile``).
        on_progress: ``(samples done, total)`` after each scored batch.

    Returns:
        The ``EvalReport``: ``accuracy`` (pass@1 over the tasks with a verdict, nan for none),
        ``correct``, ``total`` (tasks with a verdict), statuses.

    Raises:
        FailedPreconditionError: the verifier does not serve ``task_type`` or is not an
            outcome verifier.
        UnavailableError: the verifier was lost.
    """
    active = outcome_scorer(config, outcome_address) if scorer is None else scorer
    try:
        check_verifier(
            active.describe(),
            task_type=task_type,
            kind=verifier_pb2.VERIFIER_KIND_OUTCOME,
            where=active.where,
            hint="set verifiers.outcome to a verifier of this task type",
        )
        return evaluate_model(
            model_dir,
            tasks,
            active,
            heldout_settings(config),
            out_dir=out_dir,
            resume=resume,
            overwrite=overwrite,
            on_progress=on_progress,
        )
    finally:
        if scorer is None:
            active.close()
