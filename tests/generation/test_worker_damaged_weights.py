"""Published weights carry their digests (``grpo.integrity``): a damaged version is never
loaded by a rollout worker (one log line; it goes on with the loaded weights and loads the next
intact version), a weight server serves the digests recorded at publication (so a file damaged
at rest fails its pull), and an evaluation's snapshot refuses it."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path

import pytest
import redis

from grpo.integrity import DamagedError, write_digests
from grpo.services.generation.backend import SamplingConfig
from grpo.services.generation.transformers_backend import TransformersBackend
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.runtime.policy import snapshot_policy
from grpo.services.runtime.streams import StreamNames
from grpo.services.runtime.weights.store import WeightStore, file_sha256
from grpo.v1 import common_pb2


def _publish(model_dir: Path, run_dir: Path, version: int) -> Path:
    """What ``publish_weights`` leaves: ``weights/v<N>`` with its digests."""
    folder = run_dir / "weights" / f"v{version}"
    shutil.copytree(model_dir, folder)
    write_digests(folder)
    return folder


def _damage(folder: Path) -> None:
    path = folder / "model.safetensors"
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # same size, other bytes
    path.write_bytes(bytes(raw))


def _announce(client: redis.Redis, names: StreamNames, folder: Path, version: int) -> None:
    weights = common_pb2.PolicyWeights(policy_version=version, path=str(folder), step=version)
    client.set(names.policy_key, weights.SerializeToString())


def test_a_worker_never_loads_a_damaged_version_and_loads_the_next_intact_one(
    redis_client: redis.Redis,
    redis_namespace: str,
    backend: TransformersBackend,
    tuned_model_dir: Path,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    names = StreamNames(redis_namespace)
    worker = RolloutWorker(
        redis_client,
        backend,
        RolloutWorkerConfig(namespace=redis_namespace, sampling=SamplingConfig(max_new_tokens=4)),
    )
    damaged = _publish(tuned_model_dir, tmp_path, 1)
    _damage(damaged)
    _announce(redis_client, names, damaged, 1)
    with caplog.at_level(logging.ERROR, logger="grpo.services.generation.worker"):
        assert not worker.maybe_reload_weights()
        assert not worker.maybe_reload_weights()  # not hashed, nor logged, again
    assert backend.policy_version == 0
    lines = [r.getMessage() for r in caplog.records if "damaged" in r.getMessage()]
    assert len(lines) == 1 and "published weights v1 are damaged" in lines[0]
    assert "model.safetensors differs" in lines[0] and "generating with v0" in lines[0]
    intact = _publish(tuned_model_dir, tmp_path, 2)
    _announce(redis_client, names, intact, 2)
    assert worker.maybe_reload_weights() and backend.policy_version == 2


def test_the_weight_server_and_a_snapshot_trust_the_recorded_digests(
    tuned_model_dir: Path, tmp_path: Path
) -> None:
    folder = _publish(tuned_model_dir, tmp_path, 3)
    recorded = {f.name: f.sha256 for f in WeightStore(tmp_path).manifest(3).files}
    _damage(folder)
    served = {f.name: f.sha256 for f in WeightStore(tmp_path).manifest(3).files}
    assert served == recorded  # what was published, not what the disk holds now
    assert served["model.safetensors"] != file_sha256(folder / "model.safetensors")
    dest = tmp_path / "eval" / "policy"
    with pytest.raises(DamagedError, match=r"model\.safetensors differs"):
        snapshot_policy(folder, dest)
    assert not dest.exists()


def test_published_weights_without_manifest_or_index_entry_are_damaged_in_a_digest_run(
    tuned_model_dir: Path, tmp_path: Path
) -> None:
    """A published version whose DIGESTS.json and index entry were both deleted is damaged
    in a run whose run.json records that it writes digests (a snapshot refuses it, the weight
    server fails its manifest); outside such a run it is trusted as one from before digests."""
    import json

    from grpo.integrity import (
        DIGESTS_FILE,
        INDEX_FILE,
        RUN_RECORD_FILE,
        RUN_RECORD_KEY,
        NoDigestsError,
        check_digests,
        record_digests,
    )

    folder = _publish(tuned_model_dir, tmp_path, 2)
    record_digests(folder)
    (folder / DIGESTS_FILE).unlink()
    (tmp_path / "weights" / INDEX_FILE).unlink()
    _damage(folder)
    with pytest.raises(NoDigestsError):
        check_digests(folder)  # no run record: from before digests, as before
    (tmp_path / RUN_RECORD_FILE).write_text(json.dumps({"run_id": "r", RUN_RECORD_KEY: True}))
    dest = tmp_path / "eval" / "policy"
    with pytest.raises(DamagedError, match=r"its run records in run\.json"):
        snapshot_policy(folder, dest)
    assert not dest.exists()
    with pytest.raises(DamagedError, match=r"DIGESTS\.json is missing"):
        WeightStore(tmp_path).manifest(2)
