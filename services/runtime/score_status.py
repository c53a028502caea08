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
"""

from __future__ import annotations

from grpo.v1 import common_pb2

__all__ = ["VERDICT_STATUSES", "is_undecided", "is_verdict"]

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
