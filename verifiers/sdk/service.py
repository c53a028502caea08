"""Turn a :class:`~grpo.verifiers.sdk.base.Verifier` class into a ``grpo serve`` service.

A verifier's service module is one line::

    SERVICE = verifier_service_spec("verifier-math", MathVerifier, MathConfig)

:func:`verifier_service_spec` derives the service's settings model (:func:`service_settings`:
``server`` = gRPC network, limits and TLS; ``scoring`` = batch limit, concurrency, deadline;
``verifier`` = the verifier's own config) and returns the ``ServiceSpec`` whose ``build``
constructs the verifier first (so its worker processes exist before the gRPC server starts),
wraps it in a :class:`~grpo.verifiers.sdk.servicer.VerifierServicer` bound as
``grpo.v1.Verifier``, and returns a ``close`` hook that stops the servicer's threads and the
verifier's workers. A verifier that overrides :meth:`~grpo.verifiers.sdk.base.Verifier.self_test`
also gets a :class:`SelfTestWorker`: the service reports NOT_SERVING (with the reason in its
log) until the self-test passes, and again whenever a later run of it fails.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, create_model

from grpo.errors import InvalidArgumentError
from grpo.services.runtime.registry import (
    LoopWorker,
    ServiceParts,
    ServiceSpec,
    VerifierDeclaration,
)
from grpo.services.runtime.server import ServerSettings, ServiceBinding
from grpo.v1 import verifier_pb2, verifier_pb2_grpc
from grpo.verifiers.sdk.base import Verifier
from grpo.verifiers.sdk.servicer import ScoringSettings, VerifierServicer

__all__ = ["VERIFIER_SERVICE_NAME", "SelfTestWorker", "service_settings", "verifier_service_spec"]

log = logging.getLogger(__name__)

VERIFIER_SERVICE_NAME = "grpo.v1.Verifier"
"""Full proto service name every verifier serves (health is reported under this name)."""


class SelfTestWorker(LoopWorker):
    """Runs a verifier's :meth:`~grpo.verifiers.sdk.base.Verifier.self_test` beside the server;
    :meth:`readiness` is the service's readiness check (``ServiceParts.readiness``).

    The first run starts with the worker (the server already answers health, NOT_SERVING).
    A failed run is repeated after ``retry_s`` seconds (doubling up to ``max_retry_s``); a
    passed one after ``recheck_s`` seconds, so a sandbox that breaks later turns the service
    NOT_SERVING again within that time. A self-test that raises counts as failed.

    Args:
        verifier: the verifier to test.
        recheck_s: seconds between runs while it passes (> 0).
        retry_s: first delay after a failed run, in seconds (> 0).
        max_retry_s: longest delay between failed runs, in seconds.
    """

    thread_name = "self-test"

    def __init__(
        self,
        verifier: Verifier,
        recheck_s: float = 60.0,
        retry_s: float = 2.0,
        max_retry_s: float = 30.0,
    ) -> None:
        super().__init__()
        if recheck_s <= 0 or retry_s <= 0 or max_retry_s < retry_s:
            raise InvalidArgumentError(
                f"SelfTestWorker needs recheck_s > 0 and 0 < retry_s <= max_retry_s, got "
                f"recheck_s={recheck_s}, retry_s={retry_s}, max_retry_s={max_retry_s}"
            )
        self.verifier = verifier
        self.recheck_s = recheck_s
        self.retry_s = retry_s
        self.max_retry_s = max_retry_s
        self._delay = retry_s
        self._lock = threading.Lock()
        self._reason: str | None = f"the {verifier.name} verifier's self-test has not run yet"
        self.runs = 0
        """Self-test runs finished so far."""

    def readiness(self) -> str | None:
        """None while the last self-test passed, else why not (never blocks)."""
        with self._lock:
            return self._reason

    def run_once(self) -> None:
        """Run the self-test once, record the outcome and wait until the next run is due."""
        started = time.monotonic()
        try:
            reason = self.verifier.self_test()
        except Exception as exc:
            log.exception("self-test raised", extra={"verifier": self.verifier.name})
            reason = f"self-test raised {type(exc).__name__}: {exc}"
        with self._lock:
            self._reason = reason
            self.runs += 1
        if reason is None:
            self._delay = self.retry_s
            wait = self.recheck_s
        else:
            log.error(
                "self-test failed: %s",
                reason,
                extra={
                    "verifier": self.verifier.name,
                    "reason": reason,
                    "seconds": round(time.monotonic() - started, 3),
                },
            )
            wait, self._delay = self._delay, min(self._delay * 2, self.max_retry_s)
        self._stop.wait(wait)


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
        ``__module__`` is the calling module, the service module), whose
        ``build(settings)`` returns one ``grpo.v1.Verifier`` binding and a ``close`` hook, and
        whose ``verifier`` declares the class's kind and task types (checked by ``grpo run``
        against its routes before anything starts).

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

        if type(verifier).self_test is Verifier.self_test:
            return ServiceParts(bindings=[binding], close=close)
        checker = SelfTestWorker(verifier)
        return ServiceParts(
            bindings=[binding], workers=[checker], close=close, readiness=checker.readiness
        )

    kind = "process" if verifier_cls.kind == verifier_pb2.VERIFIER_KIND_PROCESS else "outcome"
    declared = VerifierDeclaration(kind=kind, task_types=tuple(verifier_cls.task_types))
    return ServiceSpec(name=name, settings_cls=settings_cls, build=build, verifier=declared)
