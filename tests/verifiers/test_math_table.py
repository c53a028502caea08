"""The hand-written equivalence table (tests/verifiers/data/math_equivalence.py), every row.

Runs the check function directly (the same code a worker runs), so the ~580 rows take about
a second; ``test_math_verifier.py`` covers the worker pool, statuses and time limits. Expected
rewards are what is right; a reward 1 on an expected 0 is a false positive, which must never
happen.
"""

from __future__ import annotations

import pytest
from data.math_equivalence import ROWS, Row

from grpo.v1 import common_pb2
from grpo.verifiers.math.check import check_answer

OK = common_pb2.SCORE_STATUS_OK


def test_table_is_large_and_covers_every_category() -> None:
    categories = {row.category for row in ROWS}
    assert len(ROWS) >= 400
    assert len(categories) >= 19
    for category in categories:
        rows = [r for r in ROWS if r.category == category]
        assert any(r.expected == 1 for r in rows) and any(r.expected == 0 for r in rows), category


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r.category}" for i, r in enumerate(ROWS)])
def test_row(row: Row) -> None:
    status, reward, extracted, detail = check_answer(row.gold, row.response)
    assert reward == row.expected, (extracted, detail)
    if row.expected == 1:
        assert status == OK
    else:  # a wrong answer is a verdict, never missing
        assert status != common_pb2.SCORE_STATUS_INTERNAL, detail
