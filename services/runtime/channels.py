"""Client channels to the project's gRPC services: plaintext, TLS, or mutual TLS.

The one way a client dials a service whose TLS files come from its settings (the assembler and
``grpo score``/``grpo eval`` to verifiers, a rollout worker to the learner's weight server):
no CA file means plaintext; a CA file means TLS verified against that CA; a client certificate
and key (with the CA) add mutual TLS. The server side is ``grpo.services.runtime.server``
(``ServerSettings.tls_*``).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import grpc

__all__ = ["client_channel", "client_credentials"]


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
