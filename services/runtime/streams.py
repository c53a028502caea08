"""Redis Streams with consumer groups, carrying serialized protobuf: the pipeline's queues.

Entry layout: field ``pb`` holds ``message.SerializeToString()``; optional small metadata
fields (str -> str) ride beside it. Semantics every service relies on:

- **produce** is XADD. With a ``dedup_key`` it runs one Lua script (atomic on the server):
  if the marker key ``<stream>:dedup:<dedup_key>`` exists, nothing is written and ``None`` is
  returned; otherwise XADD and SET the marker (value = the new entry id, TTL
  ``dedup_ttl_s``). A producer that crashes and replays therefore never writes an entry twice,
  and a crash between the two steps cannot happen. Exactly-once holds within the TTL.
- **consume** is XREADGROUP with ``>`` (new entries only); entries stay pending until
  **ack** (XACK), which a consumer calls only after the entry's effect is durable.
- **reclaim** is XAUTOCLAIM: pending entries idle longer than ``min_idle_ms`` (their consumer
  died) move to the caller. Entries deleted from the stream meanwhile are dropped from the
  pending list by Redis 7+ and counted in a log line.
- An entry whose payload cannot be decoded as ``message_type`` is moved to the dead-letter
  stream ``<stream>:dead`` (with the reason) and acknowledged, so a poison entry cannot block
  a group forever.
- **lag** = entries not yet delivered to the group + entries delivered but not acknowledged.
  It uses XINFO GROUPS ``lag``/``pending`` (Redis 7+) and counts undelivered entries with
  XRANGE when Redis cannot tell (``lag`` null, e.g. after deletions).
- **wait_for_capacity** blocks a producer while a group's lag is at or above a bound
  (backpressure).
- **trim_acknowledged** trims (XTRIM MINID) only entries every group has both received and
  acknowledged; nothing else ever trims. A stream with no group is never trimmed.

Redis Cluster is not supported (the dedup marker and the stream are separate keys).

**The consumer protocol** (one implementation, used by the rollout worker, the assembler and
the learner): :class:`StreamConsumer` runs *reclaim -> consume*; the caller carries out the
entry's *effect* and makes it durable, then calls :meth:`StreamConsumer.ack` (or
:meth:`StreamConsumer.dead_letter` for an entry that can never succeed). Entries the caller
holds in memory (e.g. waiting for a verifier) are never reclaimed back to the same caller.
:class:`Outage` is the one reconnect policy: a Redis error starts an outage, each retry
waits an exponentially growing pause, the outage's length is recorded, and an outage longer
than the budget is fatal. :class:`ConsumerLoop` is the one crash policy: an iteration that
fails is retried; a Redis outage past its budget (or ``fatal``) ends the loop thread, the
service's ``serve`` sees the dead worker, drains and exits non-zero, and the supervisor
restarts the process, which resumes from its pending entries ("report dead").
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis
from google.protobuf.message import DecodeError, Message

from grpo.errors import DeadlineExceededError, InvalidArgumentError, UnavailableError
from grpo.services.runtime.redis_server import check_block_below_reply
from grpo.services.runtime.registry import LoopWorker

__all__ = [
    "PAYLOAD_FIELD",
    "REDIS_ERRORS",
    "ConsumerLoop",
    "Outage",
    "OutageBudgetExceededError",
    "StreamConsumer",
    "StreamEntry",
    "StreamNames",
    "Streams",
    "is_out_of_memory",
]

log = logging.getLogger(__name__)

PAYLOAD_FIELD = b"pb"
"""Stream entry field holding the serialized protobuf message."""

MessageT = TypeVar("MessageT", bound=Message)

REDIS_ERRORS: tuple[type[BaseException], ...] = (
    redis.exceptions.ConnectionError,
    redis.exceptions.TimeoutError,
    redis.exceptions.OutOfMemoryError,
)
"""Errors meaning "Redis cannot take this right now" (a restart, a network cut, loading the
append-only file: ``BusyLoadingError`` is a ``ConnectionError``; or out of memory: its
``maxmemory`` reached under ``noeviction``, writes refused until memory is freed); retried
by ``Outage``, so a full Redis is backpressure, named in the log, never a crash loop."""


def is_out_of_memory(exc: BaseException) -> bool:
    """True for Redis's refusal of a write for lack of memory (``OOM command not allowed``),
    whether redis-py raised it as ``OutOfMemoryError`` or inside a failed transaction."""
    return isinstance(exc, redis.exceptions.OutOfMemoryError) or (
        isinstance(exc, redis.exceptions.ResponseError) and "OOM" in str(exc)
    )


# KEYS[1] stream, KEYS[2] dedup marker; ARGV[1] marker TTL in seconds (0 = none);
# ARGV[2..] field/value pairs. Returns the new id, or false when the marker exists.
_PRODUCE_ONCE = """
if redis.call('EXISTS', KEYS[2]) == 1 then
  return false
