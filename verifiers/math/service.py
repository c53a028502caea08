"""``grpo serve verifier-math``: the math outcome verifier as a ``grpo.v1.Verifier`` service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``scoring``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`MathConfig`: tolerance,
response size limit, worker pool size, time limit and memory cap).
"""

from __future__ import annotations

from grpo.verifiers.math.verifier import MathConfig, MathVerifier
from grpo.verifiers.sdk.service import verifier_service_spec

__all__ = ["SERVICE", "MathServiceSettings"]

SERVICE = verifier_service_spec("verifier-math", MathVerifier, MathConfig)
"""The ``ServiceSpec`` behind ``grpo serve verifier-math``."""

MathServiceSettings = SERVICE.settings_cls
