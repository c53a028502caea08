"""Turn a :class:`~grpo.verifiers.sdk.base.Verifier` into a ``grpo serve`` service.

:func:`verifier_service_spec` returns the ``ServiceSpec`` whose ``build`` constructs the
verifier first (so its worker processes exist before the gRPC server starts), wraps it in a
:class:`~grpo.verifiers.sdk.servicer.VerifierServicer` bound as ``grpo.v1.Verifier``, and
returns a ``close`` hook that stops the servicer's threads and the verifier's workers.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pydantic import BaseModel

from grpo.services.registry import ServiceParts, ServiceSpec
from grpo.services.server import ServiceBinding
from grpo.v1 import verifier_pb2_grpc
from grpo.verifiers.sdk.base import Verifier
from grpo.verifiers.sdk.servicer import ServingSettings, VerifierServicer

__all__ = ["VERIFIER_SERVICE_NAME", "verifier_service_spec"]

VERIFIER_SERVICE_NAME = "grpo.v1.Verifier"
"""Full proto service name every verifier serves (health is reported under this name)."""

SettingsT = TypeVar("SettingsT", bound=BaseModel)


def verifier_service_spec(
    name: str,
    settings_cls: type[SettingsT],
    make_verifier: Callable[[SettingsT], Verifier],
) -> ServiceSpec:
    """Build the ``ServiceSpec`` of a verifier service.

    Args:
        name: CLI name, e.g. ``"verifier-math"``.
        settings_cls: the service's settings model; it must have fields ``server``
            (``ServerSettings``) and ``serving`` (:class:`ServingSettings`).
        make_verifier: builds the verifier from loaded settings (starts its worker pool).

    Returns:
        A ``ServiceSpec`` whose ``build(settings)`` returns one ``grpo.v1.Verifier`` binding
        and a ``close`` hook.

    Raises:
        InvalidArgumentError: from ``make_verifier`` when the settings are inconsistent.
    """

    def build(settings: Any) -> ServiceParts:
        verifier = make_verifier(settings)
        serving = getattr(settings, "serving", None) or ServingSettings()
        servicer = VerifierServicer(verifier, serving)
        binding = ServiceBinding(
            name=VERIFIER_SERVICE_NAME,
            add_to_server=verifier_pb2_grpc.add_VerifierServicer_to_server,
            servicer=servicer,
        )

        def close() -> None:
            servicer.close()
            verifier.close()

        return ServiceParts(bindings=[binding], close=close)

    return ServiceSpec(name=name, settings_cls=settings_cls, build=build)
