"""The padded training batch the learner builds from a list of closed groups.

``build_batch`` turns ``common_pb2.Group`` messages (the groups stream payload) into one
``TrainingBatch``: every present member of every group is one row, rows of a group are
contiguous, groups keep their order.

Layout of a row (S = P + T columns)::

    [ left padding | prompt tokens ][ response tokens | right padding ]
    <------------- P ------------->< -------------- T ------------->

Prompts are left-padded to the longest prompt P so that response token t of every row sits in
column P + t and its logits come from column P + t - 1. The attention mask is the prompt mask
followed by ones for the generated tokens (and zeros for right padding); ``position_ids`` count
real tokens only, so a left-padded row sees the same positions as the unpadded sequence the
sampler saw (teacher-forced log-probs then match sampling log-probs to ~1e-6, DESIGN.md).

Response mask: a response ends at its first EOS, which is inside the mask; anything after it
and the right padding are outside. A response cut at the length limit (finish reason LENGTH)
has no EOS and is flagged ``truncated``. Members without a valid outcome reward (``missing``,
a non-OK status, a non-finite reward) are marked invalid in ``reward_valid`` and keep NaN in
``rewards``; they are never filled with 0 (DESIGN.md "Learner math").
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields, replace

import torch

from grpo.errors import ContractError, InvalidArgumentError
from grpo.services.score_status import is_verdict
from grpo.v1 import common_pb2

__all__ = ["TrainingBatch", "build_batch", "check_group", "outcome_reward"]


@dataclass(frozen=True)
class TrainingBatch:
    """One learner batch: P groups of up to G rollouts, N = present members in total.

    Tensor fields (all on CPU until ``to(device)``):
        input_ids: [N, S] int64, prompt (left-padded) then response (right-padded); S = P_len + T.
        attention_mask: [N, S] int64, prompt mask then ones for generated tokens.
        position_ids: [N, S] int64, index of each token among the row's real tokens.
        response_ids: [N, T] int64, response tokens (pad id after the end).
        response_mask: [N, T] bool, tokens that enter the loss (first EOS inside).
        behavior_logprobs: [N, T] float32, μ of each generated token (0 on padding).
        truncated: [N] bool, response cut at the length limit (no EOS).
        rewards: [P, G] float32 outcome rewards, NaN where invalid or absent.
        reward_valid: [P, G] bool, True where the outcome reward is a valid verdict.
        row_prompt: [N] int64, group index (0..P-1) of each row.
        row_slot: [N] int64, member index (0..G-1) of each row inside its group.
        row_valid: [N] bool, ``reward_valid`` gathered to rows.
        policy_versions: [N] int64, policy version that sampled each row.
        straggler_wait_s: [P] float64, seconds between first and last scored member per group.
    Python fields:
        prompt_len: P_len, the column where responses start.
        step_ends: per row, token index (0-based, within the response) ending each process step.
        step_rewards: per row, the reward of each process step (same length as ``step_ends``).
        group_ids, prompt_ids, task_types: per group.
        group_metadata: per group, the task's metadata labels (source, difficulty, ...).
    """

    input_ids: torch.Tensor
    attention_mask: torch.Tensor
    position_ids: torch.Tensor
    response_ids: torch.Tensor
    response_mask: torch.Tensor
    behavior_logprobs: torch.Tensor
    truncated: torch.Tensor
    rewards: torch.Tensor
    reward_valid: torch.Tensor
    row_prompt: torch.Tensor
    row_slot: torch.Tensor
    row_valid: torch.Tensor
    policy_versions: torch.Tensor
    straggler_wait_s: torch.Tensor
    prompt_len: int
    step_ends: list[list[int]] = field(default_factory=list)
    step_rewards: list[list[float]] = field(default_factory=list)
    group_ids: list[str] = field(default_factory=list)
    prompt_ids: list[str] = field(default_factory=list)
    task_types: list[str] = field(default_factory=list)
    group_metadata: list[dict[str, str]] = field(default_factory=list)

    @property
    def num_rows(self) -> int:
        """N, the number of rollouts (rows)."""
        return int(self.input_ids.shape[0])

    @property
    def num_groups(self) -> int:
        """P, the number of groups (prompts)."""
        return int(self.rewards.shape[0])

    @property
    def group_size(self) -> int:
        """G, the (largest requested) group size; the second dimension of ``rewards``."""
        return int(self.rewards.shape[1])

    @property
    def response_lengths(self) -> torch.Tensor:
        """[N] int64, tokens inside the response mask per row."""
        return self.response_mask.sum(dim=1)

    @property
    def has_process_rewards(self) -> bool:
        """True when at least one row carries process step rewards."""
        return any(self.step_ends)

    def to(self, device: torch.device | str) -> TrainingBatch:
        """Return a copy with every tensor on ``device`` (Python fields shared)."""
        moved = {
            f.name: getattr(self, f.name).to(device)
            for f in fields(self)
            if isinstance(getattr(self, f.name), torch.Tensor)
        }
        return replace(self, **moved)


def outcome_reward(member: common_pb2.ScoredRollout) -> float | None:
    """The outcome reward of a scored rollout, or None when it is missing.

    A reward is valid only when the member is not ``missing``, the outcome status is a verdict
    on the response (``grpo.services.score_status``: anything but INTERNAL) and the value is
    finite.
    """
    if member.missing or not member.HasField("outcome"):
        return None
    if not is_verdict(member.outcome):
        return None
    value = float(member.outcome.reward)
    return value if math.isfinite(value) else None


def _process_steps(
    member: common_pb2.ScoredRollout,
) -> tuple[list[tuple[int, int]], list[float]]:
    """Character spans and rewards of the member's process steps that fit its response."""
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


