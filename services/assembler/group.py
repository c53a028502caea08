"""Group domain logic: member verdicts, the group life cycle, and building the closed Group.

A group is the G rollouts sampled for one prompt (GRPO, Shao et al. 2024, §4.1). Its life cycle
is a three-phase state machine kept per group id:

``OPEN`` --(all G members scored, or the group deadline passed)--> ``CLOSING``
``CLOSING`` --(Group or regeneration written, counters updated)--> ``CLOSED``

``CLOSING`` exists so that a crash between writing the group and updating the counters is
repaired by the next closer: writing is idempotent (dedup key = group id) and the counter
update happens exactly once, atomically with the move to ``CLOSED``. Rollouts arriving once a
group has left ``OPEN`` are late and ignored (counted).

A member's outcome reward counts when its verifier status is a verdict on the response
(``grpo.services.runtime.score_status``); otherwise the member is marked missing, never reward 0.
With several weighted rewards per task (``RewardComponent``), the member keeps every component
and the combined reward ``sum(weight * reward)``; one component without a verdict makes the
member missing (``score_status.combined_reward``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from enum import StrEnum
from typing import Protocol

from grpo.errors import ContractError
from grpo.services.runtime.score_status import combined_reward, is_verdict
from grpo.v1 import common_pb2

__all__ = [
    "Component",
    "GroupPhase",
    "assemble_group",
    "missing_score",
    "scored_member",
]


class GroupPhase(StrEnum):
    """Phase of a group in the assembler's state machine (see the module docstring)."""

    OPEN = "open"
    CLOSING = "closing"
    CLOSED = "closed"


def missing_score(detail: str, verifier: str = "") -> common_pb2.Score:
    """A Score with status INTERNAL standing for a reward that could not be obtained."""
    return common_pb2.Score(
        status=common_pb2.SCORE_STATUS_INTERNAL, detail=detail, verifier=verifier
    )


class Component(Protocol):
    """One weighted reward of a rollout (``verifier_client.ComponentScore``)."""

    @property
    def name(self) -> str: ...

    @property
    def weight(self) -> float: ...

    @property
    def score(self) -> common_pb2.Score | None: ...

    @property
    def failure(self) -> str: ...


def scored_member(
    rollout: common_pb2.Rollout,
    outcome: common_pb2.Score | None,
    process: common_pb2.Score | None = None,
    components: Sequence[Component] = (),
) -> common_pb2.ScoredRollout:
    """Attach verifier verdicts to ``rollout``.

    Args:
        rollout: the rollout as read from the rollouts stream.
        outcome: the primary outcome verifier's Score, or None when no verdict could be
            obtained.
        process: the process verifier's Score (per-step rewards), or None when not routed.
        components: every weighted outcome reward of the route, the primary one first (its
            score is ``outcome``); empty for a record without components (its only reward is
            ``outcome``, weight 1).

    Returns:
        A ScoredRollout. With ``components``: each is kept (a component without a score as an
        INTERNAL score with its failure), ``reward`` is the combined reward when every
        component is a verdict, else ``missing`` is set. Without: ``missing`` is set when the
        outcome is not valid (``grpo.services.runtime.score_status.is_verdict``). A missing
        reward is never read as 0.
    """
    if components:
        total = combined_reward((c.weight, c.score) for c in components)
        member = common_pb2.ScoredRollout(rollout=rollout, missing=total is None)
        for c in components:
            score = c.score if c.score is not None else missing_score(c.failure or "no score")
            member.components.add(name=c.name, weight=c.weight, score=score)
        if total is not None:
            member.reward = total
    else:
        member = common_pb2.ScoredRollout(rollout=rollout, missing=not is_verdict(outcome))
    member.outcome.CopyFrom(outcome if outcome is not None else missing_score("no outcome score"))
    if process is not None:
        member.process.CopyFrom(process)
    return member


def assemble_group(
    members: Iterable[common_pb2.ScoredRollout],
    *,
    group_id: str,
    group_size: int,
    status: common_pb2.GroupStatus,
    opened_unix_s: float,
    closed_unix_s: float,
    straggler_wait_s: float,
) -> common_pb2.Group:
    """Build the closed Group message, members ordered by index.

    Args:
        members: scored members (at most ``group_size``, distinct indices).
        group_id: the group's id; every member must carry it.
        group_size: requested G.
        status: COMPLETE when all G were scored, TIMED_OUT when the deadline closed it.
        opened_unix_s, closed_unix_s: first arrival and close times (Unix seconds).
        straggler_wait_s: time between the first and the last scored member (seconds).

    Raises:
        ContractError: a member of another group or prompt, a repeated or out-of-range index,
            or no member at all.
    """
    ordered = sorted(members, key=lambda m: m.rollout.index)
    if not ordered:
        raise ContractError(f"group {group_id!r} has no member")
    prompt_id = ordered[0].rollout.prompt_id
    seen: set[int] = set()
    for member in ordered:
        rollout = member.rollout
        if rollout.group_id != group_id:
            raise ContractError(f"rollout of group {rollout.group_id!r} inside group {group_id!r}")
        if rollout.prompt_id != prompt_id:
            raise ContractError(
                f"group {group_id!r} mixes prompts {prompt_id!r} and {rollout.prompt_id!r}"
            )
        if rollout.index >= group_size or rollout.index in seen:
            raise ContractError(
                f"group {group_id!r}: index {rollout.index} repeated or not below G={group_size}"
            )
        seen.add(rollout.index)
    return common_pb2.Group(
        group_id=group_id,
        prompt_id=prompt_id,
        group_size=group_size,
        members=ordered,
        status=status,
        round=ordered[0].rollout.round,
        opened_unix_s=opened_unix_s,
        closed_unix_s=closed_unix_s,
        straggler_wait_s=straggler_wait_s,
    )
