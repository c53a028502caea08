"""Golds written in words (issue 35, held-out golds of docs/results/2026-12-05-faults.md).

A GSM8K-style gold in number words is its number; a gold that says there is no value
(``n/a``, ``see above``) is ``INTERNAL`` with a ``gold answer:`` detail, which the run counts
as ``gold_unparsable`` (``score_status.missing_reason``), never a 0 verdict for every response.
"""

from __future__ import annotations

import pytest

from grpo.services.runtime.score_status import missing_reason
from grpo.v1 import common_pb2
from grpo.verifiers.math.check import check_answer

OK = common_pb2.SCORE_STATUS_OK
INTERNAL = common_pb2.SCORE_STATUS_INTERNAL


@pytest.mark.parametrize(
    ("gold", "value"),
    [
        ("forty-two", 42),
        ("seventy two", 72),
        ("one hundred and five", 105),
        ("Forty-Two", 42),
        ("negative three", -3),
        (r"\text{twenty five}", 25),
    ],
)
@pytest.mark.parametrize("answer_format", ["gsm8k", "lenient"])
def test_gold_in_number_words_is_its_number(gold: str, value: int, answer_format: str) -> None:
    right = check_answer(gold, f"So the total is 10 + x.\n#### {value}", answer_format)
    wrong = check_answer(gold, f"So the total is 10 + x.\n#### {value + 1}", answer_format)
    assert right[:2] == (OK, 1.0), right
    assert wrong[:2] == (OK, 0.0), wrong


@pytest.mark.parametrize(
    "gold",
    ["n/a", "N/A", "n.a.", "see above", "See above.", r"\text{see solution}", "TBD", "?", "-"],
)
def test_placeholder_gold_is_internal_gold_unparsable(gold: str) -> None:
    for response in ("#### 42", "#### n/a", "The answer is see above."):
        status, reward, _, detail = check_answer(gold, response, "gsm8k")
        assert status == INTERNAL, (gold, response, status, detail)
        assert reward == 0.0
        score = common_pb2.Score(status=status, detail=detail, verifier="math")
        assert missing_reason(score) == "gold_unparsable", detail


@pytest.mark.parametrize(
    ("gold", "response", "reward"),
    [
        ("none", r"\boxed{\text{none}}", 1.0),  # a word answer stays a word answer
        ("undefined", r"\boxed{\text{undefined}}", 1.0),
        ("na", r"\boxed{na}", 1.0),  # the product n a, not "n/a"
        ("n/a^2", r"\boxed{\frac{n}{a^2}}", 1.0),
        ("-3", r"\boxed{-3}", 1.0),
    ],
)
def test_values_near_placeholders_stay_values(gold: str, response: str, reward: float) -> None:
    status, got, _, detail = check_answer(gold, response)
    assert (status, got) == (OK, reward), detail
