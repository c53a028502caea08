"""The padded training batch the learner builds from rows of rollouts grouped by prompt.

``pad_batch`` turns ``GroupRows`` (a domain form of a closed group: one ``RolloutRow`` per
present member, with its outcome reward and process step ends already resolved) into one
``TrainingBatch``: every row of every group is one batch row, rows of a group are contiguous,
groups keep their order. Reading the wire form (``grpo.v1.Group`` protos) into rows is the
service edge's job (``grpo.services.learner.batch``), so this module imports no proto, gRPC
or service code.

Layout of a row (S = P + T columns)::

    [ left padding | prompt tokens ][ response tokens | right padding ]
    <------------- P ------------->< -------------- T ------------->

Prompts are left-padded to the longest prompt P so that response token t of every row sits in
column P + t and its logits come from column P + t - 1. The attention mask is the prompt mask
followed by ones for the generated tokens (and zeros for right padding); ``position_ids`` count
real tokens only, so a left-padded row sees the same positions as the unpadded sequence the
sampler saw (teacher-forced log-probs then match sampling log-probs to ~1e-6, DESIGN.md).

Response mask: a response ends at its first EOS, which is inside the mask; anything after it
and the right padding are outside. A response cut at the length limit (no EOS and not
``stopped``) is flagged ``truncated``. Rows without a valid outcome reward (``reward`` None)
are marked invalid in ``reward_valid`` and keep NaN in ``rewards``; they are never filled
with 0 (DESIGN.md "Learner math").
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace

import torch

from grpo.errors import ContractError, InvalidArgumentError

__all__ = ["GroupRows", "RolloutRow", "TrainingBatch", "check_group_rows", "pad_batch"]


@dataclass(frozen=True)
class RolloutRow:
    """One rollout of a group, as the learner trains on it.

    Attributes:
        slot: member index of the rollout inside its group (0..G-1).
        prompt_ids: the prompt's token ids (unpadded, non-empty).
        response_ids: the generated token ids, as sampled (EOS included when emitted).
        behavior_logprobs: μ's log-probability of each generated token (natural log), one
            per ``response_ids`` entry.
        stopped: the sampler ended the response on EOS or a stop string (finish reason
            STOP); a response without EOS that did not stop was cut at the length limit.
        policy_version: the policy version that sampled it.
        reward: the outcome reward, or None when it is missing (never 0 for missing); with
            several weighted rewards per task, the combined one (what trains).
        primary_reward: the primary (first) reward when ``reward`` combines several (what
            correct counts read); None = ``reward`` itself.
        step_ends: token index (0-based, within the response) ending each process step.
        step_rewards: the reward of each process step (same length as ``step_ends``).
        top_k: the top-k the sampler used (0 = off).
        top_p: the top-p the sampler used (1 = off).
    """

    slot: int
    prompt_ids: Sequence[int]
    response_ids: Sequence[int]
    behavior_logprobs: Sequence[float]
    stopped: bool
    policy_version: int
    reward: float | None
    step_ends: Sequence[int] = ()
    step_rewards: Sequence[float] = ()
    top_k: int = 0
    top_p: float = 1.0
    primary_reward: float | None = None


@dataclass(frozen=True)
class GroupRows:
    """One closed group: the rows of its present members and what the diagnostics need.

    Attributes:
        group_id: the group's id.
        prompt_id: the prompt's id.
        task_type: ``Task.type`` of the prompt (a diagnostics slice).
        group_size: G requested for the group (members absent from ``rows`` count as
            missing rewards).
        rows: the present members, each with a distinct ``slot`` < ``group_size``.
        metadata: the task's metadata labels (source, difficulty, ...).
        straggler_wait_s: seconds between the first and the last scored member.
    """

    group_id: str
    prompt_id: str
    task_type: str
    group_size: int
    rows: Sequence[RolloutRow]
    metadata: Mapping[str, str] = field(default_factory=dict)
    straggler_wait_s: float = 0.0


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
        sampling_top_k: [N] int64, the top-k the sampler used for each row (0 = off).
        sampling_top_p: [N] float64, the top-p the sampler used for each row (1 = off).
    Python fields:
        prompt_len: P_len, the column where responses start.
        step_ends: per row, token index (0-based, within the response) ending each process step.
        step_rewards: per row, the reward of each process step (same length as ``step_ends``).
        group_ids, prompt_ids, task_types: per group.
        group_metadata: per group, the task's metadata labels (source, difficulty, ...).
        correct_rewards: [P, G] float32, the rewards correct counts read: each row's
            ``primary_reward`` where given, else its reward; NaN where the reward is missing.
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
    sampling_top_k: torch.Tensor
    sampling_top_p: torch.Tensor
    prompt_len: int
    step_ends: list[list[int]] = field(default_factory=list)
    step_rewards: list[list[float]] = field(default_factory=list)
    group_ids: list[str] = field(default_factory=list)
    prompt_ids: list[str] = field(default_factory=list)
    task_types: list[str] = field(default_factory=list)
    group_metadata: list[dict[str, str]] = field(default_factory=list)
    correct_rewards: torch.Tensor | None = None

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
    def generated_lengths(self) -> torch.Tensor:
        """[N] int64, generated tokens per row (the response columns the attention sees; EOS
        and anything after it included)."""
        return self.attention_mask[:, self.prompt_len :].sum(dim=1)

    def columns(self, rows: torch.Tensor) -> tuple[slice, int]:
        """The columns a forward of ``rows`` needs, and T_mb.

        Args:
            rows: [n] int64 row indices.

        Returns:
            (the slice of columns from ``rows``' longest prompt to their longest response,
            T_mb = their longest response in tokens, at least 1).
        """
        p = self.prompt_len
        att = self.attention_mask[rows]
        p_mb = int(att[:, :p].sum(dim=1).max())
        t_mb = max(1, int(att[:, p:].sum(dim=1).max()))
        return slice(p - p_mb, p + t_mb), t_mb

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


def check_group_rows(group: GroupRows) -> None:
    """Check that a group can be trained on (the checks ``pad_batch`` relies on).

    Raises:
        InvalidArgumentError: the group has no rows, or fewer than 2 slots (G < 2).
        ContractError: a slot is outside the group or repeated, a row has no prompt tokens,
            its behavior log-probs do not have one entry per response token, or its process
            steps and step rewards differ in length.
    """
    gid = group.group_id
    if not group.rows:
        raise InvalidArgumentError(f"group {gid!r} has no members")
    size = max(int(group.group_size), len(group.rows))
    if size < 2:
        raise InvalidArgumentError(f"group {gid!r} has group size {size}; GRPO needs >= 2")
    seen: set[int] = set()
    for row in group.rows:
        slot = int(row.slot)
        if not 0 <= slot < size or slot in seen:
            raise ContractError(
                f"group {gid!r}: member index {slot} is outside group size {size} or repeated"
            )
        seen.add(slot)
        if not row.prompt_ids:
            raise ContractError(f"group {gid!r} member {slot}: empty prompt_token_ids")
        n_tok = len(row.response_ids)
        if len(row.behavior_logprobs) != n_tok:
            raise ContractError(
                f"group {gid!r} member {slot}: {len(row.behavior_logprobs)} "
                f"behavior_logprobs for {n_tok} token_ids"
            )
        if len(row.step_ends) != len(row.step_rewards):
            raise ContractError(
                f"group {gid!r} member {slot}: {len(row.step_ends)} process step ends for "
                f"{len(row.step_rewards)} step rewards"
            )


def pad_batch(
    groups: Sequence[GroupRows],
    *,
    pad_token_id: int,
    eos_token_id: int,
    mask_truncated: bool = False,
) -> TrainingBatch:
    """Build the padded training batch from closed groups' rows.

    Args:
        groups: P closed groups; each row's ``slot`` places it in the group.
        pad_token_id: id used for padding (may equal ``eos_token_id``).
        eos_token_id: EOS id; the first EOS ends a response and is inside the mask.
        mask_truncated: exclude responses cut at the length limit from the loss.

    Returns:
        A ``TrainingBatch`` with N rows (present members) and rewards shaped [P, G], G the
        largest ``group_size`` among the groups. A reward that is None or not finite is
        missing (NaN, ``reward_valid`` False). Process steps ending past a response's first
        EOS are dropped.

    Raises:
        InvalidArgumentError: no groups, or a group fails ``check_group_rows``.
        ContractError: a group fails ``check_group_rows``.
    """
    from grpo.learner.masks import response_mask

    if not groups:
        raise InvalidArgumentError("pad_batch needs at least one group, got none")
    for group in groups:
        check_group_rows(group)
    rewards, valid = _rewards(groups)
    rows = [row for group in groups for row in group.rows]  # N rows, groups in order
    rp = torch.tensor([p for p, g in enumerate(groups) for _ in g.rows], dtype=torch.long)
    rs = torch.tensor([int(row.slot) for row in rows], dtype=torch.long)
    prompt_len = max(len(row.prompt_ids) for row in rows)
    input_ids, attention, behavior = _pad_rows(rows, prompt_len, pad_token_id)
    masks = response_mask(
        input_ids[:, prompt_len:],
        eos_token_id=eos_token_id,
        pad_token_id=pad_token_id,
        lengths=torch.tensor([len(row.response_ids) for row in rows], dtype=torch.long),
    )
    # A response that ended on a stop string has no EOS but is finished, not truncated.
    stopped = torch.tensor([bool(row.stopped) for row in rows], dtype=torch.bool)
    trunc = masks.truncated & ~stopped
    resp_mask = masks.mask & ~trunc[:, None] if mask_truncated else masks.mask
    step_ends, step_rewards = _steps_inside(rows, masks.lengths)
    return TrainingBatch(
        input_ids=input_ids,
        attention_mask=attention,
        position_ids=(attention.cumsum(dim=1) - 1).clamp(min=0),
        response_ids=input_ids[:, prompt_len:].clone(),
        response_mask=resp_mask,
        behavior_logprobs=behavior,
        truncated=trunc,
        rewards=rewards,
        reward_valid=valid,
        row_prompt=rp,
        row_slot=rs,
        row_valid=valid[rp, rs],
        policy_versions=torch.tensor([int(row.policy_version) for row in rows], dtype=torch.long),
        straggler_wait_s=torch.tensor([g.straggler_wait_s for g in groups], dtype=torch.float64),
        sampling_top_k=torch.tensor([int(row.top_k) for row in rows], dtype=torch.long),
        sampling_top_p=torch.tensor([float(row.top_p) for row in rows], dtype=torch.float64),
        prompt_len=prompt_len,
        step_ends=step_ends,
        step_rewards=step_rewards,
        group_ids=[g.group_id for g in groups],
        prompt_ids=[g.prompt_id for g in groups],
        task_types=[g.task_type for g in groups],
        group_metadata=[dict(g.metadata) for g in groups],
        correct_rewards=_correct_rewards(groups, rewards),
    )


def _rewards(groups: Sequence[GroupRows]) -> tuple[torch.Tensor, torch.Tensor]:
    """Outcome rewards [P, G] float32 (NaN where missing: None, not finite or no member) and
    their validity [P, G] bool; G is the largest group size."""
    group_size = max(max(int(g.group_size), len(g.rows)) for g in groups)
    rewards = torch.full((len(groups), group_size), float("nan"), dtype=torch.float32)
    valid = torch.zeros((len(groups), group_size), dtype=torch.bool)
    for p, group in enumerate(groups):
        for row in group.rows:
            if row.reward is not None and math.isfinite(row.reward):
                rewards[p, int(row.slot)] = float(row.reward)
                valid[p, int(row.slot)] = True
    return rewards, valid


def _correct_rewards(groups: Sequence[GroupRows], rewards: torch.Tensor) -> torch.Tensor:
    """``rewards`` with each valid cell's ``primary_reward`` where the row gives one."""
    out = rewards.clone()
    for p, group in enumerate(groups):
        for row in group.rows:
            slot = int(row.slot)
            if row.primary_reward is not None and not math.isnan(float(out[p, slot])):
                out[p, slot] = float(row.primary_reward)
    return out


