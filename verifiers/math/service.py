"""``grpo serve verifier-math``: the math outcome verifier as a ``grpo.v1.Verifier`` service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``serving``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`MathConfig`: tolerance,
response size limit, worker pool size, time limit and memory cap).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.server import ServerSettings
from grpo.verifiers.math.verifier import MathConfig, MathVerifier
from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.sdk.servicer import ServingSettings

__all__ = ["SERVICE", "MathServiceSettings"]


class MathServiceSettings(BaseModel):
    """Settings of the math verifier service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server: address, limits, TLS."
    )
    serving: ServingSettings = Field(
        default_factory=ServingSettings, description="Batch limit, concurrency, deadline."
    )
    verifier: MathConfig = Field(
        default_factory=MathConfig, description="Tolerance, size limit, worker pool."
    )


SERVICE = verifier_service_spec(
    "verifier-math", MathServiceSettings, lambda settings: MathVerifier(settings.verifier)
)
"""The ``ServiceSpec`` behind ``grpo serve verifier-math``."""
