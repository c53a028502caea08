"""The exception hierarchy under its service-layer name: a re-export of ``grpo.errors``.

The classes are declared once, in ``grpo.errors`` (no gRPC import, so the domain layers use
them without loading grpc); their gRPC status codes are the table beside the server
interceptor, ``grpo.services.server.STATUS_CODES``. New code imports ``grpo.errors``; this
module keeps ``grpo.services.errors`` importable for the service layer.
"""

from __future__ import annotations

from grpo.errors import (
    ContractError,
    DeadlineExceededError,
    FailedPreconditionError,
    GrpoError,
    InternalError,
    InvalidArgumentError,
    NotFoundError,
    ResourceExhaustedError,
    UnavailableError,
)

__all__ = [
    "ContractError",
    "DeadlineExceededError",
    "FailedPreconditionError",
    "GrpoError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "ResourceExhaustedError",
    "UnavailableError",
]
