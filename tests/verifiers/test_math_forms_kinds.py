"""Issue 27's second kind table (``data/forms_kinds.py``): every row's exact verdict.

New cases of the issue's ten kinds and of four it left out (unit conversions, number words in
prose, a function written for an expression gold, commas inside a gold's brackets), scored by
the check a worker runs. ``KNOWN_WRONG`` is a ratchet: the rows ours still gets wrong, each
with its reason, none of them a false positive; a listed row that becomes right fails the
test until it is removed from the list. ``python -m bench verifiers_kinds`` prints the same
table per kind beside math-verify.
"""

from __future__ import annotations

import pytest
from data.forms_kinds import KINDS, KNOWN_WRONG, ROWS, Row

from grpo.v1 import common_pb2
from grpo.verifiers.math.check import check_answer

OK = common_pb2.SCORE_STATUS_OK
INTERNAL = common_pb2.SCORE_STATUS_INTERNAL


def test_every_kind_has_twelve_rows_right_and_wrong() -> None:
    assert set(KINDS) == {r.kind for r in ROWS}
    for kind in KINDS:
        rows = [r for r in ROWS if r.kind == kind]
        assert len(rows) >= 12, kind
        assert any(r.expected == 1 for r in rows) and any(r.expected == 0 for r in rows), kind
    keys = [(r.gold, r.response) for r in ROWS]
    assert len(set(keys)) == len(keys), "a row is written twice"


def test_known_wrong_rows_are_in_the_table_and_no_false_positive() -> None:
    expected = {(r.gold, r.response): r.expected for r in ROWS}
    assert set(KNOWN_WRONG) <= set(expected)
    assert all(expected[key] == 1 for key in KNOWN_WRONG), "a false positive is never accepted"
    assert len(KNOWN_WRONG) <= 0.03 * len(ROWS)  # the 97%


@pytest.mark.parametrize("row", ROWS, ids=[f"{i}-{r.kind}" for i, r in enumerate(ROWS)])
def test_row(row: Row) -> None:
    status, reward, extracted, detail = check_answer(row.gold, row.response)
    assert status != INTERNAL, detail
    if (row.gold, row.response) in KNOWN_WRONG:
        assert reward != row.expected, f"now right: remove it from KNOWN_WRONG ({detail})"
        return
    assert reward == row.expected, (extracted, detail)
    if row.expected == 1:
        assert status == OK


_ONES_WORDS = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen"
    " fifteen sixteen seventeen eighteen nineteen"
)
_ONES = _ONES_WORDS.split(" ")
_TENS = ["twenty", "thirty", "forty", "fifty", "sixty", "seventy", "eighty", "ninety"]


def _english(n: int, hyphen: bool, and_: bool) -> str:
    """``n`` (0 <= n < 10**6) in English words, written independently of the reader."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        tens, ones = divmod(n, 10)
        return _TENS[tens - 2] + (("-" if hyphen else " ") + _ONES[ones] if ones else "")
    if n < 1000:
        hundreds, rest = divmod(n, 100)
        head = f"{_ONES[hundreds]} hundred"
        return head + ((" and " if and_ else " ") + _english(rest, hyphen, and_) if rest else "")
    thousands, rest = divmod(n, 1000)
    head = f"{_english(thousands, hyphen, and_)} thousand"
    return head + (" " + _english(rest, hyphen, and_) if rest else "")


def test_number_words_read_every_number_below_a_million() -> None:
    from grpo.verifiers.math.normalize import number_from_words

    for n in [*range(0, 1200), *range(1200, 10**6, 997)]:
        for hyphen, and_ in ((True, False), (False, True)):
            words = _english(n, hyphen, and_)
            assert number_from_words(words) == n, words
            assert number_from_words(f"negative {words}") == -n, words
    for bad in ("five six", "twenty twenty", "hundred", "thousand million", "ten five", "and"):
        assert number_from_words(bad) is None, bad
