"""The learner service over real Redis and gRPC: consume B groups per step, publish weights,
checkpoint then acknowledge, GetStatus/SaveCheckpoint, JSONL run logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import grpc
import pytest
from helpers import wait_until

from grpo.learner import metric_names
from grpo.learner.checkpoint import latest_checkpoint
from grpo.services.learner.service import build
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.server import ServerSettings, create_server
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.v1 import common_pb2, learner_pb2, learner_pb2_grpc


def _settings(model_dir: Path, run_dir: Path, redis_url: str, namespace: str, **kw):
    base = {
        "model_path": str(model_dir),
        "run_dir": str(run_dir),
        "redis_url": redis_url,
        "namespace": namespace,
        "batch_groups": 2,
        "publish_every": 1,
        "checkpoint_every": 2,
        "block_ms": 100,
        "server": {"port": 0, "metrics_port": -1},
        "trainer": {"lr": 1e-4, "warmup_steps": 1},
        "algo": {"tis_cap": 2.0},
    }
    base.update(kw)
    return LearnerServiceSettings.model_validate(base)


def _serving(settings: LearnerServiceSettings) -> tuple[Any, Any]:
    """The learner service built from ``settings``, its gRPC server and loop started."""
    parts = build(settings)
    loop = parts.workers[0]
    server = create_server(parts.bindings, ServerSettings(port=0, metrics_port=-1))
    server.start()
    loop.start()
    return loop, server


def test_loop_trains_publishes_checkpoints_and_acks(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    groups = make_groups(num_groups=7, group_size=4, seed=5, prefix="svc")
    bad = common_pb2.Group.FromString(groups[6].SerializeToString())
    bad.group_id = "svc-bad"
    del bad.members[1].rollout.completion.behavior_logprobs[:]  # untrainable: parked, not fatal
    streams.produce(names.groups, bad)
    for g in groups:
        streams.produce(names.groups, g, dedup_key=g.group_id)
    streams.produce(names.groups, groups[0])  # a duplicate entry of an already-sent group
    settings = _settings(tiny_model_dir, tmp_path, redis_url, redis_namespace, max_steps=3)
    loop, server = _serving(settings)
    try:
        wait_until(
            lambda: loop.status().step == 3 and loop.status().last_checkpoint.endswith("3"),
            timeout_s=240,
            what="step 3 and its checkpoint",
        )
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = learner_pb2_grpc.LearnerStub(channel)
            status = stub.GetStatus(learner_pb2.GetStatusRequest(), timeout=10)
            saved = stub.SaveCheckpoint(learner_pb2.SaveCheckpointRequest(), timeout=30)
    finally:
        loop.stop(30)
        server.stop(0)
    assert (status.step, status.policy_version, status.consumed_groups) == (3, 3, 6)
    assert status.last_metrics["step"] == 3.0 and "loss/clip_frac_low" in status.last_metrics
    assert saved.step == 3 and saved.path == str(tmp_path / "checkpoints" / "step-00000003")

    # Weights: version 3 published in Redis, a loadable save_pretrained folder.
    weights = common_pb2.PolicyWeights.FromString(redis_client.get(names.policy_key))
    assert (weights.policy_version, weights.step) == (3, 3)
    folder = Path(weights.path)
    assert folder == (tmp_path / "weights" / "v3").resolve()
    assert {"model.safetensors", "config.json", "tokenizer.json"} <= {
        p.name for p in folder.iterdir()
    }

    # Run logs: one metrics line per step, one group line per trained group, none twice.
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2, 3]
    assert [m["policy_version"] for m in metrics] == [1, 2, 3]
    tokens = sum(len(m.rollout.completion.token_ids) for g in groups[:6] for m in g.members)
    assert metrics[-1]["generated_tokens"] == tokens
    for key in (
        "wall_clock_s",
        "groups/mixed_frac",
        "entropy/mean",
        "optim/lr",
        "adv/zero_variance_groups",
        "groups/undecided",  # counted by the loop from the members' verifier statuses
        *metric_names.LOOP_RECORD,  # what test_metric_names counts as written by the loop
    ):
        assert key in metrics[-1], key
    for m in metrics:  # shares of wall-clock time: the step's own and since the start
        assert 0.0 <= m["learner/idle_frac_step"] <= 1.0
        assert 0.0 <= m["learner/idle_frac"] <= 1.0
    logged = [
        json.loads(x)["group_id"] for x in (tmp_path / "groups.jsonl").read_text().splitlines()
    ]
    assert sorted(logged) == sorted(g.group_id for g in groups[:6])

    # Checkpoints record consumed ids and the pinned definitions; nothing is left pending
    # except the 7th group, which was read but never trained.
    meta = json.loads((latest_checkpoint(tmp_path / "checkpoints") / "meta.json").read_text())
    assert meta["consumed_group_ids"] == logged
    assert meta["resolved_config"]["algo_definition"]["advantage"]["std"] == "population"
    pending = redis_client.xpending(names.groups, "learner")["pending"]
    assert pending <= 1
    dead = redis_client.xrange(f"{names.groups}:dead")
    assert len(dead) == 1 and b"behavior_logprobs" in dead[0][1][b"_reason"]


def test_settings_errors_name_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="model_path"):
        LearnerServiceSettings.model_validate({"run_dir": str(tmp_path)})
    with pytest.raises(ValueError, match="fsdp"):
        LearnerServiceSettings.model_validate({"model_path": "m", "fsdp": True})


def test_set_paused_stops_training_after_the_step_and_publishes_it(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    """SetPaused(true): no step after the one in progress, though groups wait, and that step's
    weights are published even between two publishes (publish_every 2); GetStatus says so;
    SetPaused(false) trains again (the run driver's final evaluation; driver.drive)."""
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    for g in make_groups(num_groups=8, group_size=4, seed=9, prefix="pause"):
        streams.produce(names.groups, g, dedup_key=g.group_id)
    settings = _settings(
        tiny_model_dir, tmp_path, redis_url, redis_namespace, publish_every=2, checkpoint_every=10
    )
    loop, server = _serving(settings)
    try:
        with grpc.insecure_channel(f"127.0.0.1:{server.port}") as channel:
            stub = learner_pb2_grpc.LearnerStub(channel)
            wait_until(lambda: loop.status().step >= 1, timeout_s=240, what="step 1")
            paused = stub.SetPaused(learner_pb2.SetPausedRequest(paused=True), timeout=120)
            status = stub.GetStatus(learner_pb2.GetStatusRequest(), timeout=10)
            weights = common_pb2.PolicyWeights.FromString(redis_client.get(names.policy_key))
            # Each checkpoint request is served at the top of a loop iteration: between the
            # two, the loop went once past the point where it would have trained.
            for _ in range(2):
                stub.SaveCheckpoint(learner_pb2.SaveCheckpointRequest(), timeout=60)
            after = loop.status()
            resumed = stub.SetPaused(learner_pb2.SetPausedRequest(paused=False), timeout=120)
            wait_until(lambda: loop.status().step >= 4, timeout_s=240, what="steps after resume")
    finally:
        loop.stop(30)
        server.stop(0)
    assert status.paused and status.step == paused.step >= 1
    assert after.step == paused.step  # groups were waiting, but no step was taken
    assert (weights.step, weights.policy_version) == (paused.step, paused.policy_version)
    assert resumed.step == paused.step
    assert not loop.status().paused


def test_the_assembler_counters_leave_out_the_latency_of_an_uncalled_verifier() -> None:
    """The step record's ``verifier/<address>/latency_mean_s`` is a mean over the calls: with
    none (an address not called yet) it is not written, rather than written as 0."""
    from grpo.services.learner.loop import _assembler_stats_rpc
    from grpo.services.runtime.server import ServiceBinding
    from grpo.v1 import assembler_pb2, assembler_pb2_grpc

    class Stats(assembler_pb2_grpc.AssemblerServicer):
        def GetStats(self, request: Any, context: Any) -> assembler_pb2.GetStatsResponse:
            return assembler_pb2.GetStatsResponse(
                stats=assembler_pb2.AssemblerStats(groups_opened=1),
                verifiers=[
                    assembler_pb2.VerifierEndpointStats(
                        address="a:1", calls=4, latency_s_sum=2.0, latency_s_max=0.9
                    ),
                    assembler_pb2.VerifierEndpointStats(address="b:2", calls=0),
                ],
            )

    binding = ServiceBinding(
        "grpo.v1.Assembler", assembler_pb2_grpc.add_AssemblerServicer_to_server, Stats()
    )
    server = create_server([binding], ServerSettings(port=0, metrics_port=-1, grace_s=0))
    server.start()
    try:
        got = _assembler_stats_rpc(f"127.0.0.1:{server.port}")()
    finally:
        server.stop(0)
    assert got["verifier/a:1/latency_mean_s"] == 0.5 and got["verifier/a:1/latency_max_s"] == 0.9
    assert got["verifier/b:2/calls"] == 0.0
    assert "verifier/b:2/latency_mean_s" not in got and "verifier/b:2/latency_max_s" not in got
