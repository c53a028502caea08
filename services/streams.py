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
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import redis
from google.protobuf.message import DecodeError, Message

from grpo.services.errors import DeadlineExceededError, InvalidArgumentError

__all__ = ["PAYLOAD_FIELD", "StreamEntry", "StreamNames", "Streams"]

log = logging.getLogger(__name__)

PAYLOAD_FIELD = b"pb"
"""Stream entry field holding the serialized protobuf message."""

MessageT = TypeVar("MessageT", bound=Message)

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
        policy_key: string key holding the latest published ``PolicyWeights``.
    """

    def __init__(self, namespace: str = "grpo") -> None:
        if not namespace or any(c.isspace() for c in namespace):
            raise InvalidArgumentError(f"stream namespace must be a non-empty word: {namespace!r}")
        self.namespace = namespace
        self.prompts = f"{namespace}:prompts"
        self.rollouts = f"{namespace}:rollouts"
        self.groups = f"{namespace}:groups"
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
                ``grpo.services.redis_server.connect``).
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
            "undecodable stream entry moved to dead letters",
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
                once).

        Returns:
            The decoded entries, oldest first; empty when nothing arrived in time.
        """
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
        info = self._group_info(stream, group)
        if info is None:
            return int(self.client.xlen(stream))  # type: ignore[arg-type]
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
        return int(undelivered) + int(info["pending"])

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
