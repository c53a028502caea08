"""Assembler counters and the identity they satisfy.

Counters live in one Redis hash (so a restarted assembler keeps them) and are updated by the
same atomic scripts that move groups through their phases, so they never drift from the state.

Identity (checked by :func:`stats_identity_gap`, tested end to end)::

    groups_opened = groups_accepted
                  + groups_rejected_all_correct + groups_rejected_all_wrong
                  + groups_rejected_too_few_valid + groups_rejected_too_many_undecided
                  + groups_pending

i.e. opened = accepted + rejected + pending, where "rejected" is the sum of ``REJECTIONS``
(groups closed by their deadline with too few valid rewards included). ``groups_timed_out``
counts deadline closures; each of them is also counted once in accepted or one of the
rejected counters (a timed-out group with enough valid rewards is still trained on), so it is
not a separate term.
"""

from __future__ import annotations

from collections.abc import Mapping

from grpo.v1 import assembler_pb2

__all__ = [
    "COUNTERS",
    "REJECTIONS",
    "run_accounting",
    "stats_from_counters",
    "stats_identity_gap",
]

#: Counter names stored in Redis; each is a field of ``AssemblerStats`` except
#: ``verifier_outage_ms`` (reported as ``verifier_outage_s``). ``groups_pending``,
#: ``rollouts_held`` and ``redis_outage_s`` are live values, not counters.
COUNTERS: tuple[str, ...] = (
    "rollouts_received",
    "rollouts_late",
    "groups_opened",
    "groups_accepted",
    "groups_rejected_all_correct",
    "groups_rejected_all_wrong",
    "groups_rejected_too_few_valid",
    "groups_rejected_too_many_undecided",
    "groups_timed_out",
    "rewards_missing",
    "rewards_undecided",
    "regenerations",
    "generated_tokens",
    "kept_tokens",
    "verifier_failures",
    "groups_closed_short",
    "rollouts_in_closed_groups",
    "verifier_outage_ms",
    "groups_zero_variance",
    "zero_variance_tokens",
)


def stats_from_counters(
    counters: Mapping[str, int],
    groups_pending: int,
    *,
    rollouts_held: int = 0,
    verifier_outage_open_s: float = 0.0,
    redis_outage_s: float = 0.0,
) -> assembler_pb2.AssemblerStats:
    """Build the AssemblerStats message from raw counters (absent counters are 0).

    Args:
        counters: counter name -> value, as stored in Redis.
        groups_pending: groups not yet closed, counted from the group state itself (the set
            of open groups), not derived from the counters, so the identity is a real check.
        rollouts_held: rollouts held unscored by this process (verifier unavailable).
        verifier_outage_open_s: seconds of the verifier outage in progress (not yet counted).
        redis_outage_s: seconds this process could not reach Redis.
    """
    stats = assembler_pb2.AssemblerStats(
        groups_pending=groups_pending,
        rollouts_held=rollouts_held,
        verifier_outage_s=counters.get("verifier_outage_ms", 0) / 1000 + verifier_outage_open_s,
        redis_outage_s=redis_outage_s,
    )
    for name in COUNTERS:
        if name != "verifier_outage_ms":
            setattr(stats, name, int(counters.get(name, 0)))
    return stats


#: The rejection counters: every reason a closed group is dropped (each closed group is in
#: ``groups_accepted`` or exactly one of these). Every ``groups_rejected_*`` field of
#: ``AssemblerStats`` (tested), so "rejected" means the same sum everywhere.
REJECTIONS: tuple[str, ...] = (
    "groups_rejected_all_correct",
    "groups_rejected_all_wrong",
    "groups_rejected_too_few_valid",
    "groups_rejected_too_many_undecided",
)


def stats_identity_gap(stats: assembler_pb2.AssemblerStats) -> int:
    """groups_opened − (accepted + rejected + pending); 0 when the counters add up
    ("rejected" = the sum of ``REJECTIONS``; timed-out groups are not a term)."""
    rejected = sum(int(getattr(stats, name)) for name in REJECTIONS)
    return stats.groups_opened - (stats.groups_accepted + rejected + stats.groups_pending)


def run_accounting(
    stats: assembler_pb2.AssemblerStats,
    rollouts_produced: int | None,
    rollouts_queued: int | None,
) -> dict[str, object]:
    """The accounting block of ``summary.json``: groups and rollouts, each checkable.

    Args:
        stats: the assembler's counters at the end of the run.
        rollouts_produced: entries on the rollouts stream (one per (group id, index): the
            workers write with a dedup key); None when it could not be read.
        rollouts_queued: entries of the rollouts stream the assembler has not acknowledged
            (never delivered + delivered and pending, which includes the held ones): durable
            in the stream, scored by the next assembler that reads it (a resumed run); None
            when it could not be read.

    Returns:
        ``groups`` (opened, accepted, rejected = the sum of ``rejected_by_reason``: all
        correct, all wrong, too few valid, too many undecided; pending, the identity gap
        ``opened - (accepted + rejected + pending)``, and reported beside it timed out (each
        timed-out group is already counted as accepted or rejected, so it is no term) and
        closed short); ``rewards`` (missing members, of which undecided) and ``rollouts``
        (produced, scored = recorded in a group, in closed groups, late = arrived after
        their group closed, queued = not yet acknowledged by the assembler, of which held =
        waiting for a verifier, and ``unaccounted`` = produced - scored - late - queued: 0
        when nothing was lost, exact once the assembler has stopped; read while it runs it
        can be off by the batch it has recorded but not yet acknowledged; None when produced
        or queued is None).
    """
    by_reason = {name.removeprefix("groups_rejected_"): getattr(stats, name) for name in REJECTIONS}
    unaccounted = None
    if rollouts_produced is not None and rollouts_queued is not None:
        unaccounted = (
            rollouts_produced - stats.rollouts_received - stats.rollouts_late - rollouts_queued
        )
    return {
        "groups": {
            "opened": stats.groups_opened,
            "accepted": stats.groups_accepted,
            "rejected": sum(by_reason.values()),
            "rejected_by_reason": by_reason,
            "pending": stats.groups_pending,
            "identity": "opened = accepted + rejected + pending",
            "identity_gap": stats_identity_gap(stats),
            "timed_out": stats.groups_timed_out,
            "closed_short": stats.groups_closed_short,
        },
        "rewards": {"missing": stats.rewards_missing, "undecided": stats.rewards_undecided},
        "rollouts": {
            "produced": rollouts_produced,
            "scored": stats.rollouts_received,
            "in_closed_groups": stats.rollouts_in_closed_groups,
            "late": stats.rollouts_late,
            "queued": rollouts_queued,
            "held": stats.rollouts_held,
            "identity": "produced = scored + late + queued + unaccounted",
            "unaccounted": unaccounted,
        },
    }
