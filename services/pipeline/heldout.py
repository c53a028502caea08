"""The held-out evaluation of a run: one call, ``heldout_accuracy``, used by the run driver
(before GRPO, every ``eval.every_steps`` steps, after GRPO) and by the SFT target check.

Greedy decoding of every task with the transformers backend (one thread), scored by the
outcome verifier over gRPC for code tasks and by ``grpo.learner.sft``'s answer match otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from grpo.errors import FailedPreconditionError
from grpo.services.pipeline.config import RunConfig
from grpo.v1 import common_pb2

__all__ = ["heldout_accuracy"]


def heldout_accuracy(
    model_dir: Path,
    tasks: Sequence[common_pb2.Task],
    *,
    config: RunConfig,
    task_type: str,
    outcome_address: str | None = None,
) -> Any:
    """Greedy accuracy of the policy in ``model_dir`` on ``tasks``.

    Args:
        model_dir: ``save_pretrained`` folder of the policy.
        tasks: tasks with ``prompt`` and ``gold_answer`` (or tests, for code).
        config: the run (``eval.max_new_tokens``, ``eval.batch_size``, the correct threshold).
        task_type: the run's routing key (``code`` is scored by the outcome verifier).
        outcome_address: ``host:port`` of the outcome verifier (needed for code).

    Returns:
        ``grpo.learner.sft.AccuracyResult`` (accuracy in [0, 1]; 0 for no tasks).

    Raises:
        FailedPreconditionError: a code evaluation without an outcome verifier address.
    """
    from grpo.learner.sft import greedy_accuracy

    check = _verifier_check(config, outcome_address) if task_type == "code" else None
    return greedy_accuracy(
        str(model_dir),
        tasks,
        max_new_tokens=config.eval.max_new_tokens,
        batch_size=config.eval.batch_size,
        check=check,
    )


def _verifier_check(
    config: RunConfig, address: str | None
) -> Callable[[str, common_pb2.Task], bool]:
    import grpc

    from grpo.v1 import verifier_pb2, verifier_pb2_grpc

    if not address:
        raise FailedPreconditionError("the outcome verifier must run for a code evaluation")
    stub = verifier_pb2_grpc.VerifierStub(grpc.insecure_channel(address))
    threshold = config.assembler.dynamic_sampling.correct_threshold

    def check(text: str, task: common_pb2.Task) -> bool:
        reply = stub.Score(verifier_pb2.ScoreRequest(task=task, response=text), timeout=60)
        return reply.score.status == common_pb2.SCORE_STATUS_OK and reply.score.reward >= threshold

    return check
