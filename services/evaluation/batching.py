"""Splitting scoring requests by item count and by size.

A ``ScoreBatch`` request must stay under the item limit of the verifier
(``serving.max_batch_items``) and under the gRPC message limit (4 MiB by default in most gRPC
servers; ``server.max_message_bytes`` here). Splitting by count alone sends a 16 MiB request as
soon as a few items are large. :func:`plan_batches` groups consecutive items greedily under both
limits; an item larger than the byte limit on its own goes alone in its batch (the caller then
sends it alone, and a verifier that still refuses it gets the item a ``too_large`` status).
"""

from __future__ import annotations

from collections.abc import Sequence

from grpo.errors import InvalidArgumentError

__all__ = ["plan_batches"]


def plan_batches(sizes: Sequence[int], *, max_items: int, max_bytes: int) -> list[list[int]]:
    """Group item indices into batches of at most ``max_items`` items and ``max_bytes`` bytes.

    Items keep their order; a batch is closed when the next item would exceed either limit.
    An item of more than ``max_bytes`` bytes is a batch of its own.

    Args:
        sizes: serialized size of each item in bytes (length N).
        max_items: most items per batch (>= 1).
        max_bytes: most bytes per batch (>= 1), summed over its items.

    Returns:
        Lists of indices into ``sizes``; their concatenation is ``range(N)``.

    Raises:
        InvalidArgumentError: ``max_items`` or ``max_bytes`` below 1, or a negative size.
    """
    if max_items < 1 or max_bytes < 1:
        raise InvalidArgumentError(
            f"batch limits must be >= 1, got max_items={max_items}, max_bytes={max_bytes}"
        )
    batches: list[list[int]] = []
    current: list[int] = []
    current_bytes = 0
    for i, size in enumerate(sizes):
        if size < 0:
            raise InvalidArgumentError(f"sizes[{i}] is negative ({size})")
        if current and (len(current) >= max_items or current_bytes + size > max_bytes):
            batches.append(current)
            current, current_bytes = [], 0
        current.append(i)
        current_bytes += size
    if current:
        batches.append(current)
    return batches
