"""The learner spanning pods, run here as W = 2 separate ``grpo serve learner`` processes that
rendezvous over loopback (``dist_init: env://``, ``$RANK``, gloo), each with its own run dir as
pods have their own volumes, rank 1 without the model folder (rank 0 sends it). After N steps
rank 0's parameters equal a single process's on the same groups to 1e-6, with the model
replicated or sharded with FSDP2 (whose weights and checkpoints rank 0 writes from the full
state every rank gathers on its command). A killed or hung rank: test_rank_failure.py."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

import pytest
from helpers import wait_until
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).parent))
from pod_world import free_port as _free_port
from pod_world import serve_learner as _serve

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.learner.distributed import RankCommand
from grpo.services.learner.pod_ranks import env_rank
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.streams import StreamNames, Streams

STEPS = 2


def _final_checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / f"step-{STEPS:08d}"


@pytest.mark.slow
@pytest.mark.parametrize("fsdp", [False, True], ids=["replicated", "fsdp"])
def test_two_pod_ranks_train_like_one_process(
    fsdp: bool,
    tiny_model_dir: Path,
    make_groups,
    tmp_path: Path,
    redis_url: str,
    redis_client,
    redis_namespace,
) -> None:
    groups = make_groups(num_groups=2 * STEPS, group_size=4, seed=21, prefix="pods")
    namespaces = {"pods": f"{redis_namespace}:pods", "one": f"{redis_namespace}:one"}
    for ns in namespaces.values():
        names, streams = StreamNames(ns), Streams(redis_client)
        for g in groups:
            streams.produce(names.groups, g, dedup_key=g.group_id)
    base = {
        "server": {"host": "127.0.0.1", "port": 0, "metrics_port": 0},
        "redis_url": redis_url,
        "batch_groups": 2,
        "checkpoint_every": 1,
        "max_steps": STEPS,
        "block_ms": 100,
        "trainer": {"lr": 1e-3, "warmup_steps": 0},
        "dtype": "float64",  # float32 round-off alone differs by ~1e-6 after two Adam steps
    }
    world = {
        "world_size": 2,
        "dist_init": "env://",
        "namespace": namespaces["pods"],
        "fsdp": fsdp,
    }
    rendezvous = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(_free_port()), "WORLD_SIZE": "2"}
    runs = {
        "rank0": tmp_path / "pod-0",
        "rank1": tmp_path / "pod-1",
        "one": tmp_path / "single",
    }
    procs = [
        _serve(
            {**base, **world, "model_path": str(tiny_model_dir), "run_dir": str(runs["rank0"])},
            tmp_path / "rank0.yaml",
            {**rendezvous, "RANK": "0"},
        ),
        _serve(  # this "pod" has no model folder: rank 0 sends it over the process group
            {
                **base,
                **world,
                "model_path": str(tmp_path / "absent"),
                "run_dir": str(runs["rank1"]),
            },
            tmp_path / "rank1.yaml",
            {**rendezvous, "RANK": "1"},
        ),
        _serve(
            {
                **base,
                "namespace": namespaces["one"],
                "model_path": str(tiny_model_dir),
                "run_dir": str(runs["one"]),
            },
            tmp_path / "one.yaml",
            {},
        ),
    ]
    try:
        for run in (runs["rank0"], runs["one"]):
            wait_until(
                lambda run=run: (_final_checkpoint(run) / "meta.json").is_file(),
                timeout_s=600,
                interval_s=0.5,
                what=f"step {STEPS} checkpoint in {run}",
            )
            for p in procs:
                assert p.poll() is None, (tmp_path / "rank1.log").read_text()[-3000:]
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
    assert (runs["rank1"] / "rank-1" / "model" / "config.json").is_file()
    assert not (runs["rank1"] / "checkpoints").exists()  # only rank 0 checkpoints
    assert not (runs["rank1"] / "weights").exists()  # and publishes
    two = load_file(str(_final_checkpoint(runs["rank0"]) / "model" / "model.safetensors"))
    one = load_file(str(_final_checkpoint(runs["one"]) / "model" / "model.safetensors"))
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    assert two.keys() == one.keys()
    assert max(float((one[k] - initial[k].double()).abs().max()) for k in one) > 1e-4  # trained
    worst = max(float((two[k] - one[k]).abs().max()) for k in one)
    assert worst <= 1e-6, worst
    published = load_file(str(runs["rank0"] / "weights" / f"v{STEPS}" / "model.safetensors"))
    assert max(float((published[k] - two[k]).abs().max()) for k in two) == 0.0
    for ns in namespaces.values():  # every group consumed and acknowledged once
        assert redis_client.xpending(StreamNames(ns).groups, "learner")["pending"] == 0


def _settings(**kw) -> LearnerServiceSettings:
    return LearnerServiceSettings.model_validate({"model_path": "/m", **kw})


def test_env_rank_reads_the_pod_ordinal_and_checks_it() -> None:
    pods = {"world_size": 3, "dist_init": "env://"}
    assert env_rank(_settings(), {"RANK": "1"}) is None  # one process
    assert env_rank(_settings(world_size=3), {"RANK": "1"}) is None  # ranks spawned in-pod
    assert env_rank(_settings(**pods), {"RANK": "2", "WORLD_SIZE": "3"}) == 2
    with pytest.raises(FailedPreconditionError, match=r"needs \$RANK"):
        env_rank(_settings(**pods), {})
    with pytest.raises(InvalidArgumentError, match="not below world_size 3"):
        env_rank(_settings(**pods), {"RANK": "3"})
    with pytest.raises(InvalidArgumentError, match="disagrees"):
        env_rank(_settings(**pods), {"RANK": "0", "WORLD_SIZE": "2"})


def test_settings_bound_the_collectives_of_a_world() -> None:
    world = {"world_size": 2, "dist_init": "env://"}
    ok = _settings(**world, dist_timeout_s=30, dist_heartbeat_s=1, redis_outage_s=10)
    assert (ok.dist_timeout_s, ok.dist_heartbeat_s) == (30, 1)
    with pytest.raises(ValueError, match=r"dist_heartbeat_s \(30.0\) must be below"):
        _settings(**world, dist_timeout_s=30, dist_heartbeat_s=30, redis_outage_s=10)
    with pytest.raises(ValueError, match=r"must exceed redis_outage_s \(120.0\)"):
        _settings(**world, dist_timeout_s=60)
    assert _settings(dist_timeout_s=60).dist_timeout_s == 60  # one process: no collectives


def test_rank_commands_are_checked() -> None:
    assert RankCommand("heartbeat").groups == []
    with pytest.raises(InvalidArgumentError, match="unknown rank command 'pause'"):
        RankCommand("pause")  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError, match="train command needs at least one group"):
        RankCommand("train")