end
local id = redis.call('XADD', KEYS[1], '*', unpack(ARGV, 2))
if tonumber(ARGV[1]) > 0 then
  redis.call('SET', KEYS[2], id, 'EX', ARGV[1])
else
  redis.call('SET', KEYS[2], id)
end
return id
"""


class StreamNames:
    """Key names of one pipeline run, all under ``namespace`` (one namespace per run/test).

    Attributes:
        prompts: stream of ``PromptJob`` (dataset feeder/assembler -> rollout workers).
        rollouts: stream of ``Rollout`` (rollout workers -> assembler).
        groups: stream of ``Group`` (assembler -> learner).
        closed: stream of every closed ``Group`` (accepted or rejected), members reduced to
            their index and outcome score (assembler -> run driver's prompt curriculum);
            read without a consumer group, never trimmed (a few hundred bytes a group).
        policy_key: string key holding the latest published ``PolicyWeights``.
    """

    def __init__(self, namespace: str = "grpo") -> None:
        if not namespace or any(c.isspace() for c in namespace):
            raise InvalidArgumentError(f"stream namespace must be a non-empty word: {namespace!r}")
        self.namespace = namespace
        self.prompts = f"{namespace}:prompts"
        self.rollouts = f"{namespace}:rollouts"
        self.groups = f"{namespace}:groups"
        self.closed = f"{namespace}:closed"
        self.policy_key = f"{namespace}:policy"

    def key(self, *parts: str) -> str:
        """Another key in this namespace, e.g. ``names.key("assembler", "stats")``."""
        return ":".join([self.namespace, *parts])


@dataclass(frozen=True)
class StreamEntry(Generic[MessageT]):
    """One decoded stream entry.

    Attributes:
        id: the Redis entry id (``"<ms>-<seq>"``), passed back to ``ack``.
        message: the decoded protobuf message.
        metadata: the entry's other fields, decoded as UTF-8.
    """

    id: str
    message: MessageT
    metadata: dict[str, str] = field(default_factory=dict)


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def _next_id(entry_id: str) -> str:
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def _id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


class Streams:
    """Typed protobuf produce/consume/ack/reclaim/lag over one redis-py client.

    Thread-safe as far as the redis-py client is (its connection pool is).
    """

    def __init__(self, client: redis.Redis, *, dedup_ttl_s: int = 7 * 24 * 3600) -> None:
        """Wrap ``client``.

        Args:
            client: a redis-py client created with ``decode_responses=False`` (see
                ``grpo.services.runtime.redis_server.connect``).
            dedup_ttl_s: lifetime of dedup markers in seconds (0 = forever).

        Raises:
            InvalidArgumentError: the client decodes responses (payloads are binary) or the
                TTL is negative.
        """
        if client.get_connection_kwargs().get("decode_responses"):
            raise InvalidArgumentError(
                "Streams needs a redis client with decode_responses=False (payloads are bytes)"
            )
        if dedup_ttl_s < 0:
            raise InvalidArgumentError(f"dedup_ttl_s must be >= 0, got {dedup_ttl_s}")
        self.client = client
        self.dedup_ttl_s = dedup_ttl_s
        self._produce_once = client.register_script(_PRODUCE_ONCE)

    # ---- produce -------------------------------------------------------------------------

    @staticmethod
    def _fields(message: Message, metadata: Mapping[str, str] | None) -> dict[bytes, bytes]:
        fields: dict[bytes, bytes] = {PAYLOAD_FIELD: message.SerializeToString()}
        for key, value in (metadata or {}).items():
            kb = key.encode()
            if kb == PAYLOAD_FIELD:
                raise InvalidArgumentError(f"metadata key {key!r} is reserved for the payload")
            fields[kb] = str(value).encode()
        return fields

    def dedup_marker(self, stream: str, dedup_key: str) -> str:
        """The Redis key that records that ``dedup_key`` was written to ``stream``."""
        return f"{stream}:dedup:{dedup_key}"

    def _produce_args(
        self, stream: str, message: Message, dedup_key: str, metadata: Mapping[str, str] | None
    ) -> tuple[list[str], list[Any]]:
        if not dedup_key:
            raise InvalidArgumentError("dedup_key must be a non-empty string when given")
        args: list[Any] = [self.dedup_ttl_s]
        for key, value in self._fields(message, metadata).items():
            args += [key, value]
        return [stream, self.dedup_marker(stream, dedup_key)], args

    def produce(
        self,
        stream: str,
        message: Message,
        *,
        dedup_key: str | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> str | None:
        """Append ``message`` to ``stream``; idempotent per ``dedup_key`` when one is given.

        Returns:
            The new entry id, or ``None`` when ``dedup_key`` was already written.

        Raises:
            InvalidArgumentError: empty dedup key or a reserved metadata key.
            redis.RedisError: the server failed (connection loss: retry with the same
                dedup key, which makes the retry safe).
        """
        if dedup_key is None:
            return _text(self.client.xadd(stream, self._fields(message, metadata)))  # type: ignore[arg-type]
        keys, args = self._produce_args(stream, message, dedup_key, metadata)
        result = self._produce_once(keys=keys, args=args)
        return None if result is None else _text(result)

    def produce_many(
        self,
        stream: str,
        messages: Sequence[Message],
        *,
        dedup_keys: Sequence[str] | None = None,
        metadata: Mapping[str, str] | None = None,
    ) -> list[str | None]:
        """Append several messages in one round trip (a pipeline, not a transaction).

        Each entry is independently idempotent when ``dedup_keys`` (same length as
        ``messages``) is given; after a crash, replaying the whole call writes only the
        entries that were missing.

        Returns:
            One entry id (or ``None`` for an already-written dedup key) per message.

        Raises:
            InvalidArgumentError: ``dedup_keys`` has the wrong length or an empty key.
        """
        if dedup_keys is not None and len(dedup_keys) != len(messages):
            raise InvalidArgumentError(
                f"dedup_keys has {len(dedup_keys)} keys for {len(messages)} messages"
            )
        pipe = self.client.pipeline(transaction=False)
        for i, message in enumerate(messages):
            if dedup_keys is None:
                pipe.xadd(stream, self._fields(message, metadata))  # type: ignore[arg-type]
            else:
                keys, args = self._produce_args(stream, message, dedup_keys[i], metadata)
                self._produce_once(keys=keys, args=args, client=pipe)
        return [None if r is None else _text(r) for r in pipe.execute()]

    # ---- consume -------------------------------------------------------------------------

    def ensure_group(self, stream: str, group: str, *, start_id: str = "0") -> bool:
        """Create consumer group ``group`` on ``stream`` (and the stream) if missing.

        Args:
            start_id: where a new group starts reading: ``"0"`` = every entry already in the
                stream (default, so nothing produced before the consumer started is lost),
                ``"$"`` = only new entries.

        Returns:
            True if the group was created, False if it existed.
        """
        try:
            self.client.xgroup_create(stream, group, id=start_id, mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" in str(exc):
                return False
            raise
        return True

    def _decode(
        self,
        stream: str,
        group: str,
        raw: Iterable[tuple[Any, Any]],
        message_type: type[MessageT],
    ) -> list[StreamEntry[MessageT]]:
        entries: list[StreamEntry[MessageT]] = []
        poison: list[tuple[str, dict[Any, Any] | None, str]] = []
        for raw_id, fields in raw:
            entry_id = _text(raw_id)
            if fields is None or PAYLOAD_FIELD not in fields:
                poison.append((entry_id, fields, "no payload field"))
                continue
            try:
                message = message_type.FromString(fields[PAYLOAD_FIELD])
            except DecodeError as exc:
                poison.append((entry_id, fields, f"not a {message_type.__name__}: {exc}"))
                continue
            metadata = {_text(k): _text(v) for k, v in fields.items() if k != PAYLOAD_FIELD}
            entries.append(StreamEntry(entry_id, message, metadata))
        for entry_id, fields, reason in poison:
            self._dead_letter(stream, group, entry_id, fields, reason)
        return entries

    def _dead_letter(
        self, stream: str, group: str, entry_id: str, fields: dict[Any, Any] | None, reason: str
    ) -> None:
        log.error(
            "stream entry moved to dead letters",
            extra={"stream": stream, "entry_id": entry_id, "reason": reason},
        )
        dead: dict[Any, Any] = dict(fields or {})
        dead.update({b"_source_id": entry_id, b"_group": group, b"_reason": reason})
        pipe = self.client.pipeline(transaction=True)
        pipe.xadd(f"{stream}:dead", dead)
        pipe.xack(stream, group, entry_id)
        pipe.execute()

    def consume(
        self,
        stream: str,
        group: str,
        consumer: str,
        message_type: type[MessageT],
        count: int = 16,
        block_ms: int | None = 1000,
    ) -> list[StreamEntry[MessageT]]:
        """Read up to ``count`` new entries for ``consumer`` (XREADGROUP ``>``).

        The entries stay pending for this consumer until ``ack``. Creates the group when it is
        missing (from the stream's start).

        Args:
            count: most entries returned.
            block_ms: how long to wait in milliseconds when nothing is new (None = return at
                once); at most half of the client's reply timeout (``redis_server``).

        Returns:
            The decoded entries, oldest first; empty when nothing arrived in time.

        Raises:
            InvalidArgumentError: ``block_ms`` is not below the client's reply timeout
                (``redis_server.check_block_below_reply``).
            redis.TimeoutError: no reply within the client's reply timeout (a hung Redis:
                one of ``REDIS_ERRORS``, an outage).
        """
        reply_timeout = self.client.connection_pool.connection_kwargs.get("socket_timeout")
        if block_ms and reply_timeout:
            try:
                check_block_below_reply(block_ms, float(reply_timeout), "block_ms")
            except ValueError as exc:
                raise InvalidArgumentError(str(exc)) from exc
        reply: Any
        try:
            reply = self.client.xreadgroup(group, consumer, {stream: ">"}, count, block_ms)
        except redis.ResponseError as exc:
            if "NOGROUP" not in str(exc):
                raise
            self.ensure_group(stream, group)
            reply = self.client.xreadgroup(group, consumer, {stream: ">"}, count, block_ms)
        entries: list[StreamEntry[MessageT]] = []
        for _name, raw in reply or []:
            entries += self._decode(stream, group, raw, message_type)
        return entries

    def ack(self, stream: str, group: str, ids: Iterable[str]) -> int:
        """Acknowledge entries (XACK) once their effect is durable.

        Returns:
            How many were pending and are now acknowledged (already-acked ids count 0).
        """
        ids = list(ids)
        if not ids:
            return 0
        return int(self.client.xack(stream, group, *ids))  # type: ignore[arg-type]

    def reclaim(
        self,
        stream: str,
        group: str,
        consumer: str,
        message_type: type[MessageT],
        min_idle_ms: int,
        count: int = 16,
    ) -> list[StreamEntry[MessageT]]:
        """Take over entries pending longer than ``min_idle_ms`` (XAUTOCLAIM) for ``consumer``.

        Scans the group's whole pending list from the start, at most ``count`` entries.
        Entries that no longer exist in the stream are dropped from the pending list by Redis
        and skipped here.

        Args:
            min_idle_ms: idle time in milliseconds after which an entry's consumer is presumed
                dead; choose it well above the longest processing time of one entry.

        Returns:
            The reclaimed entries, now pending for ``consumer``.
        """
        out: list[StreamEntry[MessageT]] = []
        cursor = "0-0"
        while len(out) < count:
            reply = self.client.xautoclaim(
                stream, group, consumer, min_idle_ms, start_id=cursor, count=count - len(out)
            )
            cursor = _text(reply[0])  # type: ignore[index]
            claimed = reply[1]  # type: ignore[index]
            deleted = reply[2] if len(reply) > 2 else []  # type: ignore[arg-type,index]
            if deleted:
                log.warning(
                    "pending entries were deleted from the stream before processing",
                    extra={"stream": stream, "group": group, "count": len(deleted)},
                )
            out += self._decode(stream, group, claimed, message_type)
            if cursor == "0-0":
                break
        return out

    def claim_own(
        self,
        stream: str,
        group: str,
        consumer: str,
        message_type: type[MessageT],
        count: int = 16,
    ) -> list[StreamEntry[MessageT]]:
        """The entries pending for ``consumer`` itself (XPENDING + XCLAIM with idle 0).

        For a consumer that restarted under the same name: what its previous process read
        and never acknowledged. Entries deleted from the stream meanwhile are skipped.

        Returns:
            At most ``count`` entries, oldest first.
        """
        rows: Any = self.client.xpending_range(
            stream, group, min="-", max="+", count=count, consumername=consumer
        )
        ids: list[Any] = [_text(row["message_id"]) for row in rows]
        if not ids:
            return []
        claimed: Any = self.client.xclaim(stream, group, consumer, 0, ids)
        live = [c for c in claimed if c and c[1] is not None]
        return self._decode(stream, group, live, message_type)

    # ---- lag and backpressure -----------------------------------------------------------

    def _group_info(self, stream: str, group: str) -> dict[str, Any] | None:
        try:
            groups = self.client.xinfo_groups(stream)
        except redis.ResponseError:  # no such stream
            return None
        for info in groups:  # type: ignore[union-attr]
            if _text(info["name"]) == group:
                return {_text(k): v for k, v in info.items()}
        return None

    def pending(self, stream: str, group: str) -> int:
        """Entries delivered to ``group`` but not acknowledged (0 when the group is missing)."""
        info = self._group_info(stream, group)
        return 0 if info is None else int(info["pending"])

    def lag(self, stream: str, group: str) -> int:
        """Entries of ``stream`` that ``group`` has not finished: undelivered + pending.

        A group that does not exist yet has every entry of the stream ahead of it
        (``XLEN``); a missing stream has lag 0.
        """
        undelivered, pending = self.backlog(stream, group)
        return undelivered + pending

    def backlog(self, stream: str, group: str) -> tuple[int, int]:
        """``(undelivered, pending)`` entries of ``stream`` for ``group``, from one
        ``XINFO GROUPS`` (``lag`` is their sum; a missing group has every entry undelivered, a
        missing stream none)."""
        info = self._group_info(stream, group)
        if info is None:
            return int(self.client.xlen(stream)), 0  # type: ignore[arg-type]
        undelivered = info.get("lag")
        if undelivered is None:
            last = _text(info["last-delivered-id"])
            undelivered = 0
            start = "(" + last
            while True:
                batch: Any = self.client.xrange(stream, min=start, max="+", count=1000)
                undelivered += len(batch)
                if len(batch) < 1000:
                    break
                start = "(" + _text(batch[-1][0])
        return int(undelivered), int(info["pending"])

    def wait_for_capacity(
        self,
        stream: str,
        group: str,
        max_lag: int,
        *,
        poll_s: float = 0.05,
        timeout_s: float | None = None,
    ) -> int:
        """Block until ``lag(stream, group) < max_lag``; producers call this before producing.

        Args:
            max_lag: bound on unfinished entries (>= 1).
            poll_s: seconds between checks.
            timeout_s: give up after this many seconds (None = wait forever).

        Returns:
            The lag observed when capacity was available.

        Raises:
            InvalidArgumentError: ``max_lag < 1``.
            DeadlineExceededError: still full after ``timeout_s``.
        """
        if max_lag < 1:
            raise InvalidArgumentError(f"max_lag must be >= 1, got {max_lag}")
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            current = self.lag(stream, group)
            if current < max_lag:
                return current
            if deadline is not None and time.monotonic() >= deadline:
                raise DeadlineExceededError(
                    f"{stream} lag for group {group} stayed at {current} >= {max_lag} for "
                    f"{timeout_s} s"
                )
            time.sleep(poll_s)

    # ---- trimming ------------------------------------------------------------------------

    def trim_acknowledged(self, stream: str) -> int:
        """Delete entries every consumer group has received and acknowledged (XTRIM MINID).

        The cut is the smallest, over all groups, of the oldest pending id (if any) and the id
        just after the last-delivered id. A stream without groups is left alone.

        Returns:
            The number of entries deleted.
        """
        try:
            groups = self.client.xinfo_groups(stream)
        except redis.ResponseError:
            return 0
        if not groups:
            return 0
        cuts: list[str] = []
        for info in groups:  # type: ignore[union-attr]
            name = _text(info["name"])
            cut = _next_id(_text(info["last-delivered-id"]))
            if int(info["pending"]) > 0:
                summary = self.client.xpending(stream, name)
                oldest = _text(summary["min"])  # type: ignore[index]
                cut = min(cut, oldest, key=_id_key)
            cuts.append(cut)
        min_id = min(cuts, key=_id_key)
        return int(self.client.xtrim(stream, minid=min_id, approximate=False))  # type: ignore[arg-type]


# ---- the consumer protocol ---------------------------------------------------------------


class OutageBudgetExceededError(UnavailableError):
    """Redis stayed unreachable longer than the outage budget (the caller should die)."""


class Outage:
    """Retry policy for one dependency (Redis, a verifier): backoff between tries, a budget.

    ``failed(exc)`` is called for each Redis error (``REDIS_ERRORS``); the first one opens an
    outage. It returns the pause before the next try: ``backoff_initial_s`` doubling per failed
    try up to ``backoff_max_s``. ``ok()`` closes the outage (its length joins ``total_s``).
    redis-py reconnects by itself on the next command, so "reconnect" is simply the retry.

    Thread-safe. Times are ``clock()`` seconds (monotonic by default). The log lines that
    open and close an outage carry ``outage_of`` (``what``), ``outage`` ("open"/"closed") and,
    when closed, ``outage_s`` as fields, so a run can sum outages from its services' logs
    (``grpo.local.outages``).
    """

    def __init__(
        self,
        budget_s: float,
        *,
        backoff_initial_s: float = 0.1,
        backoff_max_s: float = 2.0,
        what: str = "redis",
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
            budget_s: longest tolerated outage in seconds (> 0); past it ``failed`` raises.
            backoff_initial_s: first pause (seconds, > 0).
            backoff_max_s: longest pause (seconds, >= backoff_initial_s).
            what: name of the dependency in log lines, optionally followed by
                " (<client>)" ("redis (learner)").
            clock: time source in seconds.

        Raises:
            InvalidArgumentError: a non-positive budget or pause, or max < initial.
        """
        if budget_s <= 0 or backoff_initial_s <= 0 or backoff_max_s < backoff_initial_s:
            raise InvalidArgumentError(
                f"Outage needs budget_s > 0 and 0 < backoff_initial_s <= backoff_max_s, got "
                f"{budget_s}, {backoff_initial_s}, {backoff_max_s}"
            )
        self.budget_s = budget_s
        self._initial = backoff_initial_s
        self._max = backoff_max_s
        self._what = what
        self._clock = clock
        self._lock = threading.Lock()
        self._since: float | None = None
        self._tries = 0
        self._total = 0.0
        self.outages = 0

    @property
    def in_outage(self) -> bool:
        """True between the first failure of an outage and the next ``ok()``."""
        with self._lock:
            return self._since is not None

    @property
    def open_s(self) -> float:
        """Seconds of the outage in progress (0.0 when none)."""
        with self._lock:
            return 0.0 if self._since is None else self._clock() - self._since

    @property
    def total_s(self) -> float:
        """Seconds spent in outages so far, the one in progress included."""
        with self._lock:
            now = self._clock()
            return self._total + (0.0 if self._since is None else now - self._since)

    def failed(self, exc: BaseException, *, since: float | None = None) -> float:
        """Record a failed try; return the pause (seconds) before the next one.

        Args:
            exc: what failed; since: when the try began (``clock`` seconds), so an outage
                found by a try that hung until its deadline starts then (default: now).

        Raises:
            OutageBudgetExceededError: the outage has lasted longer than ``budget_s``.
        """
        with self._lock:
            now = self._clock()
            if self._since is None:
                self._since, self._tries = (now if since is None else min(since, now)), 0
                self.outages += 1
                oom = is_out_of_memory(exc)
                log.warning(
                    "%s %s, retrying with backoff: %s",
                    self._what,
                    "is out of memory (maxmemory reached: writes refused)"
                    if oom
                    else "unreachable",
                    exc,
                    extra={"outage_of": self._what, "outage": "open", "oom": oom},
                )
            elapsed = now - self._since
            self._tries += 1
            if elapsed > self.budget_s:
                state = "out of memory" if is_out_of_memory(exc) else "unreachable"
                raise OutageBudgetExceededError(
                    f"{self._what} {state} for {elapsed:.1f} s (> budget {self.budget_s} s): {exc}"
                ) from exc
            return float(min(self._max, self._initial * 2 ** (self._tries - 1)))

    def ok(self) -> float:
        """Record a success; closes the outage in progress (logged with its length).

        Returns:
            The length in seconds of the outage this closed (0.0 when none was open).
        """
        with self._lock:
            if self._since is None:
                return 0.0
            length = self._clock() - self._since
            self._total += length
            self._since = None
        log.warning(
            "%s reachable again after %.1f s",
            self._what,
            length,
            extra={"outage_of": self._what, "outage": "closed", "outage_s": round(length, 3)},
        )
        return length

    def call(self, fn: Callable[[], Any], *, stop: threading.Event | None = None) -> Any:
        """Run ``fn()`` until it succeeds, pausing per the policy after each Redis error.

        Use for steps that must not be repeated from the start of an iteration (e.g. the
        learner's acknowledgement after a checkpoint). ``fn`` must be safe to repeat.

        Raises:
            OutageBudgetExceededError: the outage outlasted the budget.
            UnavailableError: ``stop`` was set while waiting.
            Whatever ``fn`` raises besides ``REDIS_ERRORS``.
        """
        while True:
            try:
                result = fn()
            except REDIS_ERRORS as exc:
                pause = self.failed(exc)
                if stop is not None and stop.wait(pause):
                    raise UnavailableError(f"stopped while {self._what} was unreachable") from exc
                if stop is None:
                    time.sleep(pause)
                continue
            self.ok()
            return result


class StreamConsumer(Generic[MessageT]):
    """One consumer of one consumer group: reclaim -> consume -> (effect) -> acknowledge.

    ``poll()`` returns, first, entries other consumers left pending longer than
    ``reclaim_idle_ms`` (checked at most every ``reclaim_every_s``; XAUTOCLAIM), then new ones
    (XREADGROUP ``>``). The caller makes each entry's effect durable and then calls ``ack``;
    an entry that can never succeed goes to ``dead_letter``. Ids passed to ``hold`` (entries
    the caller still works on, e.g. awaiting a verifier) are filtered out of reclaims until
    they are acknowledged or ``release``d, so a slow caller never receives its own work twice.
    """

    def __init__(
        self,
        streams: Streams,
        stream: str,
        group: str,
        consumer: str,
        message_type: type[MessageT],
        *,
        reclaim_idle_ms: int,
        reclaim_every_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """Args:
            streams: the stream client.
            stream, group, consumer: what is read, by which group, under which name.
            message_type: protobuf type of the entries.
            reclaim_idle_ms: pending entries idle this long are taken over (ms, >= 0; 0 =
                every pending entry, for a sole consumer restarting).
            reclaim_every_s: least time between two reclaim scans (seconds, >= 0).
            clock: monotonic seconds.

        Raises:
            InvalidArgumentError: negative ``reclaim_idle_ms`` or ``reclaim_every_s``.
        """
        if reclaim_idle_ms < 0 or reclaim_every_s < 0:
            raise InvalidArgumentError(
                f"reclaim_idle_ms and reclaim_every_s must be >= 0, got {reclaim_idle_ms}, "
                f"{reclaim_every_s}"
            )
        self.streams = streams
        self.stream = stream
        self.group = group
        self.consumer = consumer
        self.message_type = message_type
        self.reclaim_idle_ms = reclaim_idle_ms
        self.reclaim_every_s = reclaim_every_s
        self._clock = clock
        self._next_reclaim = 0.0
        self._group_ready = False
        self._own_done = False
        self._held: set[str] = set()

    def ensure_group(self) -> None:
        """Create the consumer group (from the stream's start) once."""
        if not self._group_ready:
            self.streams.ensure_group(self.stream, self.group)
            self._group_ready = True

    def reclaim(self, count: int, *, min_idle_ms: int | None = None) -> list[StreamEntry[MessageT]]:
        """Take over pending entries now (not waiting for ``reclaim_every_s``); held ids skipped.

        Args:
            count: most entries returned.
            min_idle_ms: idle bound for this scan (default ``reclaim_idle_ms``).
        """
        self.ensure_group()
        idle = self.reclaim_idle_ms if min_idle_ms is None else min_idle_ms
        entries = self.streams.reclaim(
            self.stream, self.group, self.consumer, self.message_type, idle, count=count
        )
        return [e for e in entries if e.id not in self._held]

    def poll(self, count: int, block_ms: int | None) -> list[StreamEntry[MessageT]]:
        """Reclaimed entries (when a scan is due) first, then new ones, at most ``count``.

        Args:
            count: most entries returned (>= 1).
            block_ms: how long to wait for new entries when nothing was reclaimed (None = do
                not wait).

        Returns:
            Entries now pending for this consumer, oldest first within each kind.
        """
        self.ensure_group()
        entries: list[StreamEntry[MessageT]] = []
        if not self._own_done:
            # A restarted consumer under the same name takes its own pending entries back at
            # once (its previous process is gone), without waiting for them to go idle.
            entries = [
                e
                for e in self.streams.claim_own(
                    self.stream, self.group, self.consumer, self.message_type, count
                )
                if e.id not in self._held
            ]
            self._own_done = len(entries) < count
        now = self._clock()
        if len(entries) < count and now >= self._next_reclaim:
            self._next_reclaim = now + self.reclaim_every_s
            seen = {e.id for e in entries}
            entries += [e for e in self.reclaim(count - len(entries)) if e.id not in seen]
        if len(entries) < count:
            entries += self.streams.consume(
                self.stream,
                self.group,
                self.consumer,
                self.message_type,
                count=count - len(entries),
                block_ms=None if entries else block_ms,
            )
        return entries

    def retake_own(self) -> None:
        """Take this consumer's own pending entries back at the next ``poll``, at once rather
        than after ``reclaim_idle_ms`` (held ones excepted). Redis restarted from its
        append-only file can have lost the acknowledgements of its last second, so entries
        whose effect is durable are pending again; the caller's dedup makes the redelivery
        harmless and acknowledges them."""
        self._own_done = False

    def hold(self, ids: Iterable[str]) -> None:
        """Mark entries as still being worked on by this consumer (not reclaimed to it)."""
        self._held.update(ids)

    def release(self, ids: Iterable[str]) -> None:
        """Forget held ids without acknowledging them (they may be reclaimed again)."""
        self._held.difference_update(ids)

    @property
    def held(self) -> int:
        """How many entries are held."""
        return len(self._held)

    def ack(self, ids: Iterable[str]) -> int:
        """Acknowledge entries whose effect is durable; returns how many were pending."""
        ids = list(ids)
        self._held.difference_update(ids)
        return self.streams.ack(self.stream, self.group, ids)

    def dead_letter(self, entry: StreamEntry[MessageT], reason: str) -> None:
        """Copy ``entry`` to ``<stream>:dead`` with ``reason`` and acknowledge it (atomic)."""
        self._held.discard(entry.id)
        fields: dict[Any, Any] = {PAYLOAD_FIELD: entry.message.SerializeToString()}
        self.streams._dead_letter(self.stream, self.group, entry.id, fields, reason)


class ConsumerLoop(LoopWorker):
    """A ``LoopWorker`` with the one reconnect and crash policy of every stream consumer.

    ``run_once`` is retried after any error. A Redis error (``REDIS_ERRORS``) is retried with
    ``outage``'s backoff; once the outage outlasts its budget, or an iteration raises an error
    listed in ``fatal_errors``, the loop thread ends and ``failure`` holds the error:
    ``is_alive()`` turns False and ``serve`` drains the process and exits non-zero, so the
    supervisor restarts it ("report dead"). Nothing unacknowledged is lost: the restarted
    process reclaims it.
    """

    fatal_errors: tuple[type[BaseException], ...] = ()

    def __init__(self, outage: Outage) -> None:
        """Args: outage: the Redis reconnect policy of this loop."""
        super().__init__()
        self.outage = outage
        self.failure: BaseException | None = None

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.beat()
            try:
                self.run_once()
                if self.outage.in_outage:
                    self.outage.ok()
                    self.reconnected()
            except REDIS_ERRORS as exc:
                try:
                    pause = self.outage.failed(exc)
                except OutageBudgetExceededError as fatal:
                    self._die(fatal)
                    return
                self._stop.wait(pause)
            except self.fatal_errors as exc:
                self._die(exc)
                return
            except Exception:
                log.exception("%s iteration failed; retrying", self.thread_name)
                self._stop.wait(self.error_backoff_s)

    def reconnected(self) -> None:
        """Called once each time a Redis outage closes (the first iteration that succeeds
        after it). Default: nothing; consumers whose acknowledgements a restarted Redis may
        have lost take their own pending entries back (``StreamConsumer.retake_own``)."""

    def _die(self, exc: BaseException) -> None:
        self.failure = exc
        log.error("%s stops and reports dead: %s", self.thread_name, exc)
