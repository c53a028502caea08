"""Streams over a real Redis: idempotent produce, consumer groups, reclaim, lag, trimming."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
import redis
from helpers import process_alive, wait_until
from redis.backoff import NoBackoff
from redis.retry import Retry

from grpo.errors import DeadlineExceededError, InvalidArgumentError
from grpo.services.runtime.streams import PAYLOAD_FIELD, StreamNames, Streams
from grpo.v1 import common_pb2

REPO = Path(__file__).resolve().parents[2]


def _aof_written(client: redis.Redis) -> bool:
    """Every write so far has reached the append-only file: the AOF buffer is empty and no
    rewrite is pending (``INFO persistence``). A SIGKILLed server loses none of it (written
    data survives a process kill; fsync, once a second, only matters for a machine crash)."""
    info = client.info("persistence")
    return bool(
        info["aof_enabled"]
        and info["aof_last_write_status"] == "ok"
        and info["aof_buffer_length"] == 0
        and not info["aof_rewrite_in_progress"]
        and not info["aof_rewrite_scheduled"]
    )


def _rollout(group_id: str, index: int) -> common_pb2.Rollout:
    rollout = common_pb2.Rollout(group_id=group_id, index=index, group_size=4)
    rollout.completion.text = f"answer {index}"
    return rollout


@pytest.fixture
def streams(redis_client: redis.Redis) -> Streams:
    return Streams(redis_client)


@pytest.fixture
def names(redis_namespace: str) -> StreamNames:
    return StreamNames(redis_namespace)


def test_produce_consume_roundtrip_keeps_message_and_metadata(streams, names):
    sent = _rollout("g1", 2)
    entry_id = streams.produce(names.rollouts, sent, metadata={"task_type": "math"})
    assert entry_id is not None
    got = streams.consume(names.rollouts, "asm", "c1", common_pb2.Rollout, count=10, block_ms=None)
    assert [e.id for e in got] == [entry_id]
    assert got[0].message == sent
    assert got[0].metadata == {"task_type": "math"}
    assert streams.pending(names.rollouts, "asm") == 1
    assert streams.ack(names.rollouts, "asm", [entry_id]) == 1
    assert streams.ack(names.rollouts, "asm", [entry_id]) == 0
    assert streams.pending(names.rollouts, "asm") == 0


def test_dedup_key_writes_once(streams, names, redis_client):
    first = streams.produce(names.groups, _rollout("g", 0), dedup_key="g")
    again = streams.produce(names.groups, _rollout("g", 0), dedup_key="g")
    assert first is not None and again is None
    assert redis_client.xlen(names.groups) == 1
    # The marker records the entry id it guards.
    assert redis_client.get(streams.dedup_marker(names.groups, "g")).decode() == first
    # produce_many replayed after a partial write only adds what is missing.
    msgs = [_rollout("h", i) for i in range(4)]
    keys = [f"h/{i}" for i in range(4)]
    partial = streams.produce_many(names.groups, msgs[:2], dedup_keys=keys[:2])
    assert all(partial)
    replay = streams.produce_many(names.groups, msgs, dedup_keys=keys)
    assert replay[:2] == [None, None] and all(replay[2:])
    assert redis_client.xlen(names.groups) == 1 + 4


def test_bad_inputs_are_named(streams, names, redis_url):
    with pytest.raises(InvalidArgumentError, match="dedup_key"):
        streams.produce(names.rollouts, _rollout("g", 0), dedup_key="")
    with pytest.raises(InvalidArgumentError, match="reserved"):
        streams.produce(names.rollouts, _rollout("g", 0), metadata={"pb": "x"})
    with pytest.raises(InvalidArgumentError, match="2 keys for 3 messages"):
        streams.produce_many(
            names.rollouts, [_rollout("g", i) for i in range(3)], dedup_keys=["a", "b"]
        )
    with pytest.raises(InvalidArgumentError, match="decode_responses=False"):
        Streams(redis.Redis.from_url(redis_url, decode_responses=True))


def test_lag_counts_undelivered_plus_pending(streams, names):
    stream = names.prompts
    ids = [streams.produce(stream, _rollout("g", i)) for i in range(10)]
    assert streams.lag(stream, "gen") == 10  # no group yet: the whole stream is ahead of it
    assert streams.ensure_group(stream, "gen") is True
    assert streams.ensure_group(stream, "gen") is False
    assert streams.lag(stream, "gen") == 10
    got = streams.consume(stream, "gen", "w1", common_pb2.Rollout, count=4, block_ms=None)
    assert [e.id for e in got] == ids[:4]
    assert streams.lag(stream, "gen") == 10  # 6 undelivered + 4 pending
    streams.ack(stream, "gen", ids[:3])
    assert streams.lag(stream, "gen") == 7  # 6 undelivered + 1 pending
    streams.consume(stream, "gen", "w1", common_pb2.Rollout, count=100, block_ms=None)
    assert streams.lag(stream, "gen") == 7  # 0 undelivered + 7 pending
    streams.ack(stream, "gen", ids)
    assert streams.lag(stream, "gen") == 0
    assert streams.lag(names.key("missing"), "gen") == 0


def test_lag_after_deleting_an_undelivered_entry(streams, names, redis_client):
    # Deleting an entry makes Redis report lag as unknown; the count must still be exact.
    stream = names.rollouts
    ids = [streams.produce(stream, _rollout("g", i)) for i in range(6)]
    streams.ensure_group(stream, "asm")
    streams.consume(stream, "asm", "c", common_pb2.Rollout, count=2, block_ms=None)
    redis_client.xdel(stream, ids[4])
    assert streams.lag(stream, "asm") == 3 + 2  # ids 2, 3, 5 undelivered; 0, 1 pending


def test_wait_for_capacity_blocks_until_consumer_catches_up(streams, names):
    stream = names.prompts
    ids = [streams.produce(stream, _rollout("g", i)) for i in range(3)]
    streams.ensure_group(stream, "gen")
    assert streams.wait_for_capacity(stream, "gen", max_lag=5) == 3
    with pytest.raises(DeadlineExceededError, match="lag"):
        streams.wait_for_capacity(stream, "gen", max_lag=3, poll_s=0.01, timeout_s=0.05)
    streams.consume(stream, "gen", "w", common_pb2.Rollout, count=3, block_ms=None)
    timer = threading.Timer(0.1, lambda: streams.ack(stream, "gen", ids[:2]))
    timer.start()
    try:
        assert streams.wait_for_capacity(stream, "gen", max_lag=3, poll_s=0.01, timeout_s=30) <= 1
    finally:
        timer.join()
    with pytest.raises(InvalidArgumentError):
        streams.wait_for_capacity(stream, "gen", max_lag=0)


def test_undecodable_entry_goes_to_dead_letters(streams, names, redis_client):
    stream = names.rollouts
    bad = redis_client.xadd(stream, {PAYLOAD_FIELD: b"\xff\xff\xff"}).decode()
    good = streams.produce(stream, _rollout("g", 1))
    got = streams.consume(stream, "asm", "c", common_pb2.Rollout, count=10, block_ms=None)
    assert [e.id for e in got] == [good]
    dead = redis_client.xrange(f"{stream}:dead")
    assert len(dead) == 1 and dead[0][1][b"_source_id"].decode() == bad
    assert streams.pending(stream, "asm") == 1  # only the good entry awaits its ack


def test_trim_only_removes_entries_every_group_acknowledged(streams, names, redis_client):
    stream = names.rollouts
    ids = [streams.produce(stream, _rollout("g", i)) for i in range(10)]
    assert streams.trim_acknowledged(stream) == 0  # no group: never trimmed
    streams.ensure_group(stream, "fast")
    streams.ensure_group(stream, "slow")
    streams.consume(stream, "fast", "c", common_pb2.Rollout, count=6, block_ms=None)
    streams.ack(stream, "fast", ids[:6])
    streams.consume(stream, "slow", "c", common_pb2.Rollout, count=4, block_ms=None)
    streams.ack(stream, "slow", [ids[0], ids[1], ids[3]])  # ids[2] still pending
    assert streams.trim_acknowledged(stream) == 2
    remaining = [i.decode() for i, _ in redis_client.xrange(stream)]
    assert remaining == ids[2:]
    assert streams.lag(stream, "slow") == 6 + 1  # ids 4..9 undelivered + ids[2] pending


_DYING_CONSUMER = textwrap.dedent(
    """
    import sys
    from grpo.services.runtime.redis_server import connect
    from grpo.services.runtime.streams import Streams
    from grpo.v1 import common_pb2
    url, stream, out = sys.argv[1:4]
    s = Streams(connect(url))
    entries = s.consume(stream, "asm", "doomed", common_pb2.Rollout, count=2, block_ms=5000)
    # Process the first entry (its effect is written) but die before acknowledging anything.
    first = entries[0]
    s.produce(out, first.message, dedup_key=first.message.group_id + "/" + str(first.message.index))
    print(" ".join(e.id for e in entries), flush=True)
    sys.stdin.read()  # until the test kills it (or closes stdin: it then exits cleanly)
    """
)


def test_killed_consumer_entries_are_reclaimed_and_applied_exactly_once(
    streams, names, redis_url, redis_client
):
    stream, out = names.rollouts, names.groups
    streams.ensure_group(stream, "asm")
    ids = [streams.produce(stream, _rollout("g7", i)) for i in range(3)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = subprocess.Popen(
        [sys.executable, "-c", _DYING_CONSUMER, redis_url, stream, out],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        read_ids = child.stdout.readline().split()  # type: ignore[union-attr]
        assert read_ids == ids[:2]
    finally:
        child.send_signal(signal.SIGKILL)  # dies between read and ack
        child.wait(timeout=30)
    assert streams.pending(stream, "asm") == 2

    def apply(entry) -> None:  # the idempotent effect, then the ack
        m = entry.message
        streams.produce(out, m, dedup_key=f"{m.group_id}/{m.index}")
        streams.ack(stream, "asm", [entry.id])

    # The survivor first takes new work, then reclaims the dead consumer's pending entries.
    fresh = streams.consume(stream, "asm", "survivor", common_pb2.Rollout, count=10, block_ms=None)
    assert [e.id for e in fresh] == ids[2:]
    for entry in fresh:
        apply(entry)
    reclaimed = streams.reclaim(stream, "asm", "survivor", common_pb2.Rollout, min_idle_ms=0)
    assert [e.id for e in reclaimed] == ids[:2]
    for entry in reclaimed:
        apply(entry)
    # A second reclaim finds nothing: every entry was acknowledged.
    assert streams.reclaim(stream, "asm", "other", common_pb2.Rollout, min_idle_ms=0) == []

    effects = [common_pb2.Rollout.FromString(f[PAYLOAD_FIELD]) for _, f in redis_client.xrange(out)]
    assert sorted(r.index for r in effects) == [0, 1, 2]  # each exactly once, none lost
    assert streams.lag(stream, "asm") == 0


def test_reclaim_respects_min_idle_and_skips_deleted_entries(streams, names, redis_client):
    stream = names.rollouts
    ids = [streams.produce(stream, _rollout("g", i)) for i in range(3)]
    streams.consume(stream, "asm", "a", common_pb2.Rollout, count=3, block_ms=None)
    # Nothing has been idle for an hour.
    assert streams.reclaim(stream, "asm", "b", common_pb2.Rollout, min_idle_ms=3_600_000) == []
    redis_client.xdel(stream, ids[1])
    got = streams.reclaim(stream, "asm", "b", common_pb2.Rollout, min_idle_ms=0)
    assert [e.id for e in got] == [ids[0], ids[2]]
    assert streams.pending(stream, "asm") == 2  # the deleted entry left the pending list


def test_stream_names_are_namespaced():
    n = StreamNames("run42")
    assert (n.prompts, n.rollouts, n.groups, n.policy_key) == (
        "run42:prompts",
        "run42:rollouts",
        "run42:groups",
        "run42:policy",
    )
    assert n.key("assembler", "stats") == "run42:assembler:stats"
    with pytest.raises(InvalidArgumentError):
        StreamNames("bad name")


# ---- the consumer protocol ---------------------------------------------------------------


class _Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_outage_backs_off_exponentially_and_its_budget_is_fatal() -> None:
    from grpo.services.runtime.streams import Outage, OutageBudgetExceededError

    clock = _Clock()
    outage = Outage(5.0, backoff_initial_s=0.5, backoff_max_s=2.0, clock=clock)
    err = redis.ConnectionError("down")
    assert [outage.failed(err) for _ in range(4)] == [0.5, 1.0, 2.0, 2.0]
    assert outage.in_outage and outage.outages == 1
    clock.now = 3.0
    assert outage.ok() == 3.0 and not outage.in_outage and outage.ok() == 0.0
    clock.now = 10.0
    outage.failed(err)  # a new outage: the budget counts from here
    clock.now = 15.5
    with pytest.raises(OutageBudgetExceededError, match=r"budget 5\.0"):
        outage.failed(err)
    assert outage.total_s == pytest.approx(3.0 + 5.5)
    with pytest.raises(InvalidArgumentError):
        Outage(0.0)


def test_consumer_takes_back_its_own_pending_entries_and_never_reclaims_held_ones(
    streams: Streams, names: StreamNames
) -> None:
    from grpo.services.runtime.streams import StreamConsumer

    ids = [streams.produce(names.rollouts, _rollout("g", i)) for i in range(4)]
    before = StreamConsumer(streams, names.rollouts, "asm", "c0", common_pb2.Rollout,
                            reclaim_idle_ms=60_000)  # fmt: skip
    assert [e.id for e in before.poll(2, None)] == ids[:2]  # then the process dies
    after = StreamConsumer(streams, names.rollouts, "asm", "c0", common_pb2.Rollout,
                           reclaim_idle_ms=0, reclaim_every_s=0.0)  # fmt: skip
    got = after.poll(3, None)
    assert [e.id for e in got] == ids[:3]  # its own 2 at once, then 1 new
    after.hold(e.id for e in got)
    (last,) = after.poll(10, None)  # held ones are not reclaimed to it
    assert last.id == ids[3]
    after.hold([last.id])
    assert after.reclaim(10) == []
    assert after.ack([e.id for e in got]) == 3 and after.held == 1
    after.release([last.id])
    (entry,) = after.reclaim(10)
    after.dead_letter(entry, "poison")
    assert streams.pending(names.rollouts, "asm") == 0
    dead = streams.client.xrange(f"{names.rollouts}:dead")
    assert dead[0][1][b"_reason"] == b"poison"  # type: ignore[index]


def test_consumer_loop_reports_dead_once_a_redis_outage_outlasts_its_budget() -> None:
    import socket

    from grpo.services.runtime.streams import ConsumerLoop, Outage

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    # no client-side retries (redis-py's default backoff spends ~4.5 s per refused command)
    client = redis.Redis(port=port, socket_connect_timeout=0.2, retry=Retry(NoBackoff(), 0))

    class Pinger(ConsumerLoop):
        def run_once(self) -> None:
            client.ping()

    loop = Pinger(Outage(0.4, backoff_initial_s=0.05, backoff_max_s=0.1))
    loop.start()
    loop._thread.join(10)  # type: ignore[union-attr]
    assert not loop.is_alive()
    assert "unreachable for" in str(loop.failure) and loop.outage.outages == 1


def test_embedded_redis_dies_with_its_parent_and_keeps_its_data_across_a_restart(
    tmp_path: Path,
) -> None:
    code = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from grpo.services.runtime.redis_server import EmbeddedRedis, connect
        server = EmbeddedRedis(Path({str(tmp_path / "redis")!r}), appendonly=True).start()
        client = connect(server.url)
        client.xadd("s", {{"pb": b"x"}})
        client.xgroup_create("s", "g", id="0")
        client.xreadgroup("g", "c", {{"s": ">"}})
        print(server.pid, server.url, flush=True)
        sys.stdin.read()  # until the test kills it
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True,
                              env={**os.environ, "PYTHONPATH": str(REPO)})  # fmt: skip
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect

    try:
        assert parent.stdout is not None
        pid_text, url = parent.stdout.readline().split()
        pid = int(pid_text)
        watcher = connect(url)
        wait_until(lambda: _aof_written(watcher), what="the writes to reach the AOF")
        watcher.close()
    finally:
        parent.send_signal(signal.SIGKILL)
        parent.wait(10)
    # the parent-death signal stops the server
    wait_until(lambda: not process_alive(pid), what=f"embedded Redis {pid} to die with its parent")

    with EmbeddedRedis(tmp_path / "redis", appendonly=True) as again:
        client = connect(again.url)
        assert client.xlen("s") == 1
        assert client.xpending("s", "g")["pending"] == 1  # type: ignore[index]
        client.close()


class ManualClock:
    """A clock that moves only when told (seconds): outage lengths without waiting."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def test_consumers_ride_out_a_redis_kill_and_restart(tmp_path: Path) -> None:
    from grpo.services.runtime.redis_server import EmbeddedRedis, connect
    from grpo.services.runtime.streams import ConsumerLoop, Outage, StreamConsumer

    server = EmbeddedRedis(tmp_path / "redis", appendonly=True).start()
    try:
        client = connect(server.url)
        streams = Streams(client)
        consumer = StreamConsumer(streams, "s", "g", "c0", common_pb2.Rollout,
                                  reclaim_idle_ms=60_000)  # fmt: skip
        consumer.ensure_group()
        seen: list[int] = []

        class Worker(ConsumerLoop):
            def run_once(self) -> None:
                entries = consumer.poll(4, 50)
                seen.extend(e.message.index for e in entries)
                consumer.ack([e.id for e in entries])

        clock = ManualClock()
        worker = Worker(Outage(30.0, backoff_initial_s=0.05, backoff_max_s=0.2, clock=clock))
        worker.start()
        for i in range(5):
            streams.produce("s", _rollout("g", i))
        wait_until(lambda: len(seen) == 5, what="the first five entries")
        wait_until(lambda: streams.pending("s", "g") == 0, what="their acks")
        wait_until(lambda: _aof_written(client), what="the acks to reach the AOF")
        server.kill()
        wait_until(lambda: worker.outage.in_outage, what="the worker to see the outage")
        clock.advance(7.0)  # the outage lasts 7 s on the outage's clock
        assert worker.is_alive()
        server.restart()
        for i in range(5, 10):
            streams.produce("s", _rollout("g", i))
        wait_until(lambda: len(seen) >= 10, what="the next five entries")
        worker.stop(5)
        assert sorted(seen) == list(range(10))  # nothing lost, nothing twice
        assert not worker.outage.in_outage and worker.outage.outages == 1
        assert worker.outage.total_s == pytest.approx(7.0)
        assert streams.pending("s", "g") == 0
        client.close()
    finally:
        server.stop()