def _pad_rows(
    rows: Sequence[RolloutRow], prompt_len: int, pad_token_id: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Input ids [N, S] (prompts left-padded to ``prompt_len``, responses right-padded to the
    longest, at least 1 column), attention mask [N, S] and μ's log-probs [N, T] (0 on padding)."""
    resp_len = max(1, max(len(row.response_ids) for row in rows))
    input_ids = torch.full((len(rows), prompt_len + resp_len), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(rows), prompt_len + resp_len), dtype=torch.long)
    behavior = torch.zeros((len(rows), resp_len), dtype=torch.float32)
    for i, row in enumerate(rows):
        start = prompt_len - len(row.prompt_ids)
        input_ids[i, start:prompt_len] = torch.tensor(list(row.prompt_ids), dtype=torch.long)
        attention[i, start:prompt_len] = 1
        if len(row.response_ids) > 0:
            end = prompt_len + len(row.response_ids)
            input_ids[i, prompt_len:end] = torch.tensor(list(row.response_ids), dtype=torch.long)
            attention[i, prompt_len:end] = 1
            behavior[i, : len(row.response_ids)] = torch.tensor(
                list(row.behavior_logprobs), dtype=torch.float32
            )
    return input_ids, attention, behavior


def _steps_inside(
    rows: Sequence[RolloutRow], lengths: torch.Tensor
) -> tuple[list[list[int]], list[list[float]]]:
    """Each row's process step ends and rewards, without the steps that end at or past its
    response length (``lengths`` [N], the tokens up to the first EOS)."""
    step_ends: list[list[int]] = []
    step_rewards: list[list[float]] = []
    for row, length in zip(rows, lengths.tolist(), strict=True):
        keep = [k for k, e in enumerate(row.step_ends) if int(e) < length]
        step_ends.append([int(row.step_ends[k]) for k in keep])
        step_rewards.append([float(row.step_rewards[k]) for k in keep])
    return step_ends, step_rewards
