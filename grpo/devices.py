"""The one device rule and the one dtype table, shared by generation and the learner.

- :func:`resolve_device`: ``"auto"`` is the current CUDA device, with its index (``cuda:0`` in a
  one-GPU process, the rank's GPU after ``torch.cuda.set_device``), when CUDA is available,
  else the CPU; any other name (``"cpu"``, ``"cuda:1"``) goes to ``torch.device`` as given.
- :data:`DTYPES` / :func:`resolve_dtype`: dtype names accepted in settings -> torch dtypes;
  ``"auto"`` is bfloat16 on a CUDA device and float32 elsewhere (CPU kernels are fastest and
  exact enough in float32; bf16 halves GPU memory).
"""

from __future__ import annotations

import torch

from grpo.errors import InvalidArgumentError

__all__ = ["DTYPES", "resolve_device", "resolve_dtype"]

DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "bfloat16": torch.bfloat16,
    "float16": torch.float16,
    "float64": torch.float64,
}
"""Parameter dtype names accepted by the settings -> torch dtypes."""


def resolve_device(name: str) -> torch.device:
    """The torch device for a settings value.

    Args:
        name: ``"auto"`` (the current CUDA device when available, else CPU) or any
            ``torch.device`` string.

    Raises:
        RuntimeError: from ``torch.device`` for a malformed name.
    """
    if name == "auto":
        if torch.cuda.is_available():
            return torch.device("cuda", torch.cuda.current_device())
        return torch.device("cpu")
    return torch.device(name)


def resolve_dtype(name: str, device: torch.device) -> torch.dtype:
    """The torch dtype for a settings value on ``device``.

    Args:
        name: a key of :data:`DTYPES`, or ``"auto"`` (bfloat16 on CUDA, else float32).
        device: where the model runs (only used for ``"auto"``).

    Raises:
        InvalidArgumentError: an unknown name (the message lists the valid ones).
    """
    if name == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        return DTYPES[name]
    except KeyError:
        valid = ", ".join(["auto", *DTYPES])
        raise InvalidArgumentError(f"unknown dtype {name!r}; valid: {valid}") from None
