"""The learner service with world_size=2 (gloo): rank 0 reads and broadcasts, both ranks train.

Slow (spawns a second rank that imports torch and transformers): runs under ``make soak``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from grpo.services.learner.service import build
from grpo.services.learner.settings import LearnerServiceSettings
from grpo.services.runtime.streams import StreamNames, Streams


@pytest.mark.slow
def test_two_rank_service_trains_and_checkpoints(
    tiny_model_dir: Path, make_groups, tmp_path: Path, redis_url: str, redis_client, redis_namespace
) -> None:
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    groups = make_groups(num_groups=6, group_size=4, seed=9, prefix="dp")
    for g in groups:
        streams.produce(names.groups, g, dedup_key=g.group_id)
    settings = LearnerServiceSettings.model_validate(
        {
            "model_path": str(tiny_model_dir),
            "run_dir": str(tmp_path),
            "redis_url": redis_url,
            "namespace": redis_namespace,
            "batch_groups": 3,
            "checkpoint_every": 1,
            "world_size": 2,
            "max_steps": 2,
            "block_ms": 100,
        }
    )
    parts = build(settings)
    loop = parts.workers[0]
    loop.exit_on_error = False
    loop.start()
    try:
        deadline = time.monotonic() + 300
        while not loop.status().last_checkpoint.endswith("step-00000002"):
            assert loop.error is None, loop.error
            assert time.monotonic() < deadline
            time.sleep(0.1)
    finally:
        loop.stop(60)
        assert parts.close is not None
        parts.close()  # joins rank 1, which exits on rank 0's stop broadcast
    metrics = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics] == [1, 2]
    # World-level loss statistics count both ranks' rows; group diagnostics are rank 0's.
    assert metrics[0]["loss/responses"] == 12.0 and metrics[0]["groups/count"] == 2.0
    assert redis_client.xpending(names.groups, "learner")["pending"] == 0
