"""Redis-backed group store: per-group state and members, written idempotently.

Keys (``<ns>`` is the run's namespace):

- ``<ns>:asm:meta:<group_id>``  hash: phase, group_size, opened/first/last scored times,
  close status and, once closed, the member indices. Kept (with a TTL) after the group closes
  so late rollouts are counted as late (and replays of members are not) instead of reopening
  the group.
- ``<ns>:asm:members:<group_id>`` hash: member index -> serialized ScoredRollout, written with
  HSETNX inside a Lua script, so a replayed rollout is stored and counted exactly once.
- ``<ns>:asm:open`` sorted set: group id -> deadline (Unix seconds) of every group not yet
  CLOSED (OPEN or CLOSING); the deadline sweeper and ``groups_pending`` read it.
- ``<ns>:asm:stats`` hash: the counters of ``grpo.services.runtime.accounting``.
- ``<ns>:asm:verifiers`` hash: calls per verifier address (``accounting.add_endpoint_stats``).

Every state change and its counter updates happen in one Lua script (atomic on the server), so
counters and state cannot disagree after a crash at any point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from grpo.errors import ContractError, UnavailableError
from grpo.services.assembler.group import GroupPhase
from grpo.services.runtime.accounting import (
    COUNTERS,
    MISSING_PREFIX,
    add_endpoint_stats,
    read_endpoint_stats,
)
from grpo.services.runtime.accounting import members_key as _members_key
from grpo.services.runtime.accounting import open_key as _open_key
from grpo.services.runtime.accounting import stats_key as _stats_key
from grpo.services.runtime.accounting import text as _text
from grpo.v1 import common_pb2

__all__ = ["GroupMeta", "GroupStore", "RecordResult"]

# KEYS: open; ARGV: seconds. Adds ARGV[1] to every deadline of the open set; returns its size.
_POSTPONE = """
local ids = redis.call('ZRANGE', KEYS[1], 0, -1, 'WITHSCORES')
for i = 1, #ids, 2 do
  redis.call('ZADD', KEYS[1], tonumber(ids[i + 1]) + tonumber(ARGV[1]), ids[i])
end
return #ids / 2
"""

# KEYS: meta, members, open, stats
# ARGV: index, payload, group_size, now, deadline, tokens, group_id
# Returns {added (0/1), members stored, phase, group_size}.
_RECORD = """
local phase = redis.call('HGET', KEYS[1], 'phase')
if not phase then
  redis.call('HSET', KEYS[1], 'phase', 'open', 'group_size', ARGV[3], 'opened', ARGV[4],
             'first_scored', ARGV[4], 'last_scored', ARGV[4])
  redis.call('ZADD', KEYS[3], ARGV[5], ARGV[7])
  redis.call('HINCRBY', KEYS[4], 'groups_opened', 1)
  phase = 'open'
end
local size = tonumber(redis.call('HGET', KEYS[1], 'group_size'))
if phase ~= 'open' then
  -- A replay of a member (a crash before its ACK) is not late; anything else is. A closing
  -- group (a crash between the two halves of its close) still holds its members hash.
  local member
  if phase == 'closing' then
    member = redis.call('HEXISTS', KEYS[2], ARGV[1]) == 1
  else
    local kept = ',' .. (redis.call('HGET', KEYS[1], 'members') or '') .. ','
    member = string.find(kept, ',' .. ARGV[1] .. ',', 1, true) ~= nil
  end
  if not member then
    redis.call('HINCRBY', KEYS[4], 'rollouts_late', 1)
  end
  return {0, redis.call('HLEN', KEYS[2]), phase, size}
end
local added = redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2])
if added == 1 then
  redis.call('HSET', KEYS[1], 'last_scored', ARGV[4])
  redis.call('HINCRBY', KEYS[4], 'rollouts_received', 1)
  redis.call('HINCRBY', KEYS[4], 'generated_tokens', ARGV[6])
end
return {added, redis.call('HLEN', KEYS[2]), phase, size}
"""

# KEYS: meta; ARGV: close status ('complete' | 'timed_out'), now.
# Returns 1 when the caller must (re)do the close, 0 when the group is already closed or absent.
_BEGIN_CLOSE = """
local phase = redis.call('HGET', KEYS[1], 'phase')
if phase == 'open' then
  redis.call('HSET', KEYS[1], 'phase', 'closing', 'close_status', ARGV[1], 'closed', ARGV[2])
  return 1
end
if phase == 'closing' then return 1 end
return 0
"""

# KEYS: meta, members, open, stats; ARGV: group_id, ttl_s, then counter name/increment pairs.
# Applies the increments exactly once, atomically with CLOSING -> CLOSED.
_COMMIT_CLOSE = """
if redis.call('HGET', KEYS[1], 'phase') ~= 'closing' then return 0 end
for i = 3, #ARGV, 2 do
  redis.call('HINCRBY', KEYS[4], ARGV[i], ARGV[i + 1])
