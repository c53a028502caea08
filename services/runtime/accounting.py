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

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import redis

from grpo.errors import UnavailableError
from grpo.services.runtime.streams import PAYLOAD_FIELD, Streams
from grpo.v1 import assembler_pb2, common_pb2

__all__ = [
    "COUNTERS",
    "MISSING_PREFIX",
    "REJECTIONS",
    "GroupAccounting",
    "RewardAccounting",
    "RolloutAccounting",
    "RunAccounting",
    "add_endpoint_stats",
    "endpoint_summary",
    "endpoints_key",
    "members_key",
    "open_key",
    "read_accounting",
    "read_endpoint_stats",
    "read_run_accounting",
    "run_accounting",
    "stats_from_counters",
    "stats_identity_gap",
    "stats_key",
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


MISSING_PREFIX = "rewards_missing:"
"""Counter-hash fields ``rewards_missing:<reason>`` count missing rewards per reason
(``grpo.services.runtime.score_status.missing_reason``); their sum is ``rewards_missing``."""


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


@dataclass(frozen=True)
class GroupAccounting:
    """Groups of a run: ``opened = accepted + rejected + pending`` (``identity_gap`` = 0 when
    the counters add up); ``timed_out`` and ``closed_short`` are reported beside it (each
    timed-out group is already accepted or rejected, so it is no term)."""

    opened: int
    accepted: int
    rejected_by_reason: Mapping[str, int]
    pending: int
    timed_out: int
    closed_short: int
    zero_variance: int = 0

    @property
    def rejected(self) -> int:
        """Every rejection reason summed (``REJECTIONS``)."""
        return sum(self.rejected_by_reason.values())

    @property
    def identity_gap(self) -> int:
        """``opened - (accepted + rejected + pending)``; 0 when nothing is off."""
        return self.opened - (self.accepted + self.rejected + self.pending)


@dataclass(frozen=True)
class RewardAccounting:
    """Members whose reward is missing (masked, never 0), ``undecided`` of them; and per
    reason (``score_status.missing_reason``: undecided, gold_unparsable, verifier_error,
    no_verdict, unspecified), the reasons summing to ``missing`` for runs that counted them."""

    missing: int
    undecided: int
    missing_by_reason: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class RolloutAccounting:
    """Rollouts: ``produced = scored + late + queued + unaccounted`` (0 when none was lost;
    None when produced or queued could not be read)."""

    produced: int | None
    scored: int
    in_closed_groups: int
    late: int
    queued: int | None
    held: int

    @property
    def unaccounted(self) -> int | None:
        """``produced - scored - late - queued``, None when either end is unknown."""
        if self.produced is None or self.queued is None:
            return None
        return self.produced - self.scored - self.late - self.queued


@dataclass(frozen=True)
class RunAccounting:
    """The accounting of a run (summary.json's ``accounting`` block, plus the token counts
    it reports flat): one value per figure, from one read of the assembler's counters.

    Attributes:
        groups, rewards, rollouts: see their classes.
        generated_tokens: every sampled token the assembler received (rejected groups
            included); kept_tokens: tokens of groups kept for training;
            zero_variance_tokens: tokens of groups whose rewards all agree.
        verifier_endpoints: the assembler's calls per verifier address (summary.json's
            ``verifier_endpoints``, ``endpoint_summary``); empty when not read.
    """

    groups: GroupAccounting
    rewards: RewardAccounting
    rollouts: RolloutAccounting
    generated_tokens: int = 0
    kept_tokens: int = 0
    zero_variance_tokens: int = 0
    verifier_endpoints: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    @classmethod
    def from_stats(
        cls,
        stats: assembler_pb2.AssemblerStats,
        rollouts_produced: int | None = None,
        rollouts_queued: int | None = None,
        missing_by_reason: Mapping[str, int] | None = None,
    ) -> RunAccounting:
        """The accounting of the assembler's counters ``stats``.

        Args:
            stats: the counters at the end of the run (GetStats or ``read_accounting``).
            rollouts_produced: entries on the rollouts stream (one per (group id, index));
                None when not read.
            rollouts_queued: entries the assembler has not acknowledged (never delivered +
                pending, the held ones included): durable, scored by a resumed run; None when
                not read.
            missing_by_reason: missing rewards per reason (``MISSING_PREFIX`` counters).
        """
        by_reason = {n.removeprefix("groups_rejected_"): int(getattr(stats, n)) for n in REJECTIONS}
        return cls(
            groups=GroupAccounting(
                opened=stats.groups_opened,
                accepted=stats.groups_accepted,
                rejected_by_reason=by_reason,
                pending=stats.groups_pending,
                timed_out=stats.groups_timed_out,
                closed_short=stats.groups_closed_short,
                zero_variance=stats.groups_zero_variance,
            ),
            rewards=RewardAccounting(
                missing=stats.rewards_missing,
                undecided=stats.rewards_undecided,
                missing_by_reason=dict(sorted((missing_by_reason or {}).items())),
            ),
            rollouts=RolloutAccounting(
                produced=rollouts_produced,
                scored=stats.rollouts_received,
                in_closed_groups=stats.rollouts_in_closed_groups,
                late=stats.rollouts_late,
                queued=rollouts_queued,
                held=stats.rollouts_held,
            ),
            generated_tokens=stats.generated_tokens,
            kept_tokens=stats.kept_tokens,
            zero_variance_tokens=stats.zero_variance_tokens,
        )

    def as_dict(self) -> dict[str, Any]:
        """summary.json's ``accounting`` block (``groups``, ``rewards``, ``rollouts``)."""
        g, r, o = self.groups, self.rewards, self.rollouts
        return {
            "groups": {
                "opened": g.opened,
                "accepted": g.accepted,
                "rejected": g.rejected,
                "rejected_by_reason": dict(g.rejected_by_reason),
                "pending": g.pending,
                "identity": "opened = accepted + rejected + pending",
                "identity_gap": g.identity_gap,
                "timed_out": g.timed_out,
                "closed_short": g.closed_short,
            },
            "rewards": {
                "missing": r.missing,
                "undecided": r.undecided,
                "missing_by_reason": dict(r.missing_by_reason),
            },
            "rollouts": {
                "produced": o.produced,
                "scored": o.scored,
                "in_closed_groups": o.in_closed_groups,
                "late": o.late,
                "queued": o.queued,
                "held": o.held,
                "identity": "produced = scored + late + queued + unaccounted",
                "unaccounted": o.unaccounted,
            },
        }

    @classmethod
    def from_dict(cls, block: Mapping[str, Any], flat: Mapping[str, Any]) -> RunAccounting:
        """Read back ``as_dict``'s block; ``flat`` (the rest of summary.json) gives the token
        counts and the zero-variance groups."""
        g, r, o = block["groups"], block["rewards"], block["rollouts"]
        return cls(
            groups=GroupAccounting(
                opened=int(g["opened"]),
                accepted=int(g["accepted"]),
                rejected_by_reason={k: int(v) for k, v in g["rejected_by_reason"].items()},
                pending=int(g["pending"]),
                timed_out=int(g["timed_out"]),
                closed_short=int(g["closed_short"]),
                zero_variance=int(flat.get("groups_zero_variance", 0)),
            ),
            rewards=RewardAccounting(
                missing=int(r["missing"]),
                undecided=int(r["undecided"]),
                missing_by_reason={k: int(v) for k, v in r.get("missing_by_reason", {}).items()},
            ),
            rollouts=RolloutAccounting(
                produced=o["produced"],
                scored=int(o["scored"]),
                in_closed_groups=int(o["in_closed_groups"]),
                late=int(o["late"]),
                queued=o["queued"],
                held=int(o["held"]),
            ),
            generated_tokens=int(flat.get("generated_tokens", 0)),
            kept_tokens=int(flat.get("kept_tokens", 0)),
            zero_variance_tokens=int(flat.get("zero_variance_tokens", 0)),
            verifier_endpoints=dict(flat.get("verifier_endpoints") or {}),
        )


def run_accounting(
    stats: assembler_pb2.AssemblerStats,
    rollouts_produced: int | None,
    rollouts_queued: int | None,
) -> dict[str, object]:
    """summary.json's ``accounting`` block of ``stats`` (``RunAccounting.from_stats(...)
    .as_dict()``; see ``RunAccounting`` for each figure)."""
    return RunAccounting.from_stats(stats, rollouts_produced, rollouts_queued).as_dict()


# -- The accounting keys (the assembler's ``GroupStore`` writes them; ``read_accounting`` reads
# them with no assembler running, e.g. ``grpo run`` after its services stopped).


def open_key(namespace: str) -> str:
    """Sorted set of every group not yet closed (group id -> deadline, Unix seconds)."""
    return f"{namespace}:asm:open"


def members_key(namespace: str, group_id: str) -> str:
    """Hash of a group's scored members (index -> serialized ``ScoredRollout``)."""
    return f"{namespace}:asm:members:{group_id}"


def stats_key(namespace: str) -> str:
    """Hash of the counters named in ``COUNTERS``."""
    return f"{namespace}:asm:stats"


def text(value: Any) -> str:
    """A Redis reply (bytes or str) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def read_accounting(
    client: redis.Redis, namespace: str, rollouts_stream: str, consumer_group: str
) -> tuple[assembler_pb2.AssemblerStats, int, int]:
    """The inputs of ``run_accounting``, read from Redis in one MULTI/EXEC (no assembler
    needed): the counters with ``groups_pending`` (live values such as ``rollouts_held`` are
    0), the rollouts produced (``XLEN`` of ``rollouts_stream``) and the rollouts queued
    (entries ``consumer_group`` has not acknowledged: never delivered + pending).

    Args:
        client: redis-py client of the run's Redis; namespace: the run's namespace;
        rollouts_stream: the rollouts stream's key; consumer_group: the assembler's group.

    Returns:
        ``(stats, produced, queued)``; queued = produced while the group does not exist.

    Raises:
        UnavailableError: Redis unreachable.
        redis.ResponseError: any other Redis error.
    """
    _, stats, produced, queued = _read(client, namespace, rollouts_stream, consumer_group)
    return stats, produced, queued


def read_run_accounting(
    client: redis.Redis, namespace: str, rollouts_stream: str, consumer_group: str
) -> RunAccounting:
    """``RunAccounting`` of the run, read from Redis as ``read_accounting`` does (one
    MULTI/EXEC), with the missing rewards per reason (``MISSING_PREFIX`` counters) and the
    calls per verifier address (``verifier_endpoints``, read after it).

    Raises:
        UnavailableError: Redis unreachable.
        redis.ResponseError: any other Redis error.
    """
    values, stats, produced, queued = _read(client, namespace, rollouts_stream, consumer_group)
    reasons = {k.removeprefix(MISSING_PREFIX): v for k, v in values.items()
               if k.startswith(MISSING_PREFIX)}  # fmt: skip
    accounting = RunAccounting.from_stats(stats, produced, queued, reasons)
    endpoints = endpoint_summary(read_endpoint_stats(client, namespace))
    return dataclasses.replace(accounting, verifier_endpoints=endpoints)


def _read(
    client: redis.Redis, namespace: str, rollouts_stream: str, consumer_group: str
) -> tuple[dict[str, int], assembler_pb2.AssemblerStats, int, int]:
    """(raw counters, stats, produced, queued): ``read_accounting``'s one read."""
    pipe = client.pipeline(transaction=True)
    pipe.hgetall(stats_key(namespace))
    pipe.zcard(open_key(namespace))
    pipe.xlen(rollouts_stream)
    pipe.xinfo_groups(rollouts_stream)
    try:
        raw, pending_groups, produced, groups = pipe.execute(raise_on_error=False)
    except redis.exceptions.ConnectionError as exc:
        raise UnavailableError(f"redis unreachable: {exc}") from exc
    for reply in (raw, pending_groups, produced):
        if isinstance(reply, Exception):
            raise reply
    values = {text(k): int(v) for k, v in raw.items()}
    stats = stats_from_counters(values, int(pending_groups))
    info = None
    if not isinstance(groups, Exception):  # no stream yet: XINFO fails, nothing delivered
        named = ({text(k): v for k, v in g.items()} for g in groups)
        info = next((g for g in named if text(g["name"]) == consumer_group), None)
    if info is None:
        return values, stats, int(produced), int(produced)
    undelivered = info.get("lag")
    if undelivered is None:  # lag unknown to this server (e.g. after XDEL): count it
        queued = Streams(client).lag(rollouts_stream, consumer_group)
    else:
        queued = int(undelivered) + int(info["pending"])
    if int(info["pending"]):
        queued -= _recorded_pending(client, namespace, rollouts_stream, consumer_group)
    return values, stats, int(produced), queued


def _recorded_pending(client: redis.Redis, namespace: str, stream: str, group: str) -> int:
    """Pending entries of ``group`` whose rollout is already a member of its open group: a
    Redis restarted from its append-only file can have lost their acknowledgement while
    keeping the record (already counted as scored), so they are not queued. Read after the
    MULTI of ``read_accounting``; exact when nothing runs (``grpo run`` reads with the services
    stopped)."""
    pending: Any = client.xpending_range(stream, group, min="-", max="+", count=100_000)
    if not pending:
        return 0
    pipe = client.pipeline(transaction=False)
    for p in pending:
        entry_id = text(p["message_id"])
        pipe.xrange(stream, min=entry_id, max=entry_id)
    rollouts = []
    for reply in pipe.execute():
        for _id, fields in reply or []:
            payload = fields.get(PAYLOAD_FIELD)
            if payload:
                rollouts.append(common_pb2.Rollout.FromString(payload))
    if not rollouts:
        return 0
    pipe = client.pipeline(transaction=False)
    for r in rollouts:
        pipe.hexists(members_key(namespace, r.group_id), str(r.index))
    return sum(1 for found in pipe.execute() if found)


# -- Verifier endpoints: the assembler's calls per verifier address (issue 29), one Redis hash
# ``<ns>:asm:verifiers`` with fields ``<address>|<what>``: calls, items, latency_us (sum),
# latency_max_us, code:<gRPC code name>, status:<ScoreStatus name>. Kept across assembler
# restarts; read by ``grpo run`` and the run driver into summary.json's ``verifier_endpoints``.

# KEYS: the hash; ARGV: triples (op 'incr' | 'max', field, integer value).
_ENDPOINT_SCRIPT = """
for i = 1, #ARGV, 3 do
  local f, v = ARGV[i + 1], tonumber(ARGV[i + 2])
  if ARGV[i] == 'max' then
    local old = tonumber(redis.call('HGET', KEYS[1], f) or '0')
    if v > old then redis.call('HSET', KEYS[1], f, v) end
  else
    redis.call('HINCRBY', KEYS[1], f, v)
  end
end
return 1
"""


def endpoints_key(namespace: str) -> str:
    """Hash of the assembler's per-verifier-address call statistics."""
    return f"{namespace}:asm:verifiers"


def add_endpoint_stats(client: redis.Redis, namespace: str, deltas: Mapping[str, Any]) -> None:
    """Add per-address call statistics to the run's record (one atomic script).

    Args:
        client: the run's Redis; namespace: the run's namespace.
        deltas: address -> an ``EndpointStats`` (``VerifierClient.take_endpoint_stats``):
            calls, items, latency_s_sum, latency_s_max, codes, statuses.

    Raises:
        UnavailableError: Redis unreachable.
    """
    args: list[Any] = []
    for address, st in deltas.items():
        pairs = [
            ("incr", "calls", st.calls),
            ("incr", "items", st.items),
            ("incr", "latency_us", round(st.latency_s_sum * 1e6)),
            ("max", "latency_max_us", round(st.latency_s_max * 1e6)),
            *(("incr", f"code:{k}", n) for k, n in st.codes.items()),
            *(("incr", f"status:{k}", n) for k, n in st.statuses.items()),
        ]
        for op, what, value in pairs:
            args += [op, f"{address}|{what}", int(value)]
    if not args:
        return
    try:
        client.eval(_ENDPOINT_SCRIPT, 1, endpoints_key(namespace), *args)
    except redis.exceptions.ConnectionError as exc:
        raise UnavailableError(f"redis unreachable: {exc}") from exc


def read_endpoint_stats(
    client: redis.Redis, namespace: str
) -> list[assembler_pb2.VerifierEndpointStats]:
    """The per-address call statistics recorded so far, sorted by address.

    Raises:
        UnavailableError: Redis unreachable.
    """
    try:
        raw = client.hgetall(endpoints_key(namespace))
    except redis.exceptions.ConnectionError as exc:
        raise UnavailableError(f"redis unreachable: {exc}") from exc
    out: dict[str, assembler_pb2.VerifierEndpointStats] = {}
    for key, value in raw.items():
        address, _, what = text(key).rpartition("|")
        st = out.setdefault(address, assembler_pb2.VerifierEndpointStats(address=address))
        n = int(value)
        if what == "calls":
            st.calls = n
        elif what == "items":
            st.items = n
        elif what == "latency_us":
            st.latency_s_sum = n / 1e6
        elif what == "latency_max_us":
            st.latency_s_max = n / 1e6
        elif what.startswith("code:"):
            st.codes[what.removeprefix("code:")] = n
        elif what.startswith("status:"):
            st.statuses[what.removeprefix("status:")] = n
    return [out[a] for a in sorted(out)]


def endpoint_summary(
    stats: Sequence[assembler_pb2.VerifierEndpointStats],
) -> dict[str, dict[str, Any]]:
    """summary.json's ``verifier_endpoints``: address -> calls (attempts), items, failed
    calls (attempts whose code is not OK), latency_mean_ms / latency_max_ms (per attempt, as
    the assembler measured it), codes and statuses (counts by name)."""
    out: dict[str, dict[str, Any]] = {}
    for st in stats:
        failed = sum(n for code, n in st.codes.items() if code != "OK")
        out[st.address] = {
            "calls": int(st.calls),
            "items": int(st.items),
            "failed_calls": int(failed),
            "latency_mean_ms": round(1000 * st.latency_s_sum / st.calls, 3) if st.calls else None,
            "latency_max_ms": round(1000 * st.latency_s_max, 3),
            "codes": dict(sorted(st.codes.items())),
            "statuses": dict(sorted(st.statuses.items())),
        }
    return out
