"""Math step (process) verifier: segmentation, claim extraction, sympy checks per step.

Public API: :class:`StepsVerifier`, :class:`StepsConfig`, :func:`segment_steps`,
:func:`find_claims`, :func:`check_claim`. The service (``grpo serve verifier-steps``) is in
``service``.
"""

from grpo.verifiers.steps.claims import check_claim, find_claims
from grpo.verifiers.steps.segment import Step, segment_steps
from grpo.verifiers.steps.verifier import StepsConfig, StepsVerifier

__all__ = [
    "Step",
    "StepsConfig",
    "StepsVerifier",
    "check_claim",
    "find_claims",
    "segment_steps",
]
