"""The learner's service edge for batches: ``grpo.v1.Group`` protos -> ``GroupRows``.

The groups stream carries ``common_pb2.Group`` messages; the learner trains on
``grpo.learner.batch.GroupRows``. :func:`group_rows` reads one group into rows, resolving what
needs the wire form: the outcome reward (a verdict status and a finite value, else missing,
``grpo.services.runtime.score_status``), the process steps' character spans mapped to the tokens
that end them (``Completion.token_char_offsets``), the finish reason and the sampler's top-k/top-p
(an unset ``top_p`` of 0 reads as 1, i.e. off). :func:`build_batch` is ``group_rows`` then
``grpo.learner.batch.pad_batch``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from grpo.errors import ContractError
from grpo.learner.batch import GroupRows, RolloutRow, TrainingBatch, check_group_rows, pad_batch
from grpo.learner.process import step_end_tokens
from grpo.services.runtime.score_status import is_verdict, member_reward
from grpo.v1 import common_pb2

__all__ = ["build_batch", "check_group", "group_rows", "outcome_reward"]


def outcome_reward(member: common_pb2.ScoredRollout) -> float | None:
    """The outcome reward a scored rollout trains on, or None when it is missing.

    The combined reward of several weighted components when the record has one
    (``ScoredRollout.reward``), else the outcome verifier's reward; valid only when the member
    is not ``missing``, every status is a verdict on the response and the value is finite
    (``grpo.services.runtime.score_status.member_reward``).
    """
    return member_reward(member)


def _primary_reward(member: common_pb2.ScoredRollout) -> float | None:
    """The primary component's reward of a member whose reward combines several weighted
    rewards (what correct counts read); None for a single-reward member (its reward is it)."""
    if len(member.components) < 2 or not is_verdict(member.outcome):
        return None
    value = float(member.outcome.reward)
    return value if math.isfinite(value) else None


def _process_steps(
    member: common_pb2.ScoredRollout,
) -> tuple[list[tuple[int, int]], list[float]]:
    """Character spans and rewards of the member's process steps with a finite reward."""
    if not member.HasField("process") or member.process.status != common_pb2.SCORE_STATUS_OK:
        return [], []
    spans: list[tuple[int, int]] = []
    rewards: list[float] = []
    for step in member.process.steps:
        if not math.isfinite(step.reward):
            continue
        spans.append((int(step.char_start), int(step.char_end)))
        rewards.append(float(step.reward))
    return spans, rewards


def _step_ends(member: common_pb2.ScoredRollout, where: str) -> tuple[list[int], list[float]]:
    """Token index ending each process step of ``member`` and the steps' rewards.

    Raises:
        ContractError: steps without token char offsets, or a span outside the tokens.
    """
    spans, rewards = _process_steps(member)
    if not spans:
        return [], []
    comp = member.rollout.completion
    if not comp.token_char_offsets:
        raise ContractError(f"{where}: process steps without token_char_offsets")
    try:
        ends = step_end_tokens(spans, list(comp.token_char_offsets), text_length=len(comp.text))
    except ValueError as exc:
        raise ContractError(f"{where}: bad process step span: {exc}") from None
    return [int(e) for e in ends], rewards


def group_rows(group: common_pb2.Group) -> GroupRows:
    """Read a closed group into the learner's rows, checking that it can be trained on.

    Args:
        group: a ``grpo.v1.Group`` from the groups stream; members in any order.

    Returns:
        ``GroupRows`` with one ``RolloutRow`` per member, in member order.

    Raises:
        InvalidArgumentError: the group has no members, or fewer than 2 slots (G < 2).
        ContractError: a member index is outside the group or repeated, a member has no
            prompt tokens, its behavior log-probs / char offsets do not have one entry per
            token id, or a process step span lies outside its tokens.
    """
    gid = group.group_id
    rows = []
    for member in group.members:
        rollout = member.rollout
        comp = rollout.completion
        slot = int(rollout.index)
        if comp.token_char_offsets and len(comp.token_char_offsets) != len(comp.token_ids):
            raise ContractError(
                f"group {gid!r} member {slot}: {len(comp.token_char_offsets)} "
                f"token_char_offsets for {len(comp.token_ids)} token_ids"
            )
        ends, step_rewards = _step_ends(member, f"group {gid!r} member {slot}")
        rows.append(
            RolloutRow(
                slot=slot,
                prompt_ids=list(rollout.prompt_token_ids),
                response_ids=list(comp.token_ids),
                behavior_logprobs=list(comp.behavior_logprobs),
                stopped=comp.finish_reason == common_pb2.FINISH_REASON_STOP,
                policy_version=int(comp.policy_version),
                reward=outcome_reward(member),
                primary_reward=_primary_reward(member),
                step_ends=ends,
                step_rewards=step_rewards if ends else [],
                top_k=int(comp.sampling.top_k),
                top_p=float(comp.sampling.top_p) if comp.sampling.top_p > 0 else 1.0,
            )
        )
    first = group.members[0].rollout.task if group.members else common_pb2.Task()
    result = GroupRows(
        group_id=gid,
        prompt_id=group.prompt_id,
        task_type=first.type,
        group_size=int(group.group_size),
        rows=rows,
        metadata=dict(first.metadata),
        straggler_wait_s=float(group.straggler_wait_s),
    )
    check_group_rows(result)
    return result


def check_group(group: common_pb2.Group) -> None:
    """Check that a group can be trained on; raises what :func:`group_rows` raises."""
    group_rows(group)


def build_batch(
    groups: Sequence[common_pb2.Group],
    *,
    pad_token_id: int,
    eos_token_id: int,
    mask_truncated: bool = False,
) -> TrainingBatch:
    """The padded training batch of closed ``grpo.v1.Group`` protos.

    ``pad_batch([group_rows(g) for g in groups], ...)``; see
    ``grpo.learner.batch.pad_batch`` for the layout, shapes and arguments.

    Raises:
        InvalidArgumentError / ContractError: no groups, or a group fails :func:`group_rows`.
    """
    return pad_batch(
        [group_rows(g) for g in groups],
        pad_token_id=pad_token_id,
        eos_token_id=eos_token_id,
        mask_truncated=mask_truncated,
    )
