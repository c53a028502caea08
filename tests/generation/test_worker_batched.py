"""The rollout worker with several prompts per generate call, against a real Redis: one call
for P jobs, the rows bound, exactly-once after a kill mid-call, reclaimed partial groups
batched with fresh ones, batching that does not change a group's samples, the fill wait."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import redis

from grpo.services.generation.backend import SampleRequest
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig, rollout_dedup_key
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.v1 import common_pb2

from .test_worker import SAMPLING, job, rollouts, wait_idle

PROMPTS = ["12+34=", "7+8=", "123+456=", "5+5=", "99+1="]


class CallLog:
    """Wraps a real backend's ``generate_many`` and records each call's (prompt, n) pairs."""

    def __init__(self, backend: TransformersBackend) -> None:
        self.calls: list[list[tuple[str, int]]] = []
        self._inner = backend.generate_many
        backend.generate_many = self  # type: ignore[method-assign]

    def __call__(self, requests: list[SampleRequest], **kwargs):
        self.calls.append([(r.prompt, r.n) for r in requests])
        return self._inner(requests, **kwargs)


def make_worker(client, backend, namespace: str, **overrides) -> RolloutWorker:
    settings = {"block_ms": 50, "fill_wait_ms": 0, **overrides}
    return RolloutWorker(
        client, backend, RolloutWorkerConfig(namespace=namespace, sampling=SAMPLING, **settings)
    )


def by_index(client: redis.Redis, names: StreamNames) -> dict[tuple[str, int], list[int]]:
    got = rollouts(client, names)
    keyed = {(r.group_id, r.index): list(r.completion.token_ids) for r in got}
    assert len(keyed) == len(got), "a (group, index) was written twice"
    return keyed


def test_p_jobs_share_one_call_and_each_is_acked_whole(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    for i, prompt in enumerate(PROMPTS):
        streams.produce(names.prompts, job(f"g{i}", 4, prompt))
    log = CallLog(backend)
    worker = make_worker(redis_client, backend, redis_namespace, prompts_per_call=4)
    assert worker.run_once() == 16
    assert log.calls == [[(p, 4) for p in PROMPTS[:4]]]  # one call, P x G = 16 rows
    assert streams.pending(names.prompts, "rollout-workers") == 0  # all four acked
    assert worker.run_once() == 4 and log.calls[1] == [(PROMPTS[4], 4)]
    keyed = by_index(redis_client, names)
    assert sorted(keyed) == [(f"g{i}", k) for i in range(5) for k in range(4)]
    got = {r.group_id: r for r in rollouts(redis_client, names)}
    for i, prompt in enumerate(PROMPTS):  # each rollout carries its own job's prompt
        assert got[f"g{i}"].task.prompt == prompt
        assert got[f"g{i}"].prompt_token_ids == backend.encode(prompt)
    seeds = {r.completion.sampling.seed for r in rollouts(redis_client, names)}
    assert len(seeds) == 5 and 0 not in seeds  # one derived seed per group


def test_rows_bound_splits_calls_and_large_groups(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    for group_id, g in (("a", 4), ("b", 4), ("big", 10)):
        streams.produce(names.prompts, job(group_id, g))
    log = CallLog(backend)
    pending_when_big_written: list[int] = []

    def hook(rollout: common_pb2.Rollout) -> None:
        if rollout.group_id == "big":
            pending_when_big_written.append(streams.pending(names.prompts, "rollout-workers"))

    worker = RolloutWorker(
        redis_client,
        backend,
        RolloutWorkerConfig(
            namespace=redis_namespace,
            sampling=SAMPLING,
            block_ms=50,
            fill_wait_ms=0,
            max_rows_per_call=6,
        ),
        on_rollout_written=hook,
    )
    assert worker.run_once() == 18
    assert [sum(n for _p, n in call) for call in log.calls] == [4, 4, 6, 4]
    assert all(sum(n for _p, n in call) <= 6 for call in log.calls)
    # "big" stays pending until its last piece is written, then is acknowledged.
    assert pending_when_big_written == [1] * 10  # both pieces written before the ack
    assert streams.pending(names.prompts, "rollout-workers") == 0
    assert sorted(k for k in by_index(redis_client, names) if k[0] == "big") == [
        ("big", i) for i in range(10)
    ]


def test_batching_does_not_change_a_groups_samples(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    results = []
    for per_call in (1, 4):
        names = StreamNames(f"{redis_namespace}:p{per_call}")
        streams = Streams(redis_client)
        for i, prompt in enumerate(PROMPTS[:4]):
            streams.produce(names.prompts, job(f"g{i}", 3, prompt))
        worker = make_worker(redis_client, backend, names.namespace, prompts_per_call=per_call)
        while worker.run_once():
            pass
        results.append(by_index(redis_client, names))
    assert len(results[0]) == 12 and results[0] == results[1]
    # Groups differ from each other (each draws from its own seed).
    assert len({tuple(v) for v in results[0].values()}) > 6


def test_reclaimed_partial_group_shares_a_call_with_fresh_jobs(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    streams.produce(names.prompts, job("part", 6))
    # A worker that died mid-call: it took the job and wrote indices 0 and 1 only.
    taken = streams.consume(names.prompts, "rollout-workers", "ghost", common_pb2.PromptJob)
    assert len(taken) == 1
    for index in (0, 1):
        rollout = common_pb2.Rollout(group_id="part", index=index, group_size=6)
        streams.produce(names.rollouts, rollout, dedup_key=rollout_dedup_key("part", index))
    streams.produce(names.prompts, job("fresh", 6))
    wait_idle(redis_client, names, 1)
    log = CallLog(backend)
    worker = make_worker(redis_client, backend, redis_namespace, reclaim_idle_ms=10)
    assert worker.run_once() == 4 + 6
    assert log.calls == [[("12+34=", 4), ("12+34=", 6)]]  # missing 4 + fresh 6, one call
    keyed = by_index(redis_client, names)
    assert sorted(keyed) == [("fresh", i) for i in range(6)] + [("part", i) for i in range(6)]
    assert streams.pending(names.prompts, "rollout-workers") == 0


def test_killed_mid_call_then_restarted_gives_exactly_g_per_group(
    redis_url: str,
    redis_client: redis.Redis,
    redis_namespace: str,
    tiny_model_dir: Path,
    backend: TransformersBackend,
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    for i in range(3):
        streams.produce(names.prompts, job(f"k{i}", 4, PROMPTS[i]))
    # One call of 3 jobs; SIGKILL after 6 rollouts: k0 whole (acked), k1 half, k2 none.
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_worker_proc.py")),
         redis_url, redis_namespace, str(tiny_model_dir), "6", "3"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert sorted(by_index(redis_client, names)) == [("k0", i) for i in range(4)] + [
        ("k1", 0),
        ("k1", 1),
    ]
    assert streams.pending(names.prompts, "rollout-workers") == 2  # k1, k2 not acked
    wait_idle(redis_client, names, 2)
    log = CallLog(backend)
    worker = make_worker(redis_client, backend, redis_namespace, reclaim_idle_ms=10)
    assert worker.run_once() == 2 + 4
    assert log.calls == [[(PROMPTS[1], 2), (PROMPTS[2], 4)]]
    keyed = by_index(redis_client, names)
    assert sorted(keyed) == [(f"k{g}", i) for g in range(3) for i in range(4)]
    assert streams.pending(names.prompts, "rollout-workers") == 0


def test_fill_wait_gathers_jobs_that_arrive_shortly_after(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    log = CallLog(backend)
    worker = make_worker(
        redis_client, backend, redis_namespace, prompts_per_call=3, fill_wait_ms=20_000
    )
    streams.produce(names.prompts, job("w0", 2))

    def later() -> None:
        time.sleep(0.3)
        for i in (1, 2, 3):
            streams.produce(names.prompts, job(f"w{i}", 2))

    feeder = threading.Thread(target=later)
    feeder.start()
    started = time.monotonic()
    assert worker.run_once() == 6
    assert time.monotonic() - started < 15  # returned once full, not at the end of the wait
    feeder.join()
    assert [len(call) for call in log.calls] == [3]
    # Without a fill wait the call takes what is queued.
    impatient = make_worker(redis_client, backend, redis_namespace, prompts_per_call=3)
    assert impatient.run_once() == 2 and [len(call) for call in log.calls] == [3, 1]
