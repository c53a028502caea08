"""The project's exception hierarchy, free of any transport: domain code raises these.

Verifiers, generation backends, the assembler's logic and the learner raise these classes;
none of them imports gRPC. The one place an exception becomes a gRPC status code is the
table beside the server interceptor (``grpo.services.runtime.server.STATUS_CODES``). Names avoid
shadowing builtins (no ``TimeoutError``/``ConnectionError``), and each class also derives
from the builtin a caller would expect where there is one (``ValueError``, ``LookupError``).
"""

from __future__ import annotations

__all__ = [
    "ContractError",
    "DeadlineExceededError",
    "EndpointCheckError",
    "FailedPreconditionError",
    "GrpoError",
    "InternalError",
    "InvalidArgumentError",
    "NotFoundError",
    "ResourceExhaustedError",
    "UnavailableError",
    "UsageError",
]


class GrpoError(Exception):
    """Base class of every error the project raises on purpose."""


class InvalidArgumentError(GrpoError, ValueError):
    """A request or input is malformed; the message names the offending field."""


class ContractError(InvalidArgumentError):
    """A message violates the grpo.v1 contract (missing required field, wrong lengths)."""


class UsageError(InvalidArgumentError):
    """A command was invoked wrongly (an option's value, options that exclude each other, an
    input file that cannot be read): nothing was done. Command lines exit 2 with the message,
    as for their parser's own errors (``grpo.cli_console``).

    Attributes:
        option: the option at fault (``--field``; ``--resume / --overwrite`` for two that
            exclude each other), or None when no option is at fault (a bad environment).
    """

    def __init__(self, message: str, *, option: str | None = None) -> None:
        super().__init__(message)
        self.option = option


class NotFoundError(GrpoError, LookupError):
    """A named thing (verifier route, checkpoint, model path) does not exist."""


class FailedPreconditionError(GrpoError):
    """The system is not in a state that allows the operation (e.g. sandbox missing)."""


class EndpointCheckError(FailedPreconditionError):
    """An address checked before any work did not answer its ``Describe`` within the check's
    bound, or answered as a service that cannot do the work (another kind, another task type).
    Nothing was done: every command line prints the one-line message (it names the address
    and what was tried) and exits 2, as for a bad invocation (``grpo.cli_console.fail``).

    Attributes:
        address: the address checked ('' when the message names several).
    """

    def __init__(self, message: str, *, address: str = "") -> None:
        super().__init__(message)
        self.address = address


class ResourceExhaustedError(GrpoError):
    """A limit was hit (batch too large, queue full, memory cap)."""


class DeadlineExceededError(GrpoError):
    """The caller's deadline or a configured time limit passed."""


class UnavailableError(GrpoError):
    """A dependency (Redis, a verifier) cannot be reached right now; retrying may succeed."""


class InternalError(GrpoError):
    """A bug or an unexpected failure inside the service."""