end
redis.call('HSET', KEYS[1], 'phase', 'closed',
           'members', table.concat(redis.call('HKEYS', KEYS[2]), ','))
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('DEL', KEYS[2])
redis.call('EXPIRE', KEYS[1], ARGV[2])
return 1
"""


@dataclass(frozen=True)
class RecordResult:
    """Outcome of recording one scored member.

    Attributes:
        added: False when (group id, index) was already stored, or the group had closed.
        stored: members stored for the group after this write.
        phase: the group's phase after this write.
        group_size: the group's G (from its first rollout).
    """

    added: bool
    stored: int
    phase: GroupPhase
    group_size: int

    @property
    def complete(self) -> bool:
        """True when all G members are stored and the group is not closed yet."""
        return self.stored >= self.group_size and self.phase is not GroupPhase.CLOSED


@dataclass(frozen=True)
class GroupMeta:
    """Stored metadata of a group (times are Unix seconds)."""

    phase: GroupPhase
    group_size: int
    opened_unix_s: float
    first_scored_unix_s: float
    last_scored_unix_s: float
    close_status: str
    closed_unix_s: float


class GroupStore:
    """Per-group state and members in Redis (see the module docstring for the key layout)."""

    def __init__(
        self,
        client: redis.Redis,
        namespace: str,
        *,
        group_deadline_s: float,
        closed_ttl_s: int = 24 * 3600,
    ) -> None:
        """Args:
        client: a redis-py client (bytes responses, ``decode_responses=False``).
        namespace: run namespace prefixing every key.
        group_deadline_s: seconds after its first rollout at which an open group expires.
        closed_ttl_s: how long a closed group's metadata is kept to recognise late rollouts.
        """
        self._redis = client
        self._ns = namespace
        self._deadline_s = group_deadline_s
        self._ttl_s = closed_ttl_s
        self._record = client.register_script(_RECORD)
        self._begin = client.register_script(_BEGIN_CLOSE)
        self._commit = client.register_script(_COMMIT_CLOSE)
        self._postpone = client.register_script(_POSTPONE)
        self.open_key = _open_key(namespace)
        self.stats_key = _stats_key(namespace)

    def _meta_key(self, group_id: str) -> str:
        return f"{self._ns}:asm:meta:{group_id}"

    def _members_key(self, group_id: str) -> str:
        return _members_key(self._ns, group_id)

    def _keys(self, group_id: str) -> list[str]:
        return [
            self._meta_key(group_id),
            self._members_key(group_id),
            self.open_key,
            self.stats_key,
        ]

    def record(self, members: Sequence[common_pb2.ScoredRollout], now: float) -> list[RecordResult]:
        """Store scored members idempotently, one atomic script call each (pipelined).

        Args:
            members: scored rollouts; each must have a group id and index < group size.
            now: current time (Unix seconds); opens a group's deadline clock.

        Returns:
            One RecordResult per member, in order.

        Raises:
            ContractError: a rollout without group id, with group_size < 1 or index >= size.
            UnavailableError: Redis cannot be reached.
        """
        pipe = self._redis.pipeline(transaction=False)
        for member in members:
            rollout = member.rollout
            if not rollout.group_id or rollout.group_size < 1:
                raise ContractError("rollout needs group_id and group_size >= 1")
            if rollout.index >= rollout.group_size:
                raise ContractError(
                    f"rollout index {rollout.index} >= group_size {rollout.group_size} "
                    f"(group {rollout.group_id!r})"
                )
            self._record(
                keys=self._keys(rollout.group_id),
                args=[
                    rollout.index,
                    member.SerializeToString(),
                    rollout.group_size,
                    repr(now),
                    repr(now + self._deadline_s),
                    len(rollout.completion.token_ids),
                    rollout.group_id,
                ],
                client=pipe,
            )
        replies = self._execute(pipe)
        return [
            RecordResult(
                added=bool(added),
                stored=int(stored),
                phase=GroupPhase(_text(phase)),
                group_size=int(size),
            )
            for added, stored, phase, size in replies
        ]

    def stored_indices(self, rollouts: Iterable[common_pb2.Rollout]) -> list[bool]:
        """For each rollout, True when it needs no scoring: already stored or its group closed."""
        rollouts = list(rollouts)
        pipe = self._redis.pipeline(transaction=False)
        for rollout in rollouts:
            pipe.hexists(self._members_key(rollout.group_id), str(rollout.index))
            pipe.hget(self._meta_key(rollout.group_id), "phase")
        replies = self._execute(pipe)
        out = []
        for i in range(len(rollouts)):
            exists, phase = replies[2 * i], replies[2 * i + 1]
            out.append(bool(exists) or (phase is not None and _text(phase) != "open"))
        return out

    def begin_close(self, group_id: str, status: str, now: float) -> bool:
        """Move an OPEN group to CLOSING with ``status`` ('complete' or 'timed_out').

        Returns True when the caller must carry out (or resume) the close: the group was OPEN
        or is still CLOSING after an interrupted close; False when it is CLOSED or unknown.
        """
        return bool(self._call(self._begin, [self._meta_key(group_id)], [status, repr(now)]))

    def load(self, group_id: str) -> tuple[GroupMeta, list[common_pb2.ScoredRollout]]:
        """Metadata and stored members of a group.

        Raises:
            ContractError: the group is unknown (never opened, or its metadata expired).
        """
        pipe = self._redis.pipeline(transaction=False)
        pipe.hgetall(self._meta_key(group_id))
        pipe.hvals(self._members_key(group_id))
        raw_meta, raw_members = self._execute(pipe)
        if not raw_meta:
            raise ContractError(f"group {group_id!r} is not in the store")
        meta = {_text(k): _text(v) for k, v in raw_meta.items()}
        members = [common_pb2.ScoredRollout.FromString(v) for v in raw_members]
        return (
            GroupMeta(
                phase=GroupPhase(meta["phase"]),
                group_size=int(meta["group_size"]),
                opened_unix_s=float(meta["opened"]),
                first_scored_unix_s=float(meta["first_scored"]),
                last_scored_unix_s=float(meta["last_scored"]),
                close_status=meta.get("close_status", ""),
                closed_unix_s=float(meta.get("closed", meta["last_scored"])),
            ),
            members,
        )

    def commit_close(self, group_id: str, increments: Mapping[str, int]) -> bool:
        """CLOSING -> CLOSED and apply counter ``increments``, exactly once, atomically.

        Returns True when this call committed; False when another closer already had.

        Raises:
            ContractError: an increment names an unknown counter.
        """
        unknown = {n for n in increments if n not in COUNTERS and not n.startswith(MISSING_PREFIX)}
        if unknown:
            raise ContractError(f"unknown assembler counters {sorted(unknown)}")
        args: list[Any] = [group_id, self._ttl_s]
        for name, value in increments.items():
            args += [name, int(value)]
        return bool(self._call(self._commit, self._keys(group_id), args))

    def postpone(self, seconds: float) -> int:
        """Move every open group's deadline ``seconds`` later (one atomic script): the time a
        verifier was stalled or out does not count against the groups waiting for it.

        Returns:
            How many groups were open.
        """
        if seconds <= 0:
            return 0
        return int(self._call(self._postpone, [self.open_key], [repr(float(seconds))]))

    def expired(self, now: float, limit: int = 100) -> list[str]:
        """Ids of groups not CLOSED whose deadline is <= ``now`` (oldest first)."""
        ids = self._redis.zrangebyscore(self.open_key, "-inf", repr(now), start=0, num=limit)
        return [_text(i) for i in ids]

    def pending(self) -> int:
        """Number of groups not yet CLOSED (OPEN or CLOSING)."""
        return int(self._redis.zcard(self.open_key))

    def add(self, counter: str, amount: int = 1) -> None:
        """Increment one counter outside a close (e.g. verifier_failures).

        Raises:
            ContractError: unknown counter name.
        """
        if counter not in COUNTERS:
            raise ContractError(f"unknown assembler counter {counter!r}")
        self._redis.hincrby(self.stats_key, counter, amount)

    def add_endpoint_stats(self, deltas: Mapping[str, Any]) -> None:
        """Add the verifier client's per-address call statistics to the run's record
        (``grpo.services.runtime.accounting.add_endpoint_stats``; nothing for no delta).

        Raises:
            UnavailableError: Redis unreachable.
        """
        if deltas:
            add_endpoint_stats(self._redis, self._ns, deltas)

    def endpoint_stats(self) -> list[Any]:
        """The per-address call statistics recorded so far (``VerifierEndpointStats``, sorted
        by address).

        Raises:
            UnavailableError: Redis unreachable.
        """
        return read_endpoint_stats(self._redis, self._ns)

    def counters(self) -> dict[str, int]:
        """Every counter (absent ones are 0)."""
        raw = self._redis.hgetall(self.stats_key)
        values = {_text(k): int(v) for k, v in raw.items()}
        return {name: values.get(name, 0) for name in COUNTERS}

    def snapshot(self) -> tuple[dict[str, int], int]:
        """``(counters(), pending())`` read in one MULTI/EXEC, so no group opens or closes
        between the two reads: the identity holds exactly on a live assembler too.

        Raises:
            UnavailableError: Redis unreachable.
        """
        pipe = self._redis.pipeline(transaction=True)
        pipe.hgetall(self.stats_key)
        pipe.zcard(self.open_key)
        raw, pending = self._execute(pipe)
        values = {_text(k): int(v) for k, v in raw.items()}
        return {name: values.get(name, 0) for name in COUNTERS}, int(pending)

    def _call(self, script: Any, keys: list[str], args: list[Any]) -> Any:
        try:
            return script(keys=keys, args=args)
        except redis.exceptions.ConnectionError as exc:
            raise UnavailableError(f"redis unreachable: {exc}") from exc

    def _execute(self, pipe: Any) -> list[Any]:
        try:
            return list(pipe.execute())
        except redis.exceptions.ConnectionError as exc:
            raise UnavailableError(f"redis unreachable: {exc}") from exc