def check_group(group: common_pb2.Group) -> None:
    """Check that a group can be trained on (the checks ``build_batch`` relies on).

    Raises:
        InvalidArgumentError: the group has no members, or fewer than 2 slots (G < 2).
        ContractError: a member index is outside the group, two members share an index, a
            member has no prompt tokens, or its behavior log-probs / char offsets do not have
            one entry per token id.
    """
    gid = group.group_id
    if not group.members:
        raise InvalidArgumentError(f"group {gid!r} has no members")
    size = max(int(group.group_size), len(group.members))
    if size < 2:
        raise InvalidArgumentError(f"group {gid!r} has group size {size}; GRPO needs >= 2")
    seen: set[int] = set()
    for member in group.members:
        comp = member.rollout.completion
        slot = int(member.rollout.index)
        if slot >= size or slot in seen:
            raise ContractError(
                f"group {gid!r}: member index {slot} is outside group size {size} or repeated"
            )
        seen.add(slot)
        if not member.rollout.prompt_token_ids:
            raise ContractError(f"group {gid!r} member {slot}: empty prompt_token_ids")
        n_tok = len(comp.token_ids)
        if len(comp.behavior_logprobs) != n_tok:
            raise ContractError(
                f"group {gid!r} member {slot}: {len(comp.behavior_logprobs)} "
                f"behavior_logprobs for {n_tok} token_ids"
            )
        if comp.token_char_offsets and len(comp.token_char_offsets) != n_tok:
            raise ContractError(
                f"group {gid!r} member {slot}: {len(comp.token_char_offsets)} "
                f"token_char_offsets for {n_tok} token_ids"
            )
        _step_ends(member, f"group {gid!r} member {slot}")


def _step_ends(member: common_pb2.ScoredRollout, where: str) -> tuple[list[int], list[float]]:
    """Token index ending each process step of ``member`` and the steps' rewards.

    Raises:
        ContractError: steps without token char offsets, or a span outside the tokens.
    """
    from grpo.learner.process import step_end_tokens

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


