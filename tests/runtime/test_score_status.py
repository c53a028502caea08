"""Why a reward is missing (``score_status.missing_reason``): one reason per score."""

from __future__ import annotations

from grpo.services.runtime.score_status import MISSING_REASONS, missing_reason
from grpo.v1 import common_pb2


def _score(status: int, detail: str = "", verifier: str = "verifier-math") -> common_pb2.Score:
    return common_pb2.Score(status=status, detail=detail, verifier=verifier)  # type: ignore[arg-type]


def test_each_missing_score_has_its_reason() -> None:
    internal = common_pb2.SCORE_STATUS_INTERNAL
    cases = {
        "undecided": _score(common_pb2.SCORE_STATUS_UNDECIDED, "last_number: timed out"),
        "gold_unparsable": _score(internal, "gold answer: unbalanced brackets"),
        "verifier_error": _score(internal, "worker pool closed"),
        "no_verdict": _score(internal, "verifier 127.0.0.1:1: UNAVAILABLE", verifier=""),
        "unspecified": _score(common_pb2.SCORE_STATUS_UNSPECIFIED),
    }
    assert {reason: missing_reason(s) for reason, s in cases.items()} == {r: r for r in cases}
    # The math verifier names the gold side of a failed comparison this way too.
    assert missing_reason(_score(internal, "last_number: gold: unexpected end")) == (
        "gold_unparsable"
    )
    assert missing_reason(None) == "no_verdict"
    assert set(cases) == set(MISSING_REASONS)
