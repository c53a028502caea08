"""A killed rank stops the whole world, which restarts from the last checkpoint without losing
or repeating a group.

Two ``grpo serve learner`` processes (``dist_init: env://``, gloo over loopback, their own run
dirs as pods have their own volumes) train 3 steps; the checkpoint is at step 2, so step 3
lives only in process memory and its groups are still pending in Redis. Rank 1 is SIGKILLed
while rank 0 idles (no groups left): rank 0's next heartbeat fails and it exits non-zero
within seconds. Both restart on the same rendezvous port, form the world again from the step-2
checkpoint (rank 1 receives it over the process group) and train to the end. The final
checkpoint's consumed ids and ``groups.jsonl`` hold every group exactly once.
"""

from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path

import pytest
from helpers import wait_until

sys.path.insert(0, str(Path(__file__).parent))
from pod_world import free_port, serve_learner

from grpo.learner.checkpoint import latest_checkpoint
from grpo.services.runtime.streams import StreamNames, Streams

pytestmark = [pytest.mark.slow, pytest.mark.faults]

G, B, CKPT_EVERY, STEPS = 4, 2, 2, 5
BEFORE_KILL = 3  # steps trained before the kill: one past the checkpoint at step 2
EXIT_BOUND_S = 30.0  # rank 0 must exit within this after rank 1 died (heartbeat 0.5 s)


def _steps(run_dir: Path) -> list[int]:
    path = run_dir / "metrics.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def _group_ids(run_dir: Path) -> list[str]:
    lines = (run_dir / "groups.jsonl").read_text().splitlines()
    return [json.loads(line)["group_id"] for line in lines if line.strip()]


