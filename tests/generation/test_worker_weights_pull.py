"""The rollout worker with ``weights.mode: grpc``: a newer announced version is pulled from a real
``grpo.v1.Weights`` server on loopback in the background (generation goes on with the loaded
weights meanwhile), verified, then loaded; a replica without a local model starts from the
server's newest version."""

from __future__ import annotations

import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import redis
import yaml

from grpo.services.generation.backend import SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.generation.worker_service import SERVICE, RolloutWorkerSettings
from grpo.services.runtime.config import load_settings
from grpo.services.runtime.server import ServerSettings, create_server
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.runtime.weights.puller import (
    BackgroundPuller,
    WeightPuller,
    WeightTransferConfig,
)
from grpo.services.runtime.weights.servicer import weights_binding
from grpo.services.runtime.weights.store import Chunk, WeightStore
from grpo.v1 import common_pb2

from .conftest import TUNED_COMPLETION, TUNED_PROMPT


class GatedStore(WeightStore):
    """Holds every file stream until ``gate`` is set (a slow network, made deterministic)."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir)
        self.gate = threading.Event()

    def read(self, version, name, offset_bytes=0, chunk_bytes=0) -> Iterator[Chunk]:
        assert self.gate.wait(60)
        yield from super().read(version, name, offset_bytes, chunk_bytes)


def job(group_id: str) -> common_pb2.PromptJob:
    task = common_pb2.Task(id=group_id, type="arith", prompt=TUNED_PROMPT, gold_answer="ok")
    return common_pb2.PromptJob(group_id=group_id, task=task, group_size=2)


def publish_copy(model_dir: Path, run_dir: Path, version: int) -> None:
    """The folder layout the learner's publisher leaves: <run_dir>/weights/v<N>."""
    shutil.copytree(model_dir, run_dir / "weights" / f"v{version}")


def test_pull_in_flight_keeps_generation_going_then_the_new_version_loads(
    redis_client: redis.Redis,
    redis_namespace: str,
    backend: TransformersBackend,
    tuned_model_dir: Path,
    tmp_path: Path,
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    run_dir = tmp_path / "learner-run"
    publish_copy(tuned_model_dir, run_dir, 3)
    store = GatedStore(run_dir)
    server = create_server([weights_binding(store)], ServerSettings(host="127.0.0.1", port=0))
    server.start()
    puller = WeightPuller(
        WeightTransferConfig(
            mode="grpc", address=f"127.0.0.1:{server.port}", cache_dir=tmp_path / "cache"
        )
    )
    background = BackgroundPuller(puller)
    worker = RolloutWorker(
        redis_client,
        backend,
        RolloutWorkerConfig(
            namespace=redis_namespace,
            sampling=SamplingConfig(temperature=0, max_new_tokens=6),
            block_ms=50,
        ),
        weights_puller=background,
    )
    try:
        # The learner announces v3; the path is on the learner's disk, not this pod's.
        announced = common_pb2.PolicyWeights(policy_version=3, path="/not/on/this/pod", step=3)
        redis_client.set(names.policy_key, announced.SerializeToString())
        streams.produce(names.prompts, job("during-pull"))
        assert worker.run_once() == 2  # sampled with v0 while the pull waits on the network
        assert background.in_flight and backend.policy_version == 0
        store.gate.set()
        assert background.wait(60)
        streams.produce(names.prompts, job("after-pull"))
        assert worker.run_once() == 2
        assert backend.policy_version == 3
    finally:
        server.stop(0)
        puller.close()
    by_group = {
        (r.group_id, r.index): r.completion
        for r in (
            common_pb2.Rollout.FromString(fields[b"pb"])
            for _id, fields in redis_client.xrange(names.rollouts)  # type: ignore[union-attr]
        )
    }
    assert {c.policy_version for (g, _), c in by_group.items() if g == "during-pull"} == {0}
    assert {c.policy_version for (g, _), c in by_group.items() if g == "after-pull"} == {3}
    assert by_group[("after-pull", 0)].text == TUNED_COMPLETION
    assert by_group[("during-pull", 0)].text != TUNED_COMPLETION
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["v3"]


def test_replica_without_a_local_model_starts_from_the_newest_published_version(
    redis_url: str, redis_namespace: str, tuned_model_dir: Path, tmp_path: Path
) -> None:
    run_dir = tmp_path / "learner-run"
    publish_copy(tuned_model_dir, run_dir, 0)
    publish_copy(tuned_model_dir, run_dir, 2)
    server = create_server(
        [weights_binding(WeightStore(run_dir))], ServerSettings(host="127.0.0.1", port=0)
    )
    server.start()
    config = tmp_path / "rollout-worker.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "server": {"host": "127.0.0.1", "port": 0, "metrics_port": 0},
                "redis_url": redis_url,
                "backend": {"model_path": str(tmp_path / "absent"), "device": "cpu"},
                "worker": {"namespace": redis_namespace},
                "weights": {
                    "mode": "grpc",
                    "address": f"127.0.0.1:{server.port}",
                    "cache_dir": str(tmp_path / "cache"),
                },
            }
        )
    )
    settings = load_settings(RolloutWorkerSettings, config)
    parts = SERVICE.build(settings)
    try:
        describe = parts.bindings[0].servicer.Describe(None, None)
        assert describe.policy_version == 2
        assert describe.model_path == str(tmp_path / "cache" / "v2")
    finally:
        assert parts.close is not None
        parts.close()
        server.stop(0)
