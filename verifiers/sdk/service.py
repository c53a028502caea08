"""Turn a :class:`~grpo.verifiers.sdk.base.Verifier` class into a ``grpo serve`` service.

A verifier's service module is one line::

    SERVICE = verifier_service_spec("verifier-math", MathVerifier, MathConfig)

:func:`verifier_service_spec` derives the service's settings model (:func:`service_settings`:
``server`` = gRPC network, limits and TLS; ``scoring`` = batch limit, concurrency, deadline;
``verifier`` = the verifier's own config) and returns the ``ServiceSpec`` whose ``build``
constructs the verifier first (so its worker processes exist before the gRPC server starts),
wraps it in a :class:`~grpo.verifiers.sdk.servicer.VerifierServicer` bound as
``grpo.v1.Verifier``, and returns a ``close`` hook that stops the servicer's threads and the
verifier's workers.
"""

from __future__ import annotations

import sys
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServerSettings, ServiceBinding
from grpo.v1 import verifier_pb2_grpc
from grpo.verifiers.sdk.base import Verifier
from grpo.verifiers.sdk.servicer import ScoringSettings, VerifierServicer

__all__ = ["VERIFIER_SERVICE_NAME", "service_settings", "verifier_service_spec"]

VERIFIER_SERVICE_NAME = "grpo.v1.Verifier"
"""Full proto service name every verifier serves (health is reported under this name)."""


def _summary(cls: type) -> str:
    """The first line of ``cls``'s docstring (the settings field's description)."""
    return (cls.__doc__ or cls.__name__).strip().splitlines()[0].rstrip(".")


def service_settings(
    verifier_cls: type[Verifier],
    config_cls: type[BaseModel] | None = None,
    *,
    name: str | None = None,
    module: str | None = None,
) -> type[BaseModel]:
    """The settings model of a verifier service: ``server``, ``scoring`` and ``verifier``.

    Args:
        verifier_cls: the verifier class (its docstring titles the model).
        config_cls: the verifier's frozen pydantic config, the ``verifier:`` block; None for a
            verifier without options (the model then has no ``verifier`` field).
        name: class name of the model; default ``<Verifier name minus "Verifier">ServiceSettings``.
        module: ``__module__`` of the model (where the docs say it lives); default the
            verifier's module.

    Returns:
        A frozen pydantic model (unknown keys rejected) whose fields all have defaults.
    """
    fields: dict[str, Any] = {
        "server": (
            ServerSettings,
            Field(default_factory=ServerSettings, description="gRPC server: address, limits, TLS."),
        ),
        "scoring": (
            ScoringSettings,
            Field(
                default_factory=ScoringSettings,
                description="Batch limit, concurrency, request deadline.",
            ),
        ),
    }
    if config_cls is not None:
        fields["verifier"] = (
            config_cls,
            Field(default_factory=config_cls, description=f"{_summary(config_cls)}."),
        )
    model: type[BaseModel] = create_model(
        name or f"{verifier_cls.__name__.removesuffix('Verifier')}ServiceSettings",
        __config__=ConfigDict(frozen=True, extra="forbid"),
        __doc__=f"Settings of the {verifier_cls.name!r} verifier service.",
        __module__=module or verifier_cls.__module__,
        **fields,
    )
    return model


def verifier_service_spec(
    name: str,
    verifier_cls: type[Verifier],
    config_cls: type[BaseModel] | None = None,
) -> ServiceSpec:
    """Build the ``ServiceSpec`` of a verifier service.

    Args:
        name: CLI name, e.g. ``"verifier-math"``.
        verifier_cls: the verifier; built as ``verifier_cls(settings.verifier)`` (or
            ``verifier_cls()`` without ``config_cls``), which starts its worker pool.
        config_cls: the verifier's config model (the ``verifier:`` settings block), or None.

    Returns:
        A ``ServiceSpec`` whose ``settings_cls`` is :func:`service_settings` (its
        ``__module__`` is the calling module, the service module) and whose
        ``build(settings)`` returns one ``grpo.v1.Verifier`` binding and a ``close`` hook.

    Raises:
        InvalidArgumentError: ``verifier_cls`` is not a ``Verifier`` subclass; at build time,
            from the verifier when the settings are inconsistent.
    """
    if not (isinstance(verifier_cls, type) and issubclass(verifier_cls, Verifier)):
        raise InvalidArgumentError(
            f"verifier_service_spec({name!r}) needs a Verifier subclass, got {verifier_cls!r}"
        )
    caller = sys._getframe(1).f_globals.get("__name__", verifier_cls.__module__)
    settings_cls = service_settings(verifier_cls, config_cls, module=caller)

    def build(settings: Any) -> ServiceParts:
        verifier = verifier_cls(settings.verifier) if config_cls is not None else verifier_cls()
        servicer = VerifierServicer(verifier, settings.scoring)
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
