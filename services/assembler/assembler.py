"""The assembler: scores rollouts, records them per group, closes groups, applies dynamic sampling.

``Assembler.submit(rollouts)`` is the one entry point for rollouts (stream consumer and the
SubmitRollouts RPC both call it):

1. rollouts already stored (a replay) or of closed groups are not scored again;
2. the others are scored by the outcome and (when routed) process verifiers;
3. each scored member is recorded with HSETNX in the group store (idempotent, atomic);
4. every group that now holds all G members is closed: OPEN -> CLOSING, the Group (members
   ordered by index) is written to the groups stream with dedup key = group id — or, when
   dynamic sampling rejects it, a regeneration PromptJob (round + 1, bounded by max_rounds)
   goes to the prompts stream with dedup key = its new group id — then CLOSING -> CLOSED with
   the counters updated exactly once.

The caller acknowledges stream entries only after ``submit`` returns, i.e. after the member
writes and any close are durable in Redis; a crash anywhere replays the entries and every
step above is idempotent. ``sweep(now)`` closes groups whose deadline passed (and finishes
closes interrupted by a crash).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

from grpo.errors import ContractError
from grpo.services.assembler.group import GroupPhase, assemble_group, scored_member
from grpo.services.assembler.sampling import DynamicSampler, GroupVerdict
from grpo.services.assembler.store import GroupStore
from grpo.services.runtime.accounting import MISSING_PREFIX
from grpo.services.runtime.score_status import member_missing_reason
from grpo.services.runtime.verifier_client import RolloutScores
from grpo.services.settings.assembler import AssemblerConfig
from grpo.v1 import common_pb2

__all__ = ["Assembler", "GroupSink", "Scorer", "SubmitResult"]

log = logging.getLogger(__name__)

_COMPLETE = common_pb2.GROUP_STATUS_COMPLETE
_TIMED_OUT = common_pb2.GROUP_STATUS_TIMED_OUT


class Scorer(Protocol):
    """Scores rollouts (``VerifierClient`` in production)."""

    def score(self, rollouts: Sequence[common_pb2.Rollout]) -> list[RolloutScores]:
        """One RolloutScores per rollout, in order."""
        ...


class GroupSink(Protocol):
    """Where closed groups and regeneration jobs go (Redis streams in production)."""

    def write_group(self, group: common_pb2.Group) -> None:
        """Write an accepted group; idempotent per group id."""
        ...

    def write_regeneration(self, job: common_pb2.PromptJob) -> None:
        """Write a regeneration prompt; idempotent per job group id."""
        ...


@dataclass(frozen=True)
class SubmitResult:
    """Result of one ``submit`` call.

    Attributes:
        accepted: rollouts newly recorded.
        duplicates: rollouts already recorded, or arriving after their group closed.
        closed: ids of groups this call closed.
        held: positions (in the submitted sequence) of rollouts not recorded because their
            verifier was unavailable; submit them again later.
    """

    accepted: int
    duplicates: int
    closed: tuple[str, ...]
    held: tuple[int, ...] = ()


class Assembler:
    """Turns rollouts into closed, dynamically sampled groups (see the module docstring)."""

    def __init__(
        self,
        store: GroupStore,
        scorer: Scorer,
        sink: GroupSink,
        config: AssemblerConfig,
        *,
        clock: Callable[[], float] = time.time,
        on_close: Callable[[common_pb2.Group, GroupVerdict], None] | None = None,
    ) -> None:
        """Args: store: Redis group store; scorer: verifier client; sink: output streams;
        config: assembly settings; clock: Unix seconds; on_close: optional callback per closed
        group (logging)."""
        self.store = store
        self._scorer = scorer
        self._sink = sink
        self._config = config
        self._clock = clock
        self._on_close = on_close
        self._sampler = DynamicSampler(config.dynamic_sampling, config.min_valid_members)
        self._named_golds: set[str] = set()  # tasks whose unparsable gold was logged

    def submit(
        self, rollouts: Sequence[common_pb2.Rollout], *, hold_unavailable: bool = True
    ) -> SubmitResult:
        """Score, record and, where complete, close groups (idempotent per (group id, index)).

        Args:
            rollouts: any rollouts, any groups, any order.
            hold_unavailable: leave rollouts whose verifier was unavailable unrecorded (in
                ``held``); False records them with the reward missing (the outage budget of
                the caller ran out).

        Returns:
            SubmitResult with counts and the groups closed by this call.

        Raises:
            ContractError: a rollout without group id, with index >= group_size, or with a
                completion whose token ids and behavior log-probs differ in length.
            UnavailableError: Redis cannot be reached (nothing is acknowledged then).
        """
        for rollout in rollouts:
            completion = rollout.completion
            if len(completion.behavior_logprobs) != len(completion.token_ids):
                raise ContractError(
                    f"rollout {rollout.group_id!r}#{rollout.index}: "
                    f"{len(completion.token_ids)} token ids but "
                    f"{len(completion.behavior_logprobs)} behavior log-probs"
                )
        if not rollouts:
            return SubmitResult(0, 0, ())
        known = self.store.stored_indices(rollouts)
        fresh_at = [i for i, k in enumerate(known) if not k]
        fresh = [rollouts[i] for i in fresh_at]
        scores = self._scorer.score(fresh) if fresh else []
        held = tuple(
            i
            for i, verdict in zip(fresh_at, scores, strict=True)
            if hold_unavailable and getattr(verdict, "unavailable", False)
        )
        take_stats = getattr(self._scorer, "take_endpoint_stats", None)
        if callable(take_stats):  # the verifier client's calls per address, for the summary
            self.store.add_endpoint_stats(take_stats())
        members = []
        for i, rollout, verdict in zip(fresh_at, fresh, scores, strict=True):
            if i in held:
                continue
            components = getattr(verdict, "components", ())
            if verdict.outcome is None or any(c.score is None for c in components):
                self.store.add("verifier_failures")
                log.warning(
                    "group %s index %d: reward missing (%s)",
                    rollout.group_id,
                    rollout.index,
                    verdict.failure,
                )
            member = scored_member(rollout, verdict.outcome, verdict.process, components)
            if verdict.outcome is None and verdict.failure:
                member.outcome.detail = verdict.failure
            members.append(member)
        # Replays are recorded again (no-ops) so a group completed before a crash is closed now.
        replays = [scored_member(r, None) for r, k in zip(rollouts, known, strict=True) if k]
        results = self.store.record(members + replays, self._clock())
        accepted = sum(1 for r in results if r.added)
        to_close = sorted(
            {
                m.rollout.group_id
                for m, r in zip(members + replays, results, strict=True)
                if r.complete
            }
        )
        closed = tuple(g for g in to_close if self._close(g, "complete"))
        return SubmitResult(
            accepted=accepted,
            duplicates=len(rollouts) - accepted - len(held),
            closed=closed,
            held=held,
        )

    def sweep(
        self, now: float | None = None, limit: int = 100, *, exclude: frozenset[str] = frozenset()
    ) -> tuple[str, ...]:
        """Close groups whose deadline passed (members that never arrived are left out),
        except those in ``exclude`` (members of theirs are in a verifier call right now: the
        call's answer, not the clock, decides them).

        Returns:
            Ids of groups closed by this call.
        """
        now = self._clock() if now is None else now
        expired = [g for g in self.store.expired(now, limit) if g not in exclude]
        return tuple(g for g in expired if self._close(g, "timed_out"))

    def _close(self, group_id: str, status: str) -> bool:
        now = self._clock()
        if not self.store.begin_close(group_id, status, now):
            return False
        meta, members = self.store.load(group_id)
        if meta.phase is GroupPhase.CLOSED:
            return False
        timed_out = meta.close_status == "timed_out"
        increments: dict[str, int] = {}
        if not members:
            # Nothing stored (cannot normally happen: a group opens with its first member).
            increments["groups_rejected_too_few_valid"] = 1
            increments["groups_timed_out"] = int(timed_out)
            return self.store.commit_close(group_id, increments)
        group = assemble_group(
            members,
            group_id=group_id,
            group_size=meta.group_size,
            status=common_pb2.GROUP_STATUS_TIMED_OUT
            if timed_out
            else common_pb2.GROUP_STATUS_COMPLETE,
            opened_unix_s=meta.opened_unix_s,
            closed_unix_s=meta.closed_unix_s,
            straggler_wait_s=max(0.0, meta.last_scored_unix_s - meta.first_scored_unix_s),
        )
        decision = self._sampler.decide(group)
        tokens = sum(len(m.rollout.completion.token_ids) for m in group.members)
        if decision.zero_variance:
            increments["groups_zero_variance"] = 1
            increments["zero_variance_tokens"] = tokens
        if decision.verdict is GroupVerdict.ACCEPTED:
            self._sink.write_group(group)
            increments["kept_tokens"] = tokens
        elif decision.regenerate:
            self._sink.write_regeneration(self._sampler.regeneration_job(group))
            increments["regenerations"] = 1
        increments[f"groups_{decision.verdict.value}"] = 1
        increments["groups_timed_out"] = int(timed_out)
        increments["rewards_missing"] = sum(1 for m in group.members if m.missing)
        for member in group.members:
            if member.missing:
                reason = member_missing_reason(member)
                key = MISSING_PREFIX + reason
                increments[key] = increments.get(key, 0) + 1
                if reason == "gold_unparsable" and group.prompt_id not in self._named_golds:
                    self._named_golds.add(group.prompt_id)
                    log.warning(
                        "task %s: the verifier cannot parse its gold answer (%s); its rewards "
                        "are missing",
                        group.prompt_id,
                        member.outcome.detail[:200],
                        extra={"missing_reason": reason, "task_id": group.prompt_id},
                    )
        increments["rewards_undecided"] = decision.undecided
        increments["rollouts_in_closed_groups"] = len(group.members)
        short = len(group.members) < meta.group_size
        increments["groups_closed_short"] = int(short)
        committed = self.store.commit_close(group_id, increments)
        if committed and short:
            log.warning(
                "group %s closed short: %d of %d members (deadline %s), %s",
                group_id,
                len(group.members),
                meta.group_size,
                meta.close_status,
                decision.verdict.value,
            )
        if committed and self._on_close is not None:
            self._on_close(group, decision.verdict)
        return committed
