"""Math outcome verifier: answer extraction, normalization, sympy equivalence in a worker pool.

Public API: :class:`MathVerifier`, :class:`MathConfig`, :func:`extract_answer`,
:func:`normalize_answer`. The service (``grpo serve verifier-math``) is in ``service``.
"""

from grpo.verifiers.math.extract import Extraction, extract_answer
from grpo.verifiers.math.normalize import normalize_answer
from grpo.verifiers.math.verifier import MathConfig, MathVerifier

__all__ = ["Extraction", "MathConfig", "MathVerifier", "extract_answer", "normalize_answer"]
