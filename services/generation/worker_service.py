"""``SERVICE`` for ``grpo serve rollout-worker``: one rollout worker plus a Generation endpoint.

The process holds one backend; the rollout worker (``grpo.services.generation.worker``) runs as
its background loop, and the same backend is served as ``grpo.v1.Generation`` (Describe,
Generate for ad-hoc sampling, LoadWeights) so operators can inspect the policy version.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.generation.backend import BackendConfig, create_backend
from grpo.services.generation.service import GenerationServicer
from grpo.services.generation.worker import RolloutWorker, RolloutWorkerConfig
from grpo.services.redis_server import connect
from grpo.services.registry import ServiceParts, ServiceSpec
from grpo.services.server import ServerSettings, ServiceBinding
from grpo.v1 import generation_pb2_grpc

__all__ = ["SERVICE", "RolloutWorkerSettings"]


class RolloutWorkerSettings(BaseModel):
    """Settings of ``grpo serve rollout-worker``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server settings."
    )
    redis_url: str = Field(
        default="redis://127.0.0.1:6379/0",
        description="Redis holding the prompts and rollouts streams.",
    )
    backend: BackendConfig = Field(..., description="Sampling engine and initial policy.")
    worker: RolloutWorkerConfig = Field(
        default_factory=RolloutWorkerConfig, description="Stream names, sampling, backpressure."
    )


def _build(settings: RolloutWorkerSettings) -> ServiceParts:
    backend = create_backend(settings.backend)
    worker = RolloutWorker(connect(settings.redis_url), backend, settings.worker)
    binding = ServiceBinding(
        name="grpo.v1.Generation",
        add_to_server=generation_pb2_grpc.add_GenerationServicer_to_server,
        servicer=GenerationServicer(backend, settings.backend.model_path),
    )
    return ServiceParts(bindings=[binding], workers=[worker], close=backend.close)


SERVICE = ServiceSpec(name="rollout-worker", settings_cls=RolloutWorkerSettings, build=_build)
