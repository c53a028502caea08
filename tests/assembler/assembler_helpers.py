"""Builders of rollouts and scores shared by the assembler tests."""

from __future__ import annotations

from grpo.v1 import common_pb2


def rollout(
    group_id: str = "p1/e0",
    index: int = 0,
    group_size: int = 4,
    *,
    prompt_id: str = "p1",
    text: str = "7+8=15:15",
    task_type: str = "arith",
    gold: str = "15",
    tokens: int = 5,
    round: int = 0,
) -> common_pb2.Rollout:
    """A rollout with ``tokens`` generated tokens and matching behavior log-probs."""
    return common_pb2.Rollout(
        group_id=group_id,
        index=index,
        group_size=group_size,
        prompt_id=prompt_id,
        task=common_pb2.Task(id=prompt_id, type=task_type, prompt="7+8=", gold_answer=gold),
        prompt_token_ids=[1, 2, 3],
        completion=common_pb2.Completion(
            text=text,
            token_ids=list(range(tokens)),
            behavior_logprobs=[-0.5] * tokens,
            token_char_offsets=list(range(tokens)),
        ),
        round=round,
    )


def score(reward: float, status: int = common_pb2.SCORE_STATUS_OK) -> common_pb2.Score:
    """An outcome score."""
    return common_pb2.Score(status=status, reward=reward, verifier="test")  # type: ignore[arg-type]


def member(
    index: int, reward: float | None, *, group_size: int = 4, round: int = 0
) -> common_pb2.ScoredRollout:
    """A scored member; reward None means missing (verifier failure)."""
    from grpo.services.assembler.group import scored_member

    r = rollout(index=index, group_size=group_size, round=round)
    return scored_member(r, None if reward is None else score(reward))
