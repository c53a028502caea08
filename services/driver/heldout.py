"""The held-out evaluation of a run: one call, ``heldout_accuracy``, used by the run driver
(before GRPO, every ``eval.every_steps`` steps, after GRPO), by the SFT target check and by
``grpo eval --run-config`` (so ``grpo eval`` of a policy gives the run's accuracy).

Greedy decoding (one sample per task, ``eval.max_new_tokens``, ``eval.batch_size`` prompts per
call) with the transformers backend (one thread), scored by the run's **primary** outcome
verifier of the task type (the first reward of its route, ``grpo.services.settings.verifiers``):
an endpoint is called over gRPC with its TLS; a service the run starts is called at its address
when one is given, else built in this process with its ``verifiers.extra`` settings. A sample
is correct when its status is a verdict and its reward reaches
``assembler.dynamic_sampling.correct_threshold`` — what the primary reward of training measures.
The loop is ``grpo.services.evaluation.evaluate`` (``grpo eval``'s).
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


def outcome_scorer(
    config: RunConfig, outcome_address: str | None = None, *, task_type: str
) -> BatchScorer:
    """The run's primary outcome verifier of ``task_type`` (the caller closes it): at
    ``outcome_address`` over gRPC when given; an endpoint over gRPC (its TLS from the run
    config); else the service built in this process with its ``verifiers.extra`` settings.

    Raises:
        InvalidArgumentError: the ``verifiers`` section does not resolve for ``task_type``.
    """
    from grpo.services.evaluation.scorers import LocalScorer, RemoteScorer
    from grpo.services.settings.services import service_settings
    from grpo.services.settings.verifiers import plan_verifiers

    plan = plan_verifiers(config.verifiers, [task_type])
    primary = plan.primary(task_type)
    if outcome_address or primary.form == "endpoint":
        client = config.assembler.verifier.model_copy(
            update={
                "timeout_s": 120.0,
                "endpoint_tls": {**config.assembler.verifier.endpoint_tls, **plan.endpoint_tls()},
            }
        )
        return RemoteScorer(outcome_address or primary.address, client)
    settings = service_settings(config, primary.text)
    settings.pop("server", None)
    return LocalScorer.from_service(primary.text, settings)


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
        outcome_address: ``host:port`` of the running primary outcome verifier; None: the
            endpoint of the run config, else the verifier built here.
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
    if scorer is None:
        active = outcome_scorer(config, outcome_address, task_type=task_type)
    else:
        active = scorer
    try:
        check_verifier(
            active.describe(),
            task_type=task_type,
            kind=verifier_pb2.VERIFIER_KIND_OUTCOME,
            where=active.where,
            hint="set the first verifiers.outcome of this task type to a verifier of it",
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
