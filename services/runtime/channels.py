"""Client channels to the project's gRPC services: plaintext, TLS, or mutual TLS.

The one way a client dials a service whose TLS files come from its settings (the assembler and
``grpo score``/``grpo eval`` to verifiers, a rollout worker to the learner's weight server):
no CA file means plaintext; a CA file means TLS verified against that CA; a client certificate
and key (with the CA) add mutual TLS. The server side is ``grpo.services.runtime.server``
(``ServerSettings.tls_*``).

:func:`describe_endpoint` is the one check of an address before any work: one ``Describe``,
bounded by :data:`CHECK_TIMEOUT_S` unless told otherwise, whose failure is one line naming the
address, what was tried and what to check (``EndpointCheckError``). ``grpo run`` (each verifier
endpoint of the run), ``grpo score --endpoint``, ``grpo eval`` (``--verifier-endpoint``,
``--generation``, a run config's endpoints), ``grpo check-verifier`` and the assembler's route
check at start all call it; command lines print its message and exit 2.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import grpc

from grpo.errors import EndpointCheckError

__all__ = ["CHECK_TIMEOUT_S", "client_channel", "client_credentials", "describe_endpoint"]

T = TypeVar("T")

CHECK_TIMEOUT_S = 1.5
"""How long the check before any work waits for an address's ``Describe`` (seconds): a
service that is up answers in milliseconds; nothing listening fails at once (connection
refused); an address that drops packets costs this long."""


def client_credentials(
    ca_file: Path | None, cert_file: Path | None = None, key_file: Path | None = None
) -> grpc.ChannelCredentials | None:
    """TLS credentials of a client (None = plaintext).

    Args:
        ca_file: PEM CA that signed the server's certificate; None for plaintext.
        cert_file, key_file: PEM client certificate and its key (mutual TLS), or None.

    Raises:
        OSError: a file cannot be read.
    """
    if ca_file is None:
        return None
    return grpc.ssl_channel_credentials(
        root_certificates=ca_file.read_bytes(),
        private_key=key_file.read_bytes() if key_file else None,
        certificate_chain=cert_file.read_bytes() if cert_file else None,
    )


def client_channel(
    target: str,
    *,
    ca_file: Path | None = None,
    cert_file: Path | None = None,
    key_file: Path | None = None,
    options: Sequence[tuple[str, Any]] = (),
) -> grpc.Channel:
    """A channel to ``target`` (``host:port`` or a gRPC target such as ``dns:///name:port``).

    Args:
        target: where the service listens.
        ca_file, cert_file, key_file: see :func:`client_credentials` (no CA = plaintext).
        options: gRPC channel options (message limits, service config, name override).

    Raises:
        OSError: a TLS file cannot be read.
    """
    credentials = client_credentials(ca_file, cert_file, key_file)
    if credentials is None:
        return grpc.insecure_channel(target, options=list(options))
    return grpc.secure_channel(target, credentials, options=list(options))


def describe_endpoint(
    what: str,
    address: str,
    describe: Callable[[float], T],
    *,
    timeout_s: float = CHECK_TIMEOUT_S,
    service: str = "",
) -> T:
    """The check of an address before any work: ``describe(timeout_s)`` called once.

    Args:
        what: what is expected there, for the message (``verifier``, ``generation service``).
        address: the gRPC target, for the message.
        describe: makes the ``Describe`` call with the deadline it is given (seconds),
            connection set-up included (no ``wait_for_ready``: nothing listening fails fast).
        timeout_s: the deadline (seconds).
        service: the gRPC service whose ``Describe`` is called (``grpo.v1.Verifier``), for
            the message.

    Returns:
        What ``describe`` returns.

    Raises:
        EndpointCheckError: the call failed; one line: ``<what> <address>: Describe failed
            (<CODE>): <why>`` (nothing listening, no answer within ``timeout_s``, not that
            service, or the status text).
        OSError: a TLS file cannot be read (raised by the channel, not here).
    """
    try:
        return describe(timeout_s)
    except grpc.RpcError as exc:
        if isinstance(exc, grpc.Call):
            code, text = exc.code(), exc.details() or ""
        else:
            code, text = grpc.StatusCode.UNKNOWN, str(exc)
        why = {
            grpc.StatusCode.UNAVAILABLE: f"nothing answers there (is the {what} running, and "
            "is the address right?)",
            grpc.StatusCode.DEADLINE_EXCEEDED: f"no answer within {timeout_s:g} s",
            grpc.StatusCode.UNIMPLEMENTED: f"it does not implement {service or what}/Describe",
        }.get(code, " ".join(text.split()) or code.name)
        raise EndpointCheckError(
            f"{what} {address}: Describe failed ({code.name}): {why}", address=address
        ) from None
