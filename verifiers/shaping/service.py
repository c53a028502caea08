"""``grpo serve verifier-format`` and ``grpo serve verifier-length``: the shaping rewards as
``grpo.v1.Verifier`` services (settings: ``server``, ``scoring``, ``verifier``)."""

from __future__ import annotations

from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.shaping.verifier import (
    FormatConfig,
    FormatVerifier,
    LengthConfig,
    LengthVerifier,
)

__all__ = ["FORMAT_SERVICE", "LENGTH_SERVICE"]

FORMAT_SERVICE = verifier_service_spec("verifier-format", FormatVerifier, FormatConfig)
"""The ``ServiceSpec`` behind ``grpo serve verifier-format``."""

LENGTH_SERVICE = verifier_service_spec("verifier-length", LengthVerifier, LengthConfig)
"""The ``ServiceSpec`` behind ``grpo serve verifier-length``."""
