"""Math outcome verifier: extraction, the answer model, exact and sympy comparison in a pool.

Public API: :func:`extract_answer`, :func:`normalize_answer`, :func:`read_answer` (the answer
model), :func:`answers_equal`, :class:`MathVerifier`, :class:`MathConfig`. The service
(``grpo serve verifier-math``) is in ``service``.

Importing this package loads neither grpc nor sympy: :class:`MathVerifier` and
:class:`MathConfig` (which need the SDK) are loaded on first use, and sympy only by the
comparison of leaves that are not exact arithmetic (``symbolic``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from grpo.verifiers.math.answer import read_answer
from grpo.verifiers.math.compare import answers_equal
from grpo.verifiers.math.extract import Extraction, extract_answer
from grpo.verifiers.math.normalize import normalize_answer

if TYPE_CHECKING:
    from grpo.verifiers.math.verifier import MathConfig, MathVerifier

__all__ = [
    "Extraction",
    "MathConfig",
    "MathVerifier",
    "answers_equal",
    "extract_answer",
    "normalize_answer",
    "read_answer",
]


def __getattr__(name: str) -> Any:
    if name in ("MathConfig", "MathVerifier"):
        from grpo.verifiers.math import verifier

        return getattr(verifier, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
