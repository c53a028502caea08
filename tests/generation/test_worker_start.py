"""A rollout worker whose ``backend.model_path`` is not a local model (a hub id resolved by the
learner) starts from the newest published policy version on the shared volume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from grpo.errors import FailedPreconditionError
from grpo.services.generation.worker_service import SERVICE
from grpo.services.runtime.config import load_settings
from grpo.services.runtime.streams import StreamNames
from grpo.v1 import common_pb2, generation_pb2


def _settings(redis_url: str, namespace: str, model_path: str, wait_s: float) -> Any:
    return load_settings(
        SERVICE.settings_cls,
        overrides={
            "redis_url": redis_url,
            "backend.model_path": model_path,
            "worker.namespace": namespace,
            "weights.startup_wait_s": wait_s,
        },
        environ={},
    )


def test_starts_from_the_published_version_when_model_path_is_no_folder(
    tiny_model_dir: Path, redis_url: str, redis_client: Any, redis_namespace: str
) -> None:
    names = StreamNames(redis_namespace)
    with pytest.raises(FailedPreconditionError, match="no published policy appeared"):
        SERVICE.build(_settings(redis_url, redis_namespace, "org/some-hub-model", 0.2))
    published = common_pb2.PolicyWeights(policy_version=0, step=0, path=str(tiny_model_dir))
    redis_client.set(names.policy_key, published.SerializeToString())
    parts = SERVICE.build(_settings(redis_url, redis_namespace, "org/some-hub-model", 5.0))
    try:
        described = parts.bindings[0].servicer.Describe(
            generation_pb2.GenerationDescribeRequest(), None
        )
        assert described.model_path == str(tiny_model_dir) and described.policy_version == 0
    finally:
        assert parts.close is not None
        parts.close()
