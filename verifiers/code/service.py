"""``grpo serve verifier-code``: the sandboxed code verifier as a ``grpo.v1.Verifier`` service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``serving``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`CodeConfig`: reward
mode and ``sandbox`` slots, uid range, limits, ``allow_unsandboxed``). Building the service
creates the sandbox (subreaper, interpreter mirror, slot uids) before the gRPC server starts;
it fails with FailedPreconditionError when bubblewrap is missing unless
``verifier.sandbox.allow_unsandboxed`` is true.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from grpo.services.server import ServerSettings
from grpo.verifiers.code.verifier import CodeConfig, CodeVerifier
from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.sdk.servicer import ServingSettings

__all__ = ["SERVICE", "CodeServiceSettings"]


class CodeServiceSettings(BaseModel):
    """Settings of the code verifier service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server: address, limits, TLS."
    )
    serving: ServingSettings = Field(
        default_factory=ServingSettings, description="Batch limit, concurrency, deadline."
    )
    verifier: CodeConfig = Field(
        default_factory=CodeConfig, description="Reward mode, sandbox slots and limits."
    )


SERVICE = verifier_service_spec(
    "verifier-code", CodeServiceSettings, lambda settings: CodeVerifier(settings.verifier)
)
"""The ``ServiceSpec`` behind ``grpo serve verifier-code``."""
