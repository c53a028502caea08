"""Dynamic sampling: which closed groups go to the learner, and regeneration of the others.

Implements DAPO's dynamic sampling (Yu et al. 2025, "DAPO", §3.2): a group whose members all
have the same outcome (all correct or all wrong) has zero group-relative advantage and adds no
gradient, so it is dropped and, optionally, the prompt is sampled again as a new group. Unlike
DAPO's "sample until the batch is full", regeneration is bounded by ``max_rounds`` per prompt
so an always-solved (or never-solved) prompt cannot loop forever.

"Correct" means a valid member whose primary outcome reward is >= ``correct_threshold``;
missing members (see ``grpo.services.assembler.group``) count neither as correct nor as wrong.
With several weighted rewards per task (``ScoredRollout.components``), the combined reward is
what trains, so it decides: a group whose valid members' combined rewards are all equal has
zero advantage and is dropped (as ``rejected_all_correct`` when every primary reward is
correct, else ``rejected_all_wrong``); with one reward the rule is DAPO's (0 < correct <
valid), as before (docs/learner-math.md, "Several rewards"). A group with fewer
than ``min_valid_members`` valid rewards is rejected whatever the mode, and so is a group with
more than ``max_undecided_frac`` of its members UNDECIDED (``grpo.services.runtime.score_status``):
an undecided reward is masked (advantage 0, above a wrong answer's), so a policy that learned
to make the verifier undecided would escape its 0s; dropping such groups removes the gain.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.score_status import is_undecided, is_verdict, member_reward
from grpo.services.settings.assembler import DynamicSamplingConfig, DynamicSamplingMode
from grpo.v1 import common_pb2

__all__ = ["Decision", "DynamicSampler", "GroupVerdict", "regenerated_group_id"]

_TIE = 1e-9
"""Combined rewards closer than this count as equal (zero advantage) for dynamic sampling."""


class GroupVerdict(StrEnum):
    """What dynamic sampling decided for a closed group; values are stats counter suffixes."""

    ACCEPTED = "accepted"
    REJECTED_ALL_CORRECT = "rejected_all_correct"
    REJECTED_ALL_WRONG = "rejected_all_wrong"
    REJECTED_TOO_FEW_VALID = "rejected_too_few_valid"
    REJECTED_TOO_MANY_UNDECIDED = "rejected_too_many_undecided"


@dataclass(frozen=True)
class Decision:
    """Verdict on one group.

    Attributes:
        verdict: accepted or the reason of rejection.
        regenerate: True when a regeneration PromptJob (round + 1) must be written.
        valid: members with a valid (combined) reward.
        correct: valid members whose primary outcome reward >= the threshold.
        undecided: members with an outcome component whose status is UNDECIDED.
        zero_variance: at least ``min_valid_members`` valid rewards with zero outcome
            advantage (all correct or all wrong; with several rewards, all combined rewards
            equal), whether the mode drops the group or keeps it.
    """

    verdict: GroupVerdict
    regenerate: bool
    valid: int
    correct: int
    undecided: int = 0
    zero_variance: bool = False


def regenerated_group_id(group_id: str, next_round: int) -> str:
    """Deterministic id of the regeneration of ``group_id`` at ``next_round``.

    ``p7/e0`` -> ``p7/e0/r1`` -> ``p7/e0/r2``: the same rejected group always yields the same
    id, so a replayed close writes the regeneration job at most once (dedup key = group id).
    """
    base, sep, last = group_id.rpartition("/r")
    if sep and last.isdigit():
        group_id = base
    return f"{group_id}/r{next_round}"


class DynamicSampler:
    """Applies a :class:`DynamicSamplingConfig` to closed groups (pure, no I/O)."""

    def __init__(self, config: DynamicSamplingConfig, min_valid_members: int = 2) -> None:
        """Args: config: the policy; min_valid_members: fewest valid rewards (>= 2) to train on.

        Raises:
            InvalidArgumentError: ``min_valid_members`` < 2.
        """
        if min_valid_members < 2:
            raise InvalidArgumentError(
                f"min_valid_members={min_valid_members}: group-relative advantages need >= 2"
            )
        self.config = config
        self.min_valid_members = min_valid_members

    def decide(self, group: common_pb2.Group) -> Decision:
        """Decide whether ``group`` is kept; counts valid and correct members.

        Raises:
            Nothing: every group gets a verdict.
        """
        valid = [m for m in group.members if member_reward(m) is not None]
        threshold = self.config.correct_threshold
        correct = sum(1 for m in valid if is_verdict(m.outcome) and m.outcome.reward >= threshold)
        undecided = sum(
            1
            for m in group.members
            if is_undecided(m.outcome) or any(is_undecided(c.score) for c in m.components)
        )
        if any(len(m.components) > 1 for m in valid):  # several rewards: the combined one
            combined = [member_reward(m) or 0.0 for m in valid]
            tied = bool(valid) and max(combined) - min(combined) <= _TIE
        else:
            tied = correct in (0, len(valid))
        size = max(group.group_size, len(group.members), 1)
        if undecided > self.config.max_undecided_frac * size:
            verdict = GroupVerdict.REJECTED_TOO_MANY_UNDECIDED
        elif len(valid) < self.min_valid_members:
            verdict = GroupVerdict.REJECTED_TOO_FEW_VALID
        elif self.config.mode is DynamicSamplingMode.OFF or not tied:
            verdict = GroupVerdict.ACCEPTED
        elif correct == len(valid):
            verdict = GroupVerdict.REJECTED_ALL_CORRECT
        else:
            verdict = GroupVerdict.REJECTED_ALL_WRONG
        regenerate = (
            verdict is not GroupVerdict.ACCEPTED
            and self.config.regenerate
            and group.round < self.config.max_rounds
        )
        return Decision(
            verdict=verdict,
            regenerate=regenerate,
            valid=len(valid),
            correct=correct,
            undecided=undecided,
            zero_variance=len(valid) >= self.min_valid_members and tied,
        )

    def regeneration_job(self, group: common_pb2.Group) -> common_pb2.PromptJob:
        """The PromptJob that samples ``group``'s prompt again at round + 1.

        Raises:
            InvalidArgumentError: the group has no member (no task to resample) or its round
                already reached ``max_rounds``.
        """
        if not group.members:
            raise InvalidArgumentError(f"group {group.group_id!r} has no member to resample")
        if group.round >= self.config.max_rounds:
            raise InvalidArgumentError(
                f"group {group.group_id!r} is at round {group.round} >= max_rounds "
                f"{self.config.max_rounds}; it must not be regenerated"
            )
        next_round = group.round + 1
        return common_pb2.PromptJob(
            group_id=regenerated_group_id(group.group_id, next_round),
            task=group.members[0].rollout.task,
            group_size=group.group_size,
            round=next_round,
        )