def test_retake_own_returns_pending_entries_whose_acks_were_lost(
    streams: Streams, names: StreamNames
) -> None:
    """After Redis restarts from its append-only file the last second's acks can be gone: the
    consumer (same process) takes those entries back at once, held ones excepted."""
    from grpo.services.runtime.streams import StreamConsumer

    ids = [streams.produce(names.rollouts, _rollout("g", i)) for i in range(3)]
    consumer = StreamConsumer(streams, names.rollouts, "asm", "c0", common_pb2.Rollout,
                              reclaim_idle_ms=60_000)  # fmt: skip
    got = consumer.poll(3, None)
    assert [e.id for e in got] == ids  # delivered; their acks "lost"
    consumer.hold([ids[2]])  # still being worked on
    assert consumer.poll(3, None) == []  # not idle long enough to be reclaimed
    consumer.retake_own()
    assert [e.id for e in consumer.poll(3, None)] == ids[:2]
    assert consumer.poll(3, None) == []  # once per retake
    assert consumer.ack(ids) == 3 and streams.pending(names.rollouts, "asm") == 0


def test_consumer_loop_calls_reconnected_once_per_closed_outage() -> None:
    from grpo.services.runtime.streams import ConsumerLoop, Outage

    outcomes = [redis.ConnectionError("down")] * 2 + [None] * 3 + [redis.ConnectionError("x")]
    outcomes += [None] * 2
    calls: list[str] = []

    class Flaky(ConsumerLoop):
        def run_once(self) -> None:
            outcome = outcomes.pop(0) if outcomes else None
            if outcome is not None:
                calls.append("fail")
                raise outcome
            calls.append("ok")

        def reconnected(self) -> None:
            calls.append("reconnected")

    loop = Flaky(Outage(30.0, backoff_initial_s=0.01, backoff_max_s=0.01))
    loop.start()
    wait_until(lambda: not outcomes and calls.count("ok") >= 6, what="the scripted iterations")
    loop.stop(5)
    first, second = ["fail", "fail", "ok", "reconnected", "ok", "ok"], ["fail", "ok", "reconnected"]
    assert calls[:9] == first + second, calls
    assert loop.outage.outages == 2
