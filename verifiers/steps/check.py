"""The step check as one function that runs inside a worker process.

:func:`check_steps` segments the response, finds the claims of each step and checks them,
so everything that may be slow on hostile input is bounded by the pool's hard time limit. It
returns plain data that crosses the process pipe.
"""

from __future__ import annotations

from grpo.v1 import common_pb2
from grpo.verifiers.steps.claims import check_claim, find_claims
from grpo.verifiers.steps.segment import segment_steps

__all__ = ["StepVerdict", "check_steps"]

StepVerdict = tuple[int, int, int, str]
"""(char_start, char_end, ``STEP_STATUS_*`` value, detail)."""


def check_steps(response: str, max_claims: int) -> list[StepVerdict]:
    """Segment ``response`` and judge every step.

    A step is INVALID when any of its claims is refuted, VALID when at least one claim holds
    and none is refuted, UNVERIFIABLE when it has no claim that could be checked.

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
    for step in segment_steps(response):
        held: list[str] = []
        refuted: str | None = None
        for lhs, rhs in find_claims(step.text):
            if budget <= 0:
                break
            budget -= 1
            result = check_claim(lhs, rhs)
            if result is False:
                refuted = f"{lhs} = {rhs}"
                break
            if result is True:
                held.append(f"{lhs} = {rhs}")
        if refuted is not None:
            status, detail = common_pb2.STEP_STATUS_INVALID, f"false: {refuted}"
        elif held:
            status, detail = common_pb2.STEP_STATUS_VALID, "holds: " + "; ".join(held)
        else:
            status, detail = common_pb2.STEP_STATUS_UNVERIFIABLE, "no checkable claim"
        verdicts.append((step.start, step.end, status, detail[:300]))
    return verdicts
