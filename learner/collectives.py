"""All-reduce that is a no-op outside ``torch.distributed``.

The learner's global quantities (group statistics of a group split over ranks, the loss
denominators of a batch split over ranks) are sums, minima and maxima over every rank. This
module is the one place that decides whether a collective runs: it runs when
``torch.distributed`` is available and initialised (or a process group is passed) and the
caller did not opt out.
"""

from __future__ import annotations

from typing import Any, Literal

import torch
import torch.distributed as dist

__all__ = ["ReduceOp", "all_reduce", "is_distributed"]

ReduceOp = Literal["sum", "min", "max"]

_OPS = {"sum": "SUM", "min": "MIN", "max": "MAX"}


def is_distributed(process_group: Any = None) -> bool:
    """True when a collective over ``process_group`` (default: the world) would run."""
    return dist.is_available() and (process_group is not None or dist.is_initialized())


def all_reduce(
    tensor: torch.Tensor,
    op: ReduceOp = "sum",
    *,
    process_group: Any = None,
    distributed: bool | None = None,
) -> torch.Tensor:
    """Reduce ``tensor`` over all ranks of ``process_group`` in place and return it.

    Args:
        tensor: Any shape; gloo and NCCL both accept float64 for sum/min/max.
        op: ``"sum"``, ``"min"`` or ``"max"``.
        process_group: A ``torch.distributed`` group; ``None`` is the default world group.
        distributed: ``None`` reduces when :func:`is_distributed` is true; ``False`` never
            reduces (local statistics); ``True`` requires an initialised process group.

    Returns:
        ``tensor`` itself (reduced when a collective ran), without gradient tracking.

    Raises:
        RuntimeError: ``distributed=True`` but ``torch.distributed`` is not initialised.
    """
    run = is_distributed(process_group) if distributed is None else distributed
    if not run:
        return tensor
    if not is_distributed(process_group):
        raise RuntimeError(
            "distributed=True but torch.distributed is not initialised; call "
            "torch.distributed.init_process_group first or pass distributed=None"
        )
    dist.all_reduce(tensor, op=getattr(dist.ReduceOp, _OPS[op]), group=process_group)
    return tensor
