"""Math outcome verifier: answer extraction, normalization, sympy equivalence in a worker pool.

Public API: :class:`MathVerifier`, :class:`MathConfig`, :func:`extract_answer`,
:func:`normalize_answer`. The service (``grpo serve verifier-math``) is in ``service``.
``extract_answer`` and ``normalize_answer`` load neither sympy nor grpc; the verifier (which
imports the sympy checks to hand them to its worker pool) is imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from grpo.verifiers.math.extract import Extraction, extract_answer
from grpo.verifiers.math.normalize import normalize_answer

if TYPE_CHECKING:
    from grpo.verifiers.math.verifier import MathConfig, MathVerifier

__all__ = ["Extraction", "MathConfig", "MathVerifier", "extract_answer", "normalize_answer"]


def __getattr__(name: str) -> Any:
    """Import ``MathVerifier``/``MathConfig`` (and so sympy) on first use (PEP 562)."""
    if name in ("MathConfig", "MathVerifier"):
        return getattr(importlib.import_module("grpo.verifiers.math.verifier"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
