"""The step check as one function that runs inside a worker process.

:func:`check_steps` segments the response, finds the claims of each step and checks them,
so everything that may be slow on hostile input is bounded by the pool's hard time limit. It
returns plain data that crosses the process pipe.
"""

from __future__ import annotations

from grpo.v1 import common_pb2
from grpo.verifiers.steps.claims import check_claim, step_claims
from grpo.verifiers.steps.segment import segment_steps

__all__ = ["StepVerdict", "check_steps"]

StepVerdict = tuple[int, int, int, str]
"""(char_start, char_end, ``STEP_STATUS_*`` value, detail)."""


def check_steps(response: str, max_claims: int) -> list[StepVerdict]:
    """Segment ``response`` and judge every step.

    A step is INVALID when any of its claims is refuted, VALID when at least one claim holds
    and none is refuted, UNVERIFIABLE when it has no claim that could be checked. A step that
    starts with a relation (``&= 104``) takes the previous step's last side as its left side
    (``claims.step_claims``). A step whose text the reader cannot take apart (a recursion or
    memory limit) is unverifiable.

    Args:
        response: the solution text.
        max_claims: claims checked at most in the whole response; later ones are skipped
            (their steps count as unverifiable unless an earlier claim decided them).

    Returns:
        One ``(start, end, status, detail)`` per step, in order; ``detail`` names the first
        refuted claim or lists the checked ones.
    """
    verdicts: list[StepVerdict] = []
    budget = max_claims
    carry: str | None = None
    for step in segment_steps(response):
        held: list[str] = []
        refuted: str | None = None
        try:
            claims, carry = step_claims(step.text, carry)
        except (RecursionError, MemoryError, ValueError):  # text the reader cannot take apart
            claims, carry = [], None
        for claim in claims:
            if budget <= 0:
                break
            budget -= 1
            result = check_claim(claim.lhs, claim.rhs, claim.rel)
            if result is False:
                refuted = str(claim)
                break
            if result is True:
                held.append(str(claim))
        if refuted is not None:
            status, detail = common_pb2.STEP_STATUS_INVALID, f"false: {refuted}"
        elif held:
            status, detail = common_pb2.STEP_STATUS_VALID, "holds: " + "; ".join(held)
        else:
            status, detail = common_pb2.STEP_STATUS_UNVERIFIABLE, "no checkable claim"
        verdicts.append((step.start, step.end, status, detail[:300]))
    return verdicts
