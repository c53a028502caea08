"""Configuration of the assembler's domain logic: dynamic sampling, group deadlines, verifier calls.

One frozen pydantic model per component; each field is documented once, beside it. The service
settings (``grpo.services.assembler.service.AssemblerSettings``) nest these models.
"""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.services.runtime.rpc_retry import worst_case_s
from grpo.services.runtime.verifier_client import VerifierClientConfig

__all__ = [
    "AssemblerConfig",
    "DynamicSamplingConfig",
    "DynamicSamplingMode",
    "check_reclaim_before_deadline",
    "reclaim_idle_ms_for",
]

RECLAIM_SHARE = 0.25
"""Default reclaim delay as a share of the group deadline (``reclaim_idle_ms_for``)."""
MAX_RECLAIM_SHARE = 0.5
"""Longest reclaim delay as a share of the group deadline (``check_reclaim_before_deadline``):
the other half is left for regenerating and scoring what the dead consumer held."""


def reclaim_idle_ms_for(group_deadline_s: float) -> int:
    """The reclaim delay derived from a group deadline: ``RECLAIM_SHARE`` of it, in ms.

    A consumer (rollout worker, assembler) that dies holding part of a group leaves entries
    pending; another one takes them over after this idle time, well before the group's
    deadline closes it short.
    """
    return max(100, int(group_deadline_s * 1000 * RECLAIM_SHARE))


def check_reclaim_before_deadline(reclaim_idle_ms: int, group_deadline_s: float, what: str) -> None:
    """Refuse a reclaim delay that races the group deadline.

    Args:
        reclaim_idle_ms: the consumer's reclaim delay (ms).
        group_deadline_s: the assembler's group deadline (seconds).
        what: the setting's name for the message (e.g. ``"rollout worker reclaim_idle_ms"``).

    Raises:
        ValueError: ``reclaim_idle_ms`` exceeds ``MAX_RECLAIM_SHARE`` of the deadline.
    """
    limit = group_deadline_s * 1000 * MAX_RECLAIM_SHARE
    if reclaim_idle_ms > limit:
        raise ValueError(
            f"{what} ({reclaim_idle_ms} ms) races the group deadline "
            f"({group_deadline_s} s): a job reclaimed that late may miss its group's close; "
            f"keep it <= {int(limit)} ms (half the deadline; default: a quarter, "
            f"{reclaim_idle_ms_for(group_deadline_s)} ms)"
        )


class DynamicSamplingMode(StrEnum):
    """Which closed groups dynamic sampling keeps for training.

    ``mixed`` keeps groups with 0 < correct < valid members (DAPO's dynamic sampling: groups
    whose rewards all agree have zero advantage and carry no gradient signal); ``off`` keeps
    every group that has at least ``min_valid_members`` valid rewards.
    """

    MIXED = "mixed"
    OFF = "off"


class DynamicSamplingConfig(BaseModel):
    """Dynamic sampling (DAPO, Yu et al. 2025, §3.2) with a bound on regeneration rounds."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    mode: DynamicSamplingMode = Field(
        default=DynamicSamplingMode.MIXED,
        description="'mixed' keeps groups with 0 < correct < valid; 'off' keeps every group.",
    )
    regenerate: bool = Field(
        default=True,
        description="Write a regeneration PromptJob (round + 1) for each rejected group.",
    )
    max_rounds: int = Field(
        default=1,
        ge=0,
        le=16,
        description="Highest regeneration round: a group of round >= max_rounds is never "
        "regenerated, so a prompt is sampled at most max_rounds + 1 times.",
    )
    correct_threshold: float = Field(
        default=1.0,
        description="An outcome reward >= this counts as correct (1.0: exact answer, or every "
        "test passed for a fractional code reward).",
    )
    max_undecided_frac: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="A group with more than this share of members whose verifier answered "
        "UNDECIDED (missing, not 0) is dropped and counted (rejected_too_many_undecided); 0 "
        "drops any group with one, so a response can never turn its 0 into a masked reward.",
    )


class AssemblerConfig(BaseModel):
    """Group assembly: deadlines, validity, dynamic sampling, stream consumption."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    group_deadline_s: float = Field(
        default=300.0,
        gt=0,
        description="A group still open this long after its first rollout arrived is closed; "
        "members that have not arrived are left out and unscored ones marked missing (seconds). "
        "At least one verifier call's worst case (verifier.timeout_s x max_attempts + the "
        "backoffs); the clock stops while a verifier is stalled or out (deadlines move on by "
        "that time).",
    )
    min_valid_members: int = Field(
        default=2,
        ge=2,
        description="Fewest members with a valid outcome reward for a group to be trainable "
        "(group-relative advantages need at least 2).",
    )
    dynamic_sampling: DynamicSamplingConfig = Field(
        default_factory=DynamicSamplingConfig, description="Dynamic sampling policy."
    )
    verifier: VerifierClientConfig = Field(
        default_factory=VerifierClientConfig, description="Verifier call settings."
    )
    consumer_group: str = Field(
        default="assembler",
        min_length=1,
        description="Redis consumer group on the rollouts stream.",
    )
    consume_count: int = Field(
        default=64, ge=1, description="Most rollouts read from the stream per batch."
    )
    block_ms: int = Field(
        default=200, ge=1, description="How long one stream read waits for new rollouts (ms)."
    )
    reclaim_idle_ms: int = Field(
        default=30_000,
        ge=100,
        description="Pending rollouts idle this long (a dead consumer's) are reclaimed (ms).",
    )
    sweep_interval_s: float = Field(
        default=1.0,
        gt=0,
        description="How often expired groups are looked for (seconds); a thread of its own, "
        "so deadlines fire while a verifier call is in flight (never for the groups in that "
        "call; paused while it is past one attempt's deadline).",
    )

    @model_validator(mode="after")
    def _check_reclaim(self) -> AssemblerConfig:
        check_reclaim_before_deadline(
            self.reclaim_idle_ms, self.group_deadline_s, "assembler.reclaim_idle_ms"
        )
        worst = worst_case_s(self.verifier)
        if self.group_deadline_s < worst:
            v = self.verifier
            raise ValueError(
                f"assembler.group_deadline_s ({self.group_deadline_s:g} s) is shorter than one "
                f"verifier call's worst case ({worst:g} s = verifier.timeout_s {v.timeout_s:g} x "
                f"max_attempts {v.max_attempts} + backoffs): a group could close short while "
                f"its members' call is still retried; raise group_deadline_s to >= {worst:g} "
                "or lower assembler.verifier.timeout_s / max_attempts"
            )
        return self
