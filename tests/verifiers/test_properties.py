"""Property tests of the pure text functions: spans, extraction and normalization never break."""

from __future__ import annotations

from hypothesis import example, given, settings
from hypothesis import strategies as st

from grpo.verifiers.math import extract_answer, normalize_answer
from grpo.verifiers.math.extract import UnclosedBoxError
from grpo.verifiers.steps import find_claims, segment_steps

_MATHY = st.text(
    alphabet=st.sampled_from(
        [*list("0123456789+-*/=:,. \n$%<>()xyabStep{}\\boxed"), "½", "√", "\u200b"]
    ),
    max_size=200,
)
_ANY = st.one_of(_MATHY, st.text(max_size=200))


@settings(max_examples=300, deadline=None)
@given(_ANY)
def test_steps_are_ordered_disjoint_trimmed_slices(text: str) -> None:
    steps = segment_steps(text)
    previous_end = 0
    for step in steps:
        assert previous_end <= step.start < step.end <= len(text)
        assert step.text == text[step.start : step.end]
        assert step.text == step.text.strip()
        previous_end = step.end
    for step in steps:
        find_claims(step.text)  # never raises


@settings(max_examples=300, deadline=None)
@given(_ANY)
@example("$ 0$")  # whitespace inside the delimiters: the offset must point at the stripped text
@example("\\boxed{ 12 }")
def test_extraction_returns_a_substring_or_reports_an_unclosed_box(text: str) -> None:
    try:
        found = extract_answer(text)
    except UnclosedBoxError:
        assert "\\boxed" in text or "\\fbox" in text
        return
    if found is not None:
        assert found.text and found.parts and found.start == found.parts[0][0]
        for start, part in found.parts:
            assert part and text[start : start + len(part)] == part
            normalize_answer(part)  # never raises


@given(st.integers(min_value=1000, max_value=10**12))
def test_thousands_separators_are_removed(n: int) -> None:
    assert normalize_answer(f"{n:,}") == str(n)
