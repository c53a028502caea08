"""The project's exception hierarchy and its single mapping to gRPC status codes.

Domain code (verifiers, generation backends, assembler, learner) raises these; the servicer
edge (``grpo.services.server``'s interceptor) is the only place that turns them into gRPC
status codes. Names avoid shadowing builtins (no ``TimeoutError``/``ConnectionError``).
"""

from __future__ import annotations

import grpc

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
    "grpc_status_for",
]


class GrpoError(Exception):
    """Base class of every error the project raises on purpose."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL


class InvalidArgumentError(GrpoError, ValueError):
    """A request or input is malformed; the message names the offending field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class ContractError(InvalidArgumentError):
    """A message violates the grpo.v1 contract (missing required field, wrong lengths)."""


class NotFoundError(GrpoError, LookupError):
    """A named thing (verifier route, checkpoint, model path) does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class FailedPreconditionError(GrpoError):
    """The system is not in a state that allows the operation (e.g. sandbox missing)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class ResourceExhaustedError(GrpoError):
    """A limit was hit (batch too large, queue full, memory cap)."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class DeadlineExceededError(GrpoError):
    """The caller's deadline or a configured time limit passed."""

    code = grpc.StatusCode.DEADLINE_EXCEEDED


class UnavailableError(GrpoError):
    """A dependency (Redis, a verifier) cannot be reached right now; retrying may succeed."""

    code = grpc.StatusCode.UNAVAILABLE


class InternalError(GrpoError):
    """A bug or an unexpected failure inside the service."""

    code = grpc.StatusCode.INTERNAL


def grpc_status_for(exc: BaseException) -> grpc.StatusCode:
    """Return the gRPC status code for ``exc``: its ``code`` if a GrpoError, else INTERNAL."""
    if isinstance(exc, GrpoError):
        return exc.code
    return grpc.StatusCode.INTERNAL
