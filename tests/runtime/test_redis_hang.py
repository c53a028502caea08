"""A hung Redis (stopped with SIGSTOP: its connections open, nothing answered) is an outage
for every service, not a call that waits forever (issue 35, docs/runtime.md).

Every Redis client is built by ``redis_server.redis_client`` with a bounded reply
(``server.redis_reply_timeout_s``, from the run's ``supervision.redis_reply_timeout_s``), so a
service's consumer loop sees ``redis.TimeoutError`` (one of ``REDIS_ERRORS``), opens an outage
in its log (``outage_of: redis``, summed into summary.json's ``outage_s.redis``), rides it
out, and closes it once Redis answers again. Blocking stream reads must wait less than the
reply timeout. A private server per test: the suite's shared Redis is never stopped.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.redis_server import (
    REDIS_REPLY_TIMEOUT_S,
    EmbeddedRedis,
    connect,
    redis_client,
)
from grpo.services.runtime.server import ServerSettings
from grpo.services.runtime.streams import ConsumerLoop, Outage, StreamNames, Streams
from grpo.v1 import common_pb2

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def server() -> Iterator[EmbeddedRedis]:
    with EmbeddedRedis() as embedded:
        yield embedded
        if embedded.pid is not None:  # never leave it stopped
            os.kill(embedded.pid, signal.SIGCONT)


class _Reader(ConsumerLoop):
    """A stream consumer as every service runs one (XREADGROUP BLOCK each iteration)."""

    thread_name = "test-reader"

    def __init__(self, streams: Streams, names: StreamNames, outage: Outage) -> None:
        super().__init__(outage)
        self.streams, self.names, self.reads = streams, names, 0

    def run_once(self) -> None:
        self.streams.consume(self.names.prompts, "g", "c", common_pb2.PromptJob, 8, 200)
        self.reads += 1


def test_every_client_has_a_bounded_reply_by_default() -> None:
    client = redis_client("redis://127.0.0.1:1/0")
    assert client.connection_pool.connection_kwargs["socket_timeout"] == REDIS_REPLY_TIMEOUT_S
    assert ServerSettings().redis_reply_timeout_s == REDIS_REPLY_TIMEOUT_S
    with pytest.raises(ValueError, match="must be > 0"):
        redis_client("redis://127.0.0.1:1/0", reply_timeout_s=0)


def test_a_stopped_redis_is_a_ridden_out_outage_then_reads_resume(
    server: EmbeddedRedis, caplog: pytest.LogCaptureFixture
) -> None:
    settings = ServerSettings(redis_reply_timeout_s=1.0)
    client = connect(server.url, read_timeout_s=settings.redis_reply_timeout_s)
    names = StreamNames("hang")
    streams = Streams(client)
    outage = Outage(60.0, backoff_initial_s=0.05, backoff_max_s=0.2, what="redis (test)")
    loop = _Reader(streams, names, outage)
    caplog.set_level(logging.WARNING)
    loop.start()
    try:
        _wait(lambda: loop.reads >= 3, 10, "reads before the stop")
        assert server.pid is not None
        os.kill(server.pid, signal.SIGSTOP)
        stopped = time.monotonic()
        _wait(lambda: outage.in_outage, 10, "the outage to open")
        opened_after = time.monotonic() - stopped
        assert opened_after < 1.0 + 2.0, opened_after  # the reply bound, not forever
        time.sleep(2.0)
        assert loop.is_alive() and loop.failure is None  # ridden out, not dead
        reads = loop.reads
        os.kill(server.pid, signal.SIGCONT)
        _wait(lambda: loop.reads > reads + 2, 10, "reads after SIGCONT")
        assert not outage.in_outage
        assert outage.outages == 1 and 2.0 <= outage.total_s < 10.0, outage.total_s
    finally:
        loop.stop(5.0)
    rows = [(r.__dict__.get("outage"), r.__dict__.get("outage_of")) for r in caplog.records]
    assert ("open", "redis (test)") in rows and ("closed", "redis (test)") in rows, rows


def test_a_blocking_read_must_wait_less_than_the_reply_timeout(server: EmbeddedRedis) -> None:
    from grpo.services.assembler.service import AssemblerSettings
    from grpo.services.generation.worker_service import RolloutWorkerSettings
    from grpo.services.learner.settings import LearnerServiceSettings

    streams = Streams(connect(server.url, read_timeout_s=1.0))
    with pytest.raises(InvalidArgumentError, match="at most half of redis_reply_timeout_s"):
        streams.consume("s", "g", "c", common_pb2.PromptJob, 1, 600)
    assert streams.consume("s", "g", "c", common_pb2.PromptJob, 1, 100) == []
    slow = {"redis_reply_timeout_s": 0.3}
    with pytest.raises(ValueError, match=r"assembler\.block_ms"):
        AssemblerSettings(server=slow)
    with pytest.raises(ValueError, match=r"worker\.block_ms"):
        RolloutWorkerSettings.model_validate({"server": slow, "backend": {"model_path": "m"}})
    with pytest.raises(ValueError, match="block_ms"):
        LearnerServiceSettings.model_validate({"server": slow, "model_path": "m", "run_dir": "r"})


def test_the_run_sets_every_services_reply_timeout() -> None:
    from grpo.services.settings.run import load_run_config
    from grpo.services.settings.services import run_part

    config = load_run_config(
        REPO / "configs" / "e2e-tiny.yaml", {"supervision.redis_reply_timeout_s": 4.0}
    ).model_copy(update={"namespace": "n"})
    for service in ("learner", "rollout-worker", "assembler"):
        assert run_part(config, service)["server"]["redis_reply_timeout_s"] == 4.0, service


def _wait(cond, timeout_s: float, what: str) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
