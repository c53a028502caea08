"""SIGKILL of a learner process mid-run, then a restart: no group lost, none trained twice."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import yaml
from helpers import wait_until
from tracking_files import tensorboard_scalars

from grpo.learner.checkpoint import latest_checkpoint
from grpo.services.learner.service import build
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.v1 import common_pb2


def _start(config: Path, log: Path) -> subprocess.Popen:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1"}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "grpo.cli",
            "serve",
            "learner",
            "--config",
            str(config),
            "--port",
            "0",
            "--metrics-port",
            "-1",
        ],
        stdout=open(log, "ab"),
        stderr=subprocess.STDOUT,
        env=env,
    )


def _steps(run_dir: Path) -> list[dict]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]


def _wait(predicate, proc: subprocess.Popen, log: Path, timeout_s: float = 240.0) -> None:
    """``wait_until(predicate)`` with the learner's log tail in the failure; fails at once
    (ChildProcessError) when ``proc`` exits."""

    def ready() -> bool:
        if proc.poll() is not None:
            raise ChildProcessError(f"learner exited {proc.returncode}:\n{log.read_text()[-3000:]}")
        return bool(predicate())

    try:
        wait_until(ready, timeout_s=timeout_s, interval_s=0.1)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; log tail:\n{log.read_text()[-3000:]}") from None


def test_sigkill_then_restart_loses_and_repeats_nothing(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    groups = make_groups(num_groups=10, group_size=4, seed=7, prefix="kill")
    run_dir, log = tmp_path / "run", tmp_path / "learner.log"
    settings = {
        "model_path": str(tiny_model_dir),
        "run_dir": str(run_dir),
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "batch_groups": 2,
        "checkpoint_every": 2,
        "publish_every": 1,
        "block_ms": 100,
        "trainer": {"lr": 1e-4, "warmup_steps": 2},
    }
    config = tmp_path / "learner.yaml"
    config.write_text(yaml.safe_dump(settings))
    for g in groups[:6]:
        streams.produce(names.groups, g, dedup_key=g.group_id)

    # Run 1: 6 groups -> 3 steps; checkpoint at step 2; step 3 lives only in memory.
    proc = _start(config, log)
    _wait(lambda: len(_steps(run_dir)) == 3, proc, log)
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    assert latest_checkpoint(run_dir / "checkpoints").name == "step-00000002"
    assert redis_client.xpending(names.groups, "learner")["pending"] == 2  # step 3's groups
    killed_version = common_pb2.PolicyWeights.FromString(redis_client.get(names.policy_key))
    assert killed_version.policy_version == 3

    # Run 2: resumes from step 2, retrains step 3's groups, then the 4 new ones; stops at 5.
    for g in groups[6:]:
        streams.produce(names.groups, g, dedup_key=g.group_id)
    # The restart runs in this process (a second subprocess start only costs time).
    settings["max_steps"] = 5
    parts = build(LearnerServiceSettings.model_validate(settings))
    loop = parts.workers[0]
    assert loop.status().step == 2  # restored before any new step
    loop.start()
    try:

        def at_step_5() -> bool:
            assert loop.error is None, loop.error
            return loop.status().last_checkpoint.endswith("step-00000005")

        wait_until(at_step_5, timeout_s=240, interval_s=0.1, what="the restart's step 5")
    finally:
        loop.stop(60)

    produced = sorted(g.group_id for g in groups)
    meta = json.loads((run_dir / "checkpoints" / "step-00000005" / "meta.json").read_text())
    assert sorted(meta["consumed_group_ids"]) == produced  # none lost, none twice
    logged = [
        json.loads(x)["group_id"] for x in (run_dir / "groups.jsonl").read_text().splitlines()
    ]
    assert logged == meta["consumed_group_ids"]
    steps = _steps(run_dir)
    assert [m["step"] for m in steps] == [1, 2, 3, 4, 5]
    versions = [m["policy_version"] for m in steps]
    # Versions stay monotonic across the restart (v3 of the lost step is never reused).
    assert versions[:2] == [1, 2] and versions[2:] == [5, 6, 7]
    assert redis_client.xpending(names.groups, "learner")["pending"] == 0
    # TensorBoard (the default sink) shows the one lineage too: the killed process's step 3
    # (version 3) is purged behind the restart's (version 5). The restart here can come within
    # the second of the killed process's event file: the tracker waits for the next one.
    scalars = tensorboard_scalars(run_dir / "tensorboard")
    assert scalars["policy_version"] == {m["step"]: m["policy_version"] for m in steps}
    assert scalars["groups_consumed"][5] == 10


class _SavesAFile:
    """Stands in for a model/tokenizer: ``save_pretrained`` writes one marker file."""

    def __init__(self, name: str) -> None:
        self.name = name

    def save_pretrained(self, folder: Path) -> None:
        Path(folder).mkdir(parents=True, exist_ok=True)
        (Path(folder) / self.name).write_text(self.name)


def test_versions_are_never_reused_and_the_one_in_use_is_never_pruned(
    tmp_path: Path, redis_client, redis_namespace
) -> None:
    from grpo.services.learner.publish import (
        highest_folder_version,
        next_version,
        publish_weights,
    )
    from grpo.services.runtime.policy import read_policy

    key = StreamNames(redis_namespace).policy_key
    run_dir = tmp_path / "run"
    # The operator's case: folders v62..v66 of lost steps survive, the Redis state did not,
    # and the learner resumes from a checkpoint that recorded v61.
    for v in range(62, 67):
        (run_dir / "weights" / f"v{v}").mkdir(parents=True)
    assert read_policy(redis_client, key) is None
    version = next_version(redis_client, key, run_dir)
    assert version == 67
    model, tok = _SavesAFile("model.safetensors"), _SavesAFile("tokenizer.json")
    publish_weights(redis_client, key, model=model, tokenizer=tok, run_dir=run_dir,
                    version=version, step=61, keep=5)  # fmt: skip
    folders = sorted(int(p.name[1:]) for p in (run_dir / "weights").glob("v*"))
    assert folders == [63, 64, 65, 66, 67]  # the new one is kept, the oldest pruned
    policy = read_policy(redis_client, key)
    assert policy is not None and policy.policy_version == 67 and policy.step == 61
    assert (Path(policy.path) / "model.safetensors").is_file()
    # keep=1 still never deletes the version announced in Redis.
    publish_weights(redis_client, key, model=model, tokenizer=tok, run_dir=run_dir,
                    version=next_version(redis_client, key, run_dir), step=62, keep=1)  # fmt: skip
    assert highest_folder_version(run_dir) == 68
    assert sorted(int(p.name[1:]) for p in (run_dir / "weights").glob("v*")) == [68]