def test_killed_rank_stops_the_world_and_restart_loses_and_repeats_no_group(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    groups = make_groups(num_groups=STEPS * B, group_size=G, seed=33, prefix="kill")
    all_ids = sorted(g.group_id for g in groups)
    base = {
        "server": {"host": "127.0.0.1", "port": 0, "metrics_port": 0},
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "batch_groups": B,
        "checkpoint_every": CKPT_EVERY,
        "max_steps": STEPS,
        "block_ms": 100,
        "trainer": {"lr": 1e-3, "warmup_steps": 0},
        "world_size": 2,
        "dist_init": "env://",
        "dist_heartbeat_s": 0.5,
    }
    pod0, pod1 = tmp_path / "pod-0", tmp_path / "pod-1"
    rendezvous = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    configs = [  # rank 1's "pod" has no model folder: rank 0 sends it
        {**base, "model_path": str(tiny_model_dir), "run_dir": str(pod0)},
        {**base, "model_path": str(tmp_path / "absent"), "run_dir": str(pod1)},
    ]

    def start() -> list:
        return [
            serve_learner(cfg, tmp_path / f"rank{r}.yaml", {**rendezvous, "RANK": str(r)})
            for r, cfg in enumerate(configs)
        ]

    def logs() -> str:
        return "\n".join(
            f"--- rank {r}:\n" + (tmp_path / f"rank{r}.log").read_text()[-2500:] for r in (0, 1)
        )

    for g in groups[: BEFORE_KILL * B]:
        streams.produce(names.groups, g, dedup_key=g.group_id)
    procs = start()
    try:
        wait_until(
            lambda: BEFORE_KILL in _steps(pod0) or any(p.poll() is not None for p in procs),
            timeout_s=600,
            interval_s=0.2,
            what=f"step {BEFORE_KILL} on rank 0",
        )
        assert all(p.poll() is None for p in procs), logs()
        ckpt = latest_checkpoint(pod0 / "checkpoints")
        assert ckpt is not None and ckpt.name == f"step-{CKPT_EVERY:08d}"  # step 3: memory only
        procs[1].send_signal(signal.SIGKILL)
        killed_at = time.monotonic()
        procs[0].wait(EXIT_BOUND_S + 60)
        exit_s = time.monotonic() - killed_at
        assert procs[0].returncode not in (0, None), logs()
        assert exit_s < EXIT_BOUND_S, f"rank 0 took {exit_s:.1f} s to exit\n{logs()}"
        print(f"rank 0 exited {exit_s:.2f} s after rank 1 was killed (code {procs[0].returncode})")
        assert "Connection closed by peer" in (tmp_path / "rank0.log").read_text(), logs()
        pending = redis_client.xpending(names.groups, "learner")["pending"]
        assert pending == (BEFORE_KILL - CKPT_EVERY) * B  # step 3's groups: never acknowledged

        for g in groups[BEFORE_KILL * B :]:
            streams.produce(names.groups, g, dedup_key=g.group_id)
        procs = start()  # the pods restart: same rendezvous address, rank 0's volume kept
        final = pod0 / "checkpoints" / f"step-{STEPS:08d}" / "meta.json"
        wait_until(
            lambda: final.is_file() or any(p.poll() is not None for p in procs),
            timeout_s=600,
            interval_s=0.2,
            what=f"step {STEPS} checkpoint after the restart",
        )
        assert all(p.poll() is None for p in procs), logs()
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait(120)
    # Rank 1 restored the step-2 checkpoint rank 0 sent it; only rank 0 wrote checkpoints.
    copy = json.loads((pod1 / "rank-1" / "checkpoint" / "meta.json").read_text())
    assert copy["step"] == CKPT_EVERY
    assert not (pod1 / "checkpoints").exists()
    consumed = json.loads(final.read_text())["consumed_group_ids"]
    assert sorted(consumed) == all_ids  # none lost, none twice
    trained = _group_ids(pod0)
    assert sorted(trained) == all_ids, trained
    assert _steps(pod0) == list(range(1, STEPS + 1))  # the lost step 3 was written once
    assert redis_client.xpending(names.groups, "learner")["pending"] == 0


def test_hung_rank_fails_the_world_after_dist_timeout_s(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    """A rank that stops answering (SIGSTOP: a lost node, a hung process) closes no socket:
    rank 0's heartbeat barrier fails after ``dist_timeout_s``, and rank 0 exits non-zero; the
    stalled rank, once it runs again, fails its own collective (timed out, rank 0 gone) and
    exits non-zero too."""
    timeout_s = 20.0
    names, streams = StreamNames(redis_namespace), Streams(redis_client)
    for g in make_groups(num_groups=B, group_size=G, seed=34, prefix="hung"):
        streams.produce(names.groups, g, dedup_key=g.group_id)
    base = {
        "server": {"host": "127.0.0.1", "port": 0, "metrics_port": 0},
        "redis_url": redis_url,
        "namespace": redis_namespace,
        "batch_groups": B,
        "block_ms": 100,
        "world_size": 2,
        "dist_init": "env://",
        "dist_timeout_s": timeout_s,
        "dist_heartbeat_s": 0.5,
        "redis_outage_s": timeout_s / 2,
    }
    pod0 = tmp_path / "pod-0"
    rendezvous = {"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()), "WORLD_SIZE": "2"}
    configs = [
        {**base, "model_path": str(tiny_model_dir), "run_dir": str(pod0)},
        {**base, "model_path": str(tiny_model_dir), "run_dir": str(tmp_path / "pod-1")},
    ]
    procs = [
        serve_learner(cfg, tmp_path / f"rank{r}.yaml", {**rendezvous, "RANK": str(r)})
        for r, cfg in enumerate(configs)
    ]

    def logs() -> str:
        return "\n".join(
            f"--- rank {r}:\n" + (tmp_path / f"rank{r}.log").read_text()[-2500:] for r in (0, 1)
        )

    try:
        wait_until(
            lambda: 1 in _steps(pod0) or any(p.poll() is not None for p in procs),
            timeout_s=600,
            interval_s=0.2,
            what="step 1 on rank 0",
        )
        assert all(p.poll() is None for p in procs), logs()
        procs[1].send_signal(signal.SIGSTOP)
        stopped_at = time.monotonic()
        procs[0].wait(timeout_s + 60)
        exit_s = time.monotonic() - stopped_at
        assert procs[0].returncode not in (0, None), logs()
        # The barrier in flight began at most one heartbeat before the stop.
        assert timeout_s - 1.0 <= exit_s < timeout_s + 20.0, f"{exit_s:.1f} s\n{logs()}"
        assert "Timed out" in (tmp_path / "rank0.log").read_text(), logs()
        procs[1].send_signal(signal.SIGCONT)
        resumed_at = time.monotonic()
        procs[1].wait(60)
        follower_exit_s = time.monotonic() - resumed_at
        assert procs[1].returncode not in (0, None), logs()
        print(
            f"rank 0 exited {exit_s:.2f} s after rank 1 stopped answering (dist_timeout_s "
            f"{timeout_s}); rank 1 exited {follower_exit_s:.2f} s after it ran again"
        )
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGCONT)
                p.send_signal(signal.SIGKILL)
                p.wait(30)
