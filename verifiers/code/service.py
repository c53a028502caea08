"""``grpo serve verifier-code``: the sandboxed code verifier as a ``grpo.v1.Verifier`` service.

Settings (YAML / ``GRPO_`` environment / CLI flags): ``server`` (network, TLS), ``scoring``
(batch limit, concurrency, request deadline) and ``verifier`` (:class:`CodeConfig`: reward
mode and ``sandbox`` slots, uid range, limits, ``allow_unsandboxed``). Building the service
creates the sandbox (subreaper, interpreter mirror, slot uids) before the gRPC server starts;
it fails with FailedPreconditionError when bubblewrap is missing unless
``verifier.sandbox.allow_unsandboxed`` is true.
"""

from __future__ import annotations

from grpo.verifiers.code.verifier import CodeConfig, CodeVerifier
from grpo.verifiers.sdk.service import verifier_service_spec

__all__ = ["SERVICE", "CodeServiceSettings"]

SERVICE = verifier_service_spec("verifier-code", CodeVerifier, CodeConfig)
"""The ``ServiceSpec`` behind ``grpo serve verifier-code``."""

CodeServiceSettings = SERVICE.settings_cls
