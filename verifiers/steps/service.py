"""``grpo serve verifier-steps``: the math step (process) verifier as a gRPC service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``scoring``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`StepsConfig`: step
rewards, claim and size limits, worker pool size, time limit and memory cap).
"""

from __future__ import annotations

from grpo.verifiers.sdk.service import verifier_service_spec
from grpo.verifiers.steps.verifier import StepsConfig, StepsVerifier

__all__ = ["SERVICE", "StepsServiceSettings"]

SERVICE = verifier_service_spec("verifier-steps", StepsVerifier, StepsConfig)
"""The ``ServiceSpec`` behind ``grpo serve verifier-steps``."""

StepsServiceSettings = SERVICE.settings_cls
