"""Required-field checks for protobuf requests, used by servicers before calling domain code.

proto3 has no ``required``; the grpo.v1 contracts document which fields a request must set.
``require(request, "task.prompt", "response")`` raises ``ContractError`` (gRPC
INVALID_ARGUMENT via the server interceptor) naming the first missing field by its dotted path.
"""

from __future__ import annotations

from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from grpo.errors import ContractError

__all__ = ["require"]


def _is_set(message: Message, field: Any) -> bool:
    if field.is_repeated:
        return len(getattr(message, field.name)) > 0
    if field.type == FieldDescriptor.TYPE_MESSAGE or field.has_presence:
        return message.HasField(field.name)
    # Implicit-presence scalars: the default value (0, "", false, enum 0) means "not set".
    return bool(getattr(message, field.name))


def require(message: Message, *paths: str) -> None:
    """Check that every dotted field path in ``paths`` is set in ``message``.

    A path like ``"task.prompt"`` descends through singular message fields. A field counts as
    set when: a message field is present; a repeated/map field is non-empty; a scalar differs
    from its proto3 default (so ``""``, ``0`` and the ``*_UNSPECIFIED`` enum value are missing).

    Raises:
        ContractError: a field is missing; the message names the first missing part of the
            path: ``"missing required field 'task.prompt' in grpo.v1.ScoreRequest"`` (or
            ``'task'`` when the whole task is absent).
        ValueError: a path names a field the message type does not have (a caller bug).
    """
    for path in paths:
        current = message
        parts = path.split(".")
        for depth, name in enumerate(parts):
            field = current.DESCRIPTOR.fields_by_name.get(name)
            if field is None:
                raise ValueError(
                    f"{current.DESCRIPTOR.full_name} has no field {name!r} (path {path!r})"
                )
            if not _is_set(current, field):
                missing = ".".join(parts[: depth + 1])
                raise ContractError(
                    f"missing required field {missing!r} in {message.DESCRIPTOR.full_name}"
                )
            if depth < len(parts) - 1:
                current = getattr(current, name)
