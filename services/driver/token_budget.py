"""The generated-token budget (``budget.generated_tokens``): how many more prompt jobs the run
driver may feed so that generation can never pass the budget, and when the budget is spent.

Tokens are the assembler's count (``AssemblerStats.generated_tokens``: the completion tokens of
every rollout it received, rejected groups included). A rollout is counted only once it is
scored, so the jobs already written are reserved at their worst case until they are counted:

- one rollout: L_max tokens (``generation.max_new_tokens``);
- one job: its G rollouts, and, when dynamic sampling writes a regeneration job for a
  rejected group (``assembler.dynamic_sampling.regenerate``), up to ``max_rounds`` more groups
  of its prompt: W = G·L_max·(1 + rounds) tokens.

committed = counted + L_max · (rollouts of open groups not yet received)
            + G·L_max·rounds · (open groups: issued and not yet closed)

where "issued" is the jobs this driver fed plus the regeneration jobs the assembler wrote, and
a job the rollout workers moved to dead letters (an invalid prompt) is closed with no rollout.
The driver feeds ⌊(budget − committed) / W⌋ more jobs: none whose worst case could pass what
is left. As rollouts arrive their L_max reservations give way to their real lengths and the
room frees up again (reconciled on each poll). The budget is spent when the counted tokens
reach it, or when every issued group has closed and what is left is less than W: no further
job fits. Generation so stops at most W tokens below the budget and never above it.

A rollout that arrives after its group closed (``rollouts_late``) is not counted by the
assembler, so only the rollouts of open groups are reserved. Counts start at the driver's
first poll; a restarted driver counts the jobs an earlier one left in flight as issued
(``RunDriver``: the prompt jobs the rollout workers have not finished and the open groups).
"""

from __future__ import annotations

from dataclasses import dataclass

from grpo.errors import InvalidArgumentError
from grpo.services.settings.run import RunConfig
from grpo.v1 import assembler_pb2

__all__ = ["TokenCounts", "TokenGate", "closed_groups"]


def closed_groups(stats: assembler_pb2.AssemblerStats) -> int:
    """Groups the assembler closed, whatever its verdict (accepted or rejected by reason)."""
    return int(
        stats.groups_accepted
        + stats.groups_rejected_all_correct
        + stats.groups_rejected_all_wrong
        + stats.groups_rejected_too_few_valid
        + stats.groups_rejected_too_many_undecided
    )


@dataclass(frozen=True)
class TokenCounts:
    """What the gate reads, counted since the driver's first poll (its baseline) except
    ``counted``.

    Attributes:
        counted: generated tokens the assembler counted over the whole run.
        issued_jobs: prompt jobs written: fed by this driver, the assembler's regenerations,
            and the jobs an earlier driver left in flight at the baseline.
        received: rollouts the assembler received (scored and counted).
        late: rollouts that arrived after their group closed (never counted).
        closed: groups closed (any verdict) plus jobs moved to dead letters (no rollout).
    """

    counted: int
    issued_jobs: int
    received: int
    late: int
    closed: int


@dataclass(frozen=True)
class TokenGate:
    """The worst-case arithmetic of the token budget (module docstring).

    Attributes:
        budget: generated tokens allowed (``budget.generated_tokens``; 0 = no bound).
        group_size: G rollouts per job.
        max_new_tokens: L_max, the most tokens one rollout can have.
        regeneration_rounds: most regeneration jobs one fed job can cause (0 when dynamic
            sampling never regenerates).
    """

    budget: int
    group_size: int
    max_new_tokens: int
    regeneration_rounds: int = 0

    def __post_init__(self) -> None:
        if self.budget < 0 or self.group_size < 1 or self.max_new_tokens < 1:
            raise InvalidArgumentError(
                f"token gate needs budget >= 0, G >= 1, L_max >= 1; got {self.budget}, "
                f"{self.group_size}, {self.max_new_tokens}"
            )
        if self.regeneration_rounds < 0:
            raise InvalidArgumentError(
                f"regeneration_rounds must be >= 0, got {self.regeneration_rounds}"
            )

    @classmethod
    def of(cls, config: RunConfig) -> TokenGate:
        """The gate of a run: its budget, G, L_max and regeneration rounds."""
        return cls(
            budget=config.budget.generated_tokens,
            group_size=config.generation.group_size,
            max_new_tokens=config.generation.max_new_tokens,
            regeneration_rounds=config.regeneration_rounds,
        )

    @property
    def group_worst_case(self) -> int:
        """G·L_max: the most tokens one group can have."""
        return self.group_size * self.max_new_tokens

    @property
    def job_worst_case(self) -> int:
        """W = G·L_max·(1 + rounds): the most tokens one fed job can cause."""
        return self.group_worst_case * (1 + self.regeneration_rounds)

    def open_groups(self, counts: TokenCounts) -> int:
        """Issued groups that have not closed yet."""
        return max(0, counts.issued_jobs - counts.closed)

    def committed(self, counts: TokenCounts) -> int:
        """Counted tokens plus the worst case of everything issued and not yet counted."""
        open_groups = self.open_groups(counts)
        # Rollouts still to come, only of open groups: one of a closed group would be late
        # (never counted), and members a group closed without may never come.
        missing = counts.issued_jobs * self.group_size - counts.received - counts.late
        in_flight = max(0, min(open_groups * self.group_size, missing))
        regenerations = open_groups * self.regeneration_rounds
        return (
            counts.counted + in_flight * self.max_new_tokens + regenerations * self.group_worst_case
        )

    def jobs(self, counts: TokenCounts, limit: int) -> int:
        """Jobs that may be fed now (at most ``limit``; ``limit`` when there is no budget):
        ⌊(budget − committed) / W⌋."""
        if not self.budget:
            return limit
        left = self.budget - self.committed(counts)
        return max(0, min(limit, left // self.job_worst_case))

    def spent(self, counts: TokenCounts) -> bool:
        """The budget is spent: the counted tokens reached it, or nothing is open and no
        further job fits in what is left. Always False without a budget."""
        if not self.budget:
            return False
        if counts.counted >= self.budget:
            return True
        return self.open_groups(counts) == 0 and self.jobs(counts, 1) == 0
