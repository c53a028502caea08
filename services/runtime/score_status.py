"""Which verifier statuses carry a reward: the one rule the assembler, the learner and
``grpo score`` share.

A status is either a **verdict** on the response (its reward counts, 0 for every failure) or
**missing** (masked out of group statistics, never read as 0):

- verdicts: ``OK`` (the reward is the verdict), ``NO_ANSWER`` (no final answer / no checkable
  step), ``PARSE_ERROR`` (an unparsable answer, a response over the size limit or not UTF-8),
  ``TIMEOUT`` and ``RUNTIME_ERROR`` (the candidate *program* looped or crashed: code verifier);
- missing: ``UNDECIDED`` (the verifier could not decide on a well-formed answer: its own time
  limit hit while comparing two parsed values, a crash of sympy, its worker's memory cap),
  ``INTERNAL`` (the verifier broke: a bad gold answer, a closed pool, a bug), ``UNSPECIFIED``,
  and no score at all (unreachable after retries, group deadline).

What is the response's fault and what the verifier's is decided per verifier
(docs/verifiers.md, "What is a verdict and what is undecided"): the math and steps verifiers
never answer TIMEOUT or RUNTIME_ERROR, their own limits give UNDECIDED; the code verifier's
TIMEOUT/RUNTIME_ERROR are the program's. Treating a response's failure as missing would let a
policy dodge a 0 by looping or answering garbage (a masked member gets advantage 0, above a
wrong one); so the math verifiers turn what a response controls (huge powers, deep nesting,
long answers) into verdicts before any comparison, and the assembler drops a group with more
than ``dynamic_sampling.max_undecided_frac`` UNDECIDED members (counted as
``rejected_too_many_undecided``). See ``proto/grpo/v1/common.proto`` (``ScoreStatus``).

Several rewards per task (``ScoredRollout.components``): the combined reward is
``sum(weight_i * reward_i)`` over the components, and it exists only when every component is a
verdict with a finite reward (:func:`combined_reward`); one missing component makes the
combined reward missing, never a silent 0 (docs/learner-math.md, "Several rewards").
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable

from grpo.v1 import common_pb2

__all__ = [
    "MISSING_REASONS",
    "VERDICT_STATUSES",
    "combined_reward",
    "is_undecided",
    "is_verdict",
    "member_missing_reason",
    "member_reward",
    "missing_reason",
]

VERDICT_STATUSES = frozenset(
    {
        common_pb2.SCORE_STATUS_OK,
        common_pb2.SCORE_STATUS_NO_ANSWER,
        common_pb2.SCORE_STATUS_PARSE_ERROR,
        common_pb2.SCORE_STATUS_TIMEOUT,
        common_pb2.SCORE_STATUS_RUNTIME_ERROR,
    }
)
"""Statuses whose reward is a verdict on the response (not UNDECIDED/INTERNAL/UNSPECIFIED)."""


def is_verdict(score: common_pb2.Score | None) -> bool:
    """True when ``score`` carries a usable reward (a status in ``VERDICT_STATUSES``)."""
    return score is not None and score.status in VERDICT_STATUSES


def is_undecided(score: common_pb2.Score | None) -> bool:
    """True when the verifier answered but could not decide (status ``UNDECIDED``)."""
    return score is not None and score.status == common_pb2.SCORE_STATUS_UNDECIDED


def combined_reward(components: Iterable[tuple[float, common_pb2.Score | None]]) -> float | None:
    """The combined reward ``sum(weight * score.reward)`` of weighted components.

    Args:
        components: ``(weight, score)`` pairs, the primary component first; a score of None is
            a component whose verifier gave no answer.

    Returns:
        The weighted sum, or None when there is no component or any component is not a
        verdict (``is_verdict``) or has a non-finite reward or weight: one missing component
        makes the whole reward missing, never 0.
    """
    total = 0.0
    seen = False
    for weight, score in components:
        if score is None or not is_verdict(score):
            return None
        value = float(weight) * float(score.reward)
        if not math.isfinite(value):
            return None
        total += value
        seen = True
    return total if seen else None


def member_reward(member: common_pb2.ScoredRollout) -> float | None:
    """The reward a scored rollout trains on, or None when it is missing.

    Records with ``reward`` set (several components, revision 2 of ``ScoredRollout``) give the
    combined reward; older records (no ``reward``) give ``outcome.reward`` when the outcome is
    a verdict. Never a reward for a member marked ``missing`` or a non-finite value.
    """
    if member.missing:
        return None
    if member.HasField("reward"):
        value = float(member.reward)
    elif member.HasField("outcome") and is_verdict(member.outcome):
        value = float(member.outcome.reward)
    else:
        return None
    return value if math.isfinite(value) else None


MISSING_REASONS = ("undecided", "gold_unparsable", "verifier_error", "no_verdict", "unspecified")
"""Why a reward is missing (``missing_reason``), as counted in summary.json's
``accounting.rewards.missing_by_reason``."""

_GOLD = re.compile(r"^gold answer:|(^|: )gold: ")


def missing_reason(score: common_pb2.Score | None) -> str:
    """Why ``score`` carries no reward, one of ``MISSING_REASONS``:

    - ``undecided``: the verifier could not decide (status UNDECIDED);
    - ``gold_unparsable``: INTERNAL because the task's gold answer cannot be read (the math
      verifiers' detail starts ``gold answer:`` or names the ``gold:`` side): a task error,
      named so it can be fixed;
    - ``no_verdict``: no verifier answered (unreachable after retries, unrouted: the
      assembler's placeholder score without a verifier name);
    - ``verifier_error``: any other INTERNAL (a closed pool, a bug);
    - ``unspecified``: no status at all.
    """
    if score is None:
        return "no_verdict"
    if score.status == common_pb2.SCORE_STATUS_UNDECIDED:
        return "undecided"
    if score.status == common_pb2.SCORE_STATUS_INTERNAL:
        if _GOLD.search(score.detail):
            return "gold_unparsable"
        return "verifier_error" if score.verifier else "no_verdict"
    return "unspecified"


def member_missing_reason(member: common_pb2.ScoredRollout) -> str:
    """``missing_reason`` of a member whose reward is missing: of its outcome when that is no
    verdict, else of its first component that is none (several rewards), else
    ``unspecified``."""
    if not is_verdict(member.outcome):
        return missing_reason(member.outcome)
    for component in member.components:
        if not is_verdict(component.score):
            return missing_reason(component.score)
    return "unspecified"
