"""Which verifier statuses carry a reward: the one rule the assembler and the learner share.

Every status but ``INTERNAL`` (and ``UNSPECIFIED``) is a verdict on the *response*: ``OK``,
and ``NO_ANSWER``, ``PARSE_ERROR``, ``TIMEOUT``, ``RUNTIME_ERROR``, which say what the response
did (no answer, an unparsable answer, a check or program that ran past its limit, a program
that crashed) and carry reward 0. Treating those as missing would let a policy dodge a 0 by
looping forever or answering garbage (a masked member gets advantage 0, above a wrong one).
Only ``INTERNAL``/``UNSPECIFIED`` (the verifier broke) and no score at all (unreachable after
retries, group deadline) make a reward missing: masked out of group statistics, never 0.
See ``proto/grpo/v1/common.proto`` (``ScoreStatus``).
"""

from __future__ import annotations

from grpo.v1 import common_pb2

__all__ = ["VERDICT_STATUSES", "is_verdict"]

VERDICT_STATUSES = frozenset(
    {
        common_pb2.SCORE_STATUS_OK,
        common_pb2.SCORE_STATUS_NO_ANSWER,
        common_pb2.SCORE_STATUS_PARSE_ERROR,
        common_pb2.SCORE_STATUS_TIMEOUT,
        common_pb2.SCORE_STATUS_RUNTIME_ERROR,
    }
)
"""Statuses whose reward is a verdict on the response (everything but INTERNAL/UNSPECIFIED)."""


def is_verdict(score: common_pb2.Score | None) -> bool:
    """True when ``score`` carries a usable reward (a status in ``VERDICT_STATUSES``)."""
    return score is not None and score.status in VERDICT_STATUSES
