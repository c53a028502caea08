"""``SERVICE`` for ``grpo serve rollout-worker``: one rollout worker plus a Generation endpoint.

The process holds one backend; the rollout worker (``grpo.services.generation.worker``) runs as
its background loop, and the same backend is served as ``grpo.v1.Generation`` (Describe,
Generate for ad-hoc sampling, LoadWeights) so operators can inspect the policy version.

With ``weights.mode: grpc`` new versions are pulled from the learner's ``grpo.v1.Weights``
server in the background (``grpo.services.runtime.weights.puller``); when ``backend.model_path`` has
no model (a pod without a shared volume) the process first waits for the learner's newest
published version, pulls it and starts the engine from that copy. On a shared volume, a
``backend.model_path`` that is not a local model folder (a hub id the learner resolved) makes
the process start from the folder of the newest published version (version 0 = the learner's
initial policy), waiting up to ``weights.startup_wait_s`` for it.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, model_validator

from grpo.errors import FailedPreconditionError
from grpo.services.generation.backend import BackendConfig, create_backend
from grpo.services.generation.service import GenerationServicer
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.runtime.policy import read_policy
from grpo.services.runtime.redis_server import (
    check_block_below_reply,
    connect,
    resolve_redis_url,
)
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServerSettings, ServiceBinding
from grpo.services.runtime.streams import StreamNames
from grpo.services.runtime.weights.puller import (
    BackgroundPuller,
    WeightPuller,
    WeightTransferConfig,
)
from grpo.v1 import common_pb2, generation_pb2_grpc

__all__ = ["SERVICE", "RolloutWorkerSettings"]


class RolloutWorkerSettings(BaseModel):
    """Settings of ``grpo serve rollout-worker``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server settings."
    )
    redis_url: str | None = Field(
        default=None,
        description="Redis holding the prompts and rollouts streams; None = $REDIS_URL "
        "(required one way or the other, grpo.services.runtime.redis_server.resolve_redis_url).",
    )
    backend: BackendConfig = Field(..., description="Sampling engine and initial policy.")
    worker: RolloutWorkerConfig = Field(
        default_factory=RolloutWorkerConfig, description="Stream names, sampling, backpressure."
    )
    weights: WeightTransferConfig = Field(
        default_factory=WeightTransferConfig,
        description="How published weights arrive: a shared volume or pulls over gRPC.",
    )

    @model_validator(mode="after")
    def _check(self) -> RolloutWorkerSettings:
        check_block_below_reply(
            self.worker.block_ms, self.server.redis_reply_timeout_s, "worker.block_ms"
        )
        return self


def _wait_for_published(client: Any, settings: RolloutWorkerSettings) -> common_pb2.PolicyWeights:
    """The newest published policy whose folder is readable here (shared volume).

    Raises:
        FailedPreconditionError: none within ``weights.startup_wait_s`` seconds.
    """
    names = StreamNames(settings.worker.namespace)
    deadline = time.monotonic() + settings.weights.startup_wait_s
    while True:
        policy = read_policy(client, names)
        if policy is not None and (Path(policy.path) / "config.json").is_file():
            return policy
        if time.monotonic() > deadline:
            raise FailedPreconditionError(
                f"backend.model_path {settings.backend.model_path!r} is not a local model folder "
                f"and no published policy appeared within {settings.weights.startup_wait_s} s"
            )
        time.sleep(0.5)


def _build(settings: RolloutWorkerSettings) -> ServiceParts:
    puller = None
    backend_config = settings.backend
    if settings.weights.mode == "grpc":
        puller = WeightPuller(settings.weights)
        if not (Path(backend_config.model_path) / "config.json").is_file():
            first = puller.pull_newest(settings.weights.startup_wait_s)
            backend_config = backend_config.model_copy(
                update={"model_path": str(first.path), "policy_version": first.policy_version}
            )
    client = connect(
        str(resolve_redis_url(settings.redis_url, required_by="rollout worker")),
        read_timeout_s=settings.server.redis_reply_timeout_s,
    )
    if puller is None and not (Path(backend_config.model_path) / "config.json").is_file():
        published = _wait_for_published(client, settings)
        backend_config = backend_config.model_copy(
            update={"model_path": published.path, "policy_version": published.policy_version}
        )
    backend = create_backend(backend_config)
    worker = RolloutWorker(
        client,
        backend,
        settings.worker,
        weights_puller=None if puller is None else BackgroundPuller(puller),
    )
    binding = ServiceBinding(
        name="grpo.v1.Generation",
        add_to_server=generation_pb2_grpc.add_GenerationServicer_to_server,
        servicer=GenerationServicer(backend, backend_config.model_path),
    )

    def close() -> None:
        backend.close()
        if puller is not None:
            puller.close()

    return ServiceParts(bindings=[binding], workers=[worker], close=close)


SERVICE = ServiceSpec(name="rollout-worker", settings_cls=RolloutWorkerSettings, build=_build)
