"""The learner spanning pods, run here as W = 2 separate ``grpo serve learner`` processes that
rendezvous over loopback (``dist_init: env://``, ``$RANK``, gloo), each with its own run dir as
pods have their own volumes, rank 1 without the model folder (rank 0 sends it). After N steps
rank 0's parameters equal a single process's on the same groups to 1e-6."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from helpers import wait_until
from safetensors.torch import load_file

from grpo.errors import FailedPreconditionError, InvalidArgumentError
from grpo.services.learner.pod_ranks import env_rank
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.streams import StreamNames, Streams

STEPS = 2


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _serve(config: dict, path: Path, env: dict[str, str]) -> subprocess.Popen:
    path.write_text(yaml.safe_dump(config))
    log = path.with_suffix(".log").open("w")
    return subprocess.Popen(
        [sys.executable, "-m", "grpo.cli", "serve", "learner", "--config", str(path), "--log-text"],
        env={**os.environ, "OMP_NUM_THREADS": "1", **env},
        stdout=log,
        stderr=subprocess.STDOUT,
    )


def _final_checkpoint(run_dir: Path) -> Path:
    return run_dir / "checkpoints" / f"step-{STEPS:08d}"


@pytest.mark.slow
def test_two_pod_ranks_train_like_one_process(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
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
    world = {"world_size": 2, "dist_init": "env://", "namespace": namespaces["pods"]}
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
    two = load_file(str(_final_checkpoint(runs["rank0"]) / "model" / "model.safetensors"))
    one = load_file(str(_final_checkpoint(runs["one"]) / "model" / "model.safetensors"))
    initial = load_file(str(tiny_model_dir / "model.safetensors"))
    assert two.keys() == one.keys()
    assert max(float((one[k] - initial[k].double()).abs().max()) for k in one) > 1e-4  # trained
    worst = max(float((two[k] - one[k]).abs().max()) for k in one)
    assert worst <= 1e-6, worst
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