def build_batch(
    groups: Sequence[common_pb2.Group],
    *,
    pad_token_id: int,
    eos_token_id: int,
    mask_truncated: bool = False,
) -> TrainingBatch:
    """Build the padded training batch from closed groups.

    Args:
        groups: P closed groups (the groups stream payload); members ordered by index.
        pad_token_id: id used for padding (may equal ``eos_token_id``).
        eos_token_id: EOS id; the first EOS ends a response and is inside the mask.
        mask_truncated: exclude responses cut at the length limit from the loss.

    Returns:
        A ``TrainingBatch`` with N rows (present members) and rewards shaped [P, G], G the
        largest ``group_size`` among the groups.

    Raises:
        InvalidArgumentError: no groups, or a group fails ``check_group``.
        ContractError: a group fails ``check_group``, or a process step span lies outside the
            response's tokens.
    """
    from grpo.learner.masks import response_mask

    if not groups:
        raise InvalidArgumentError("build_batch needs at least one group, got none")
    num_groups = len(groups)
    group_size = max(max(int(g.group_size), len(g.members)) for g in groups)
    rewards = torch.full((num_groups, group_size), float("nan"), dtype=torch.float32)
    valid = torch.zeros((num_groups, group_size), dtype=torch.bool)

    prompts: list[list[int]] = []
    responses: list[list[int]] = []
    behaviors: list[list[float]] = []
    stopped: list[bool] = []
    row_prompt: list[int] = []
    row_slot: list[int] = []
    versions: list[int] = []
    step_ends: list[list[int]] = []
    step_rewards: list[list[float]] = []
    for group in groups:
        check_group(group)
    for p, group in enumerate(groups):
        for member in group.members:
            rollout = member.rollout
            comp = rollout.completion
            slot = int(rollout.index)
            reward = outcome_reward(member)
            if reward is not None:
                rewards[p, slot] = reward
                valid[p, slot] = True
            ends, step_r = _step_ends(member, f"group {group.group_id!r} member {slot}")
            prompts.append(list(rollout.prompt_token_ids))
            responses.append(list(comp.token_ids))
            behaviors.append(list(comp.behavior_logprobs))
            stopped.append(comp.finish_reason == common_pb2.FINISH_REASON_STOP)
            row_prompt.append(p)
            row_slot.append(slot)
            versions.append(int(comp.policy_version))
            step_ends.append(ends)
            step_rewards.append(step_r if ends else [])

    n_rows = len(responses)
    prompt_len = max(len(x) for x in prompts)
    resp_len = max(1, max(len(x) for x in responses))
    input_ids = torch.full((n_rows, prompt_len + resp_len), pad_token_id, dtype=torch.long)
    attention = torch.zeros((n_rows, prompt_len + resp_len), dtype=torch.long)
    behavior = torch.zeros((n_rows, resp_len), dtype=torch.float32)
    for i, (prompt, resp, mu) in enumerate(zip(prompts, responses, behaviors, strict=True)):
        start = prompt_len - len(prompt)
        input_ids[i, start:prompt_len] = torch.tensor(prompt, dtype=torch.long)
        attention[i, start:prompt_len] = 1
        if resp:
            end = prompt_len + len(resp)
            input_ids[i, prompt_len:end] = torch.tensor(resp, dtype=torch.long)
            attention[i, prompt_len:end] = 1
            behavior[i, : len(resp)] = torch.tensor(mu, dtype=torch.float32)
    masks = response_mask(
        input_ids[:, prompt_len:],
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        lengths=torch.tensor([len(r) for r in responses], dtype=torch.long),
    )
    # A response that ended on a stop string has no EOS but is finished, not truncated.
    trunc = masks.truncated & ~torch.tensor(stopped, dtype=torch.bool)
    resp_mask = masks.mask & ~trunc[:, None] if mask_truncated else masks.mask
    for i, ends in enumerate(step_ends):
        length = int(masks.lengths[i])
        if any(e >= length for e in ends):
            keep = [k for k, e in enumerate(ends) if e < length]
            step_ends[i] = [ends[k] for k in keep]
            step_rewards[i] = [step_rewards[i][k] for k in keep]
    rp = torch.tensor(row_prompt, dtype=torch.long)
    rs = torch.tensor(row_slot, dtype=torch.long)
    position_ids = (attention.cumsum(dim=1) - 1).clamp(min=0)
    return TrainingBatch(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=position_ids,
        response_ids=input_ids[:, prompt_len:].clone(),
        response_mask=resp_mask,
        behavior_logprobs=behavior,
        truncated=trunc,
        rewards=rewards,
        reward_valid=valid,
        row_prompt=rp,
        row_slot=rs,
        row_valid=valid[rp, rs],
        policy_versions=torch.tensor(versions, dtype=torch.long),
        straggler_wait_s=torch.tensor([g.straggler_wait_s for g in groups], dtype=torch.float64),
        prompt_len=prompt_len,
        step_ends=step_ends,
        step_rewards=step_rewards,
        group_ids=[g.group_id for g in groups],
        prompt_ids=[g.prompt_id for g in groups],
        task_types=[g.members[0].rollout.task.type for g in groups],
        group_metadata=[dict(g.members[0].rollout.task.metadata) for g in groups],
    )
