"""``grpo serve verifier-steps``: the math step (process) verifier as a gRPC service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``serving``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`StepsConfig`: step rewards,
claim and size limits, worker pool size, time limit and memory cap).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.server import ServerSettings
from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.sdk.servicer import ServingSettings
from grpo.verifiers.steps.verifier import StepsConfig, StepsVerifier

__all__ = ["SERVICE", "StepsServiceSettings"]


class StepsServiceSettings(BaseModel):
    """Settings of the math step verifier service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server: address, limits, TLS."
    )
    serving: ServingSettings = Field(
        default_factory=ServingSettings, description="Batch limit, concurrency, deadline."
    )
    verifier: StepsConfig = Field(
        default_factory=StepsConfig, description="Step rewards, limits, worker pool."
    )


SERVICE = verifier_service_spec(
    "verifier-steps", StepsServiceSettings, lambda settings: StepsVerifier(settings.verifier)
)
"""The ``ServiceSpec`` behind ``grpo serve verifier-steps``."""
