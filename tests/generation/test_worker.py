"""The rollout worker against a real Redis: groups, crash recovery, backpressure, versions."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import redis
from helpers import wait_until
from prometheus_client import REGISTRY

from grpo.services.generation.backend import SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT

SAMPLING = SamplingConfig(max_new_tokens=8, seed=5)


def job(group_id: str, g: int, prompt: str = "12+34=") -> common_pb2.PromptJob:
    task = common_pb2.Task(id=f"task-{group_id}", type="arith", prompt=prompt, gold_answer="46")
    return common_pb2.PromptJob(group_id=group_id, task=task, group_size=g)


def rollouts(client: redis.Redis, names: StreamNames) -> list[common_pb2.Rollout]:
    return [
        common_pb2.Rollout.FromString(fields[b"pb"])
        for _id, fields in client.xrange(names.rollouts)  # type: ignore[union-attr]
    ]


def wait_idle(client: redis.Redis, names: StreamNames, count: int, idle_ms: int = 10) -> None:
    """Wait until ``count`` prompt jobs have been pending, undelivered since, for ``idle_ms``
    (what a reclaim with ``reclaim_idle_ms=idle_ms`` takes back)."""

    def idle() -> int:
        group = "rollout-workers"
        return len(client.xpending_range(names.prompts, group, "-", "+", 100, idle=idle_ms))

    wait_until(lambda: idle() == count, interval_s=0.005, what=f"{count} idle prompt job(s)")


def make_worker(client, backend, namespace: str, **overrides) -> RolloutWorker:
    config = RolloutWorkerConfig(namespace=namespace, sampling=SAMPLING, block_ms=50, **overrides)
    return RolloutWorker(client, backend, config)


def test_groups_are_written_whole_and_acked(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    streams.produce(names.prompts, job("g1", 4))
    streams.produce(names.prompts, job("g2", 3))
    worker = make_worker(redis_client, backend, redis_namespace)
    before = REGISTRY.get_sample_value("grpo_rollouts_written_total") or 0.0
    assert worker.run_once() == 7  # both jobs in one call (prompts_per_call=8)
    assert worker.run_once() == 0  # nothing left
    got = rollouts(redis_client, names)
    assert sorted((r.group_id, r.index) for r in got) == [
        *[("g1", i) for i in range(4)],
        *[("g2", i) for i in range(3)],
    ]
    first = got[0]
    assert first.group_size == 4 and first.prompt_id == "task-g1" and first.task.prompt == "12+34="
    assert first.prompt_token_ids == backend.encode("12+34=")
    assert len(first.completion.token_ids) == len(first.completion.behavior_logprobs) > 0
    assert first.completion.sampling.seed != 0 and first.timings.generation_s > 0
    assert streams.pending(names.prompts, "rollout-workers") == 0
    assert REGISTRY.get_sample_value("grpo_rollouts_written_total") == before + 7


def test_killed_mid_group_then_restarted_gives_exactly_g_indices(
    redis_url: str,
    redis_client: redis.Redis,
    redis_namespace: str,
    tiny_model_dir: Path,
    backend: TransformersBackend,
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    g = 6
    streams.produce(names.prompts, job("crash", g))
    proc = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("_worker_proc.py")),
         redis_url, redis_namespace, str(tiny_model_dir), "2"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == -signal.SIGKILL, proc.stderr[-2000:]
    assert sorted(r.index for r in rollouts(redis_client, names)) == [0, 1]
    assert streams.pending(names.prompts, "rollout-workers") == 1  # not acked by the dead one
    wait_idle(redis_client, names, 1)
    worker = make_worker(redis_client, backend, redis_namespace, reclaim_idle_ms=10)
    assert worker.run_once() == g - 2  # reclaimed: only the missing indices are sampled
    worker.run_once()
    got = rollouts(redis_client, names)
    assert sorted(r.index for r in got) == list(range(g))  # exactly G distinct, no duplicate
    assert streams.pending(names.prompts, "rollout-workers") == 0


def test_backpressure_holds_back_until_downstream_consumes(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    streams.ensure_group(names.rollouts, "assembler")
    for i in range(2):
        streams.produce(names.prompts, job(f"bp{i}", 4))
    worker = make_worker(
        redis_client, backend, redis_namespace, max_rollout_lag=4, prompts_per_call=1
    )
    assert worker.run_once() == 4
    assert worker.run_once() == 0  # lag 4 >= bound: the second job is not taken
    assert streams.lag(names.prompts, "rollout-workers") == 1
    entries = streams.consume(names.rollouts, "assembler", "a", common_pb2.Rollout, count=10)
    streams.ack(names.rollouts, "assembler", [e.id for e in entries])
    assert worker.run_once() == 4


def test_new_policy_version_is_loaded_and_recorded(
    redis_client: redis.Redis,
    redis_namespace: str,
    backend: TransformersBackend,
    tuned_model_dir: Path,
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    worker = RolloutWorker(
        redis_client,
        backend,
        RolloutWorkerConfig(
            namespace=redis_namespace, sampling=SamplingConfig(temperature=0, max_new_tokens=6)
        ),
    )
    streams.produce(names.prompts, job("v0", 2, TUNED_PROMPT))
    worker.run_once()
    weights = common_pb2.PolicyWeights(policy_version=3, path=str(tuned_model_dir), step=3)
    redis_client.set(names.policy_key, weights.SerializeToString())
    streams.produce(names.prompts, job("v3", 2, TUNED_PROMPT))
    worker.run_once()
    by_group = {(r.group_id, r.index): r.completion for r in rollouts(redis_client, names)}
    assert {c.policy_version for k, c in by_group.items() if k[0] == "v0"} == {0}
    assert {c.policy_version for k, c in by_group.items() if k[0] == "v3"} == {3}
    assert by_group[("v3", 0)].text == TUNED_COMPLETION != by_group[("v0", 0)].text
    assert worker.maybe_reload_weights() is False  # same version: no reload


def test_invalid_jobs_go_to_dead_letters_and_spare_their_batch(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    streams.produce(names.prompts, job("bad", 0))
    streams.produce(names.prompts, job("too-long", 2, "1" * 600))  # beyond the 512 context
    streams.produce(names.prompts, job("good", 2))
    worker = make_worker(redis_client, backend, redis_namespace)
    assert worker.run_once() == 2
    assert streams.pending(names.prompts, "rollout-workers") == 0
    dead = redis_client.xrange(f"{names.prompts}:dead")
    reasons = [fields[b"_reason"].decode() for _id, fields in dead]  # type: ignore[union-attr]
    assert len(reasons) == 2 and "group_size" in reasons[0] and "context" in reasons[1]
    assert sorted((r.group_id, r.index) for r in rollouts(redis_client, names)) == [
        ("good", 0),
        ("good", 1),
    ]


def test_background_loop_starts_serves_and_stops(
    redis_client: redis.Redis, redis_namespace: str, backend: TransformersBackend
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    worker = make_worker(redis_client, backend, redis_namespace)
    worker.start()
    try:
        streams.produce(names.prompts, job("bg", 3))
        wait_until(lambda: worker.groups_done >= 1, timeout_s=60, what="a first group")
    finally:
        worker.stop(timeout_s=30)
    assert worker._thread is not None and not worker._thread.is_alive()
    assert sorted(r.index for r in rollouts(redis_client, names)) == [0, 1, 2]
