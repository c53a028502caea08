"""pass@k (Chen et al. 2021) on hand-computed cases, maj@k, and metrics with missing samples."""

from __future__ import annotations

import math

import pytest

from grpo.errors import InvalidArgumentError
from grpo.services.evaluation.metrics import (
    ProblemSamples,
    Sample,
    breakdown,
    compute_metrics,
    majority_correct,
    pass_at_k,
)


def test_pass_at_k_hand_computed() -> None:
    # n = 10 samples, c = 3 correct
    assert pass_at_k(10, 3, 1) == pytest.approx(3 / 10)
    # 1 - C(7, 5) / C(10, 5) = 1 - 21 / 252 = 11 / 12
    assert pass_at_k(10, 3, 5) == pytest.approx(11 / 12)
    assert pass_at_k(10, 0, 5) == 0.0
    assert pass_at_k(10, 6, 5) == 1.0  # n - c = 4 < k: every 5-subset holds a correct one
    assert pass_at_k(5, 1, 5) == 1.0


def test_pass_at_k_equals_the_binomial_form() -> None:
    for n in range(1, 12):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - math.comb(n - c, k) / math.comb(n, k)
                assert pass_at_k(n, c, k) == pytest.approx(exact, abs=1e-12), (n, c, k)
    with pytest.raises(InvalidArgumentError, match="k <= n"):
        pass_at_k(3, 1, 4)
    with pytest.raises(InvalidArgumentError):
        pass_at_k(3, 4, 1)


def test_majority_vote() -> None:
    assert majority_correct(["5", "5", "6"], [True, True, False])
    assert not majority_correct(["6", "5", "6"], [False, True, False])
    assert majority_correct(["5", "6"], [True, False])  # tie: the answer seen first
    assert not majority_correct(["", "", "7"], [False, False, False])  # "" does not vote
    assert not majority_correct(["", ""], [False, False])
    with pytest.raises(InvalidArgumentError):
        majority_correct(["a"], [])


def _problem(pid: str, level: str, *flags: bool | None) -> ProblemSamples:
    samples = tuple(
        Sample(
            index=i,
            status="ok" if f is not None else "undecided",
            reward=float(f) if f is not None else None,
            correct=f,
            answer="right" if f else f"wrong{i}",
        )
        for i, f in enumerate(flags)
    )
    return ProblemSamples(pid, samples, {"level": level})


def test_metrics_leave_missing_samples_out() -> None:
    problems = [
        _problem("a", "1", True, False, True, None),  # n = 3 verdicts, c = 2
        _problem("b", "2", False, False, False, False),
        _problem("c", "2", None, None, True, None),  # 1 verdict: not in pass@2
    ]
    m = compute_metrics(problems, ks=(1, 2), maj_k=2)
    assert (m.problems, m.samples, m.verdict_samples, m.missing_samples) == (3, 12, 8, 4)
    assert m.pass_at[1] == pytest.approx((2 / 3 + 0 + 1) / 3)
    assert m.pass_at[2] == pytest.approx((pass_at_k(3, 2, 2) + 0) / 2)
    assert m.problems_per_k == {1: 3, 2: 2}
    # maj@2 over the first 2 verdicts: a -> tie "right"/"wrong1", "right" first -> correct
    assert m.maj_at_k == pytest.approx(1 / 2)
    assert m.reward_mean == pytest.approx(3 / 8)
    assert m.statuses == {"ok": 8, "undecided": 4}
    levels = breakdown(problems, "level", ks=(1,), maj_k=1)
    assert list(levels) == ["1", "2"] and levels["2"].problems == 2
    assert levels["1"].pass_at[1] == pytest.approx(2 / 3)
