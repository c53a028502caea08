"""Evaluation metrics over n scored samples per problem: pass@k, maj@k, mean reward, statuses.

Definitions (docs/evaluation.md):

- A sample is **correct** when its status is a verdict (``grpo.services.runtime.score_status``) and
  its reward is at least the correct threshold (1.0 by default: an exact answer, every test
  passed). A sample whose status is not a verdict (undecided, internal, no score) is
  **missing**: it is left out of every rate, never counted as wrong.
- **pass@k** (Chen et al. 2021, "Evaluating Large Language Models Trained on Code", eq. 1): the
  unbiased estimate, from n >= k samples of which c are correct, of the chance that at least
  one of k samples is correct: ``1 - C(n - c, k) / C(n, k)``, computed as the product
  ``1 - prod_{i = n - c + 1}^{n} (1 - k / i)`` (no large binomials), averaged over problems.
  n and c count the problem's verdict samples; a problem with fewer than k of them is left out
  of pass@k (counted in ``EvalMetrics.problems_per_k``). pass@1 is the mean of c / n.
- **maj@k** (majority voting, "self-consistency", Wang et al. 2022): the answer given most often
  (``extracted``, the verifier's normalised final answer; empty answers do not vote; ties go to
  the answer seen first) among a problem's first k verdict samples is the problem's answer;
  the problem counts as solved when the samples with that answer are correct.
- **mean reward**: mean over verdict samples.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from grpo.errors import InvalidArgumentError

__all__ = [
    "EvalMetrics",
    "ProblemSamples",
    "Sample",
    "breakdown",
    "compute_metrics",
    "majority_correct",
    "pass_at_k",
]


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k of one problem from n samples with c correct (Chen et al. 2021, eq. 1).

    Args:
        n: samples drawn (>= k).
        c: correct samples, 0 <= c <= n.
        k: samples allowed, 1 <= k <= n.

    Returns:
        ``1 - C(n - c, k) / C(n, k)`` in [0, 1]; 1.0 when ``n - c < k``.

    Raises:
        InvalidArgumentError: ``k < 1``, ``k > n`` or ``c`` outside ``[0, n]``.
    """
    if k < 1 or k > n or not 0 <= c <= n:
        raise InvalidArgumentError(f"pass@k needs 1 <= k <= n and 0 <= c <= n; got {n=} {c=} {k=}")
    if n - c < k:
        return 1.0
    miss = 1.0
    for i in range(n - c + 1, n + 1):
        miss *= 1.0 - k / i
    return 1.0 - miss


def majority_correct(answers: Sequence[str], correct: Sequence[bool]) -> bool:
    """Majority vote of one problem: is the most frequent non-empty answer a correct one?

    Args:
        answers: each sample's extracted answer ("" = none; it does not vote).
        correct: each sample's correctness (same length).

    Returns:
        The correctness of the first sample that gave the winning answer (ties: the answer
        seen first wins); False when no sample has an answer.

    Raises:
        InvalidArgumentError: the lengths differ.
    """
    if len(answers) != len(correct):
        raise InvalidArgumentError(f"{len(answers)} answers but {len(correct)} flags")
    votes = Counter(a for a in answers if a)
    if not votes:
        return False
    best = max(votes.values())
    winner = next(a for a in answers if a and votes[a] == best)
    return correct[answers.index(winner)]


@dataclass(frozen=True)
class Sample:
    """One scored sample: its index, status name, reward (None unless a verdict), correctness
    (None when missing) and extracted answer."""

    index: int
    status: str
    reward: float | None
    correct: bool | None
    answer: str = ""


@dataclass(frozen=True)
class ProblemSamples:
    """A problem's id, its slicing fields (field name -> value) and its samples."""

    problem: str
    samples: tuple[Sample, ...]
    fields: Mapping[str, str] = field(default_factory=dict)

    def verdicts(self) -> list[Sample]:
        """Samples with a verdict, in sample order."""
        return sorted((s for s in self.samples if s.correct is not None), key=lambda s: s.index)


@dataclass
class EvalMetrics:
    """The metrics of a set of problems (module docstring).

    Attributes:
        problems: problems in the set.
        samples: samples (verdicts and missing).
        verdict_samples, correct_samples, missing_samples: sample counts.
        pass_at: k -> mean pass@k over the problems with >= k verdict samples.
        problems_per_k: k -> how many problems that was.
        maj_k: the k of ``maj_at_k``.
        maj_at_k: majority-vote accuracy over the problems with >= maj_k verdicts (None if none).
        reward_mean: mean reward over verdict samples (None if none).
        statuses: status name -> samples.
    """

    problems: int = 0
    samples: int = 0
    verdict_samples: int = 0
    correct_samples: int = 0
    missing_samples: int = 0
    pass_at: dict[int, float | None] = field(default_factory=dict)
    problems_per_k: dict[int, int] = field(default_factory=dict)
    maj_k: int = 1
    maj_at_k: float | None = None
    reward_mean: float | None = None
    statuses: Counter[str] = field(default_factory=Counter)

    def to_json(self) -> dict[str, object]:
        """A JSON-ready dict (``pass@k`` keys)."""
        return {
            "problems": self.problems,
            "samples": self.samples,
            "verdict_samples": self.verdict_samples,
            "correct_samples": self.correct_samples,
            "missing_samples": self.missing_samples,
            **{f"pass@{k}": v for k, v in self.pass_at.items()},
            "problems_per_k": {str(k): v for k, v in self.problems_per_k.items()},
            f"maj@{self.maj_k}": self.maj_at_k,
            "reward_mean": self.reward_mean,
            "statuses": dict(sorted(self.statuses.items())),
        }


def compute_metrics(
    problems: Iterable[ProblemSamples], *, ks: Sequence[int], maj_k: int
) -> EvalMetrics:
    """pass@k for each k of ``ks``, maj@``maj_k``, mean reward and status counts.

    Raises:
        InvalidArgumentError: a k below 1.
    """
    if any(k < 1 for k in ks) or maj_k < 1:
        raise InvalidArgumentError(f"every k must be >= 1, got {list(ks)} and maj_k={maj_k}")
    out = EvalMetrics(maj_k=maj_k)
    per_k: dict[int, list[float]] = {k: [] for k in ks}
    majority: list[bool] = []
    rewards: list[float] = []
    for problem in problems:
        out.problems += 1
        out.samples += len(problem.samples)
        out.statuses.update(s.status for s in problem.samples)
        verdicts = problem.verdicts()
        n, c = len(verdicts), sum(bool(s.correct) for s in verdicts)
        out.verdict_samples += n
        out.correct_samples += c
        out.missing_samples += len(problem.samples) - n
        rewards.extend(s.reward for s in verdicts if s.reward is not None)
        for k in ks:
            if n >= k:
                per_k[k].append(pass_at_k(n, c, k))
        if n >= maj_k:
            first = verdicts[:maj_k]
            majority.append(
                majority_correct([s.answer for s in first], [bool(s.correct) for s in first])
            )
    for k in ks:
        out.pass_at[k] = statistics.fmean(per_k[k]) if per_k[k] else None
        out.problems_per_k[k] = len(per_k[k])
    out.maj_at_k = statistics.fmean(majority) if majority else None
    out.reward_mean = statistics.fmean(rewards) if rewards else None
    return out


def breakdown(
    problems: Sequence[ProblemSamples], field_name: str, *, ks: Sequence[int], maj_k: int
) -> dict[str, EvalMetrics]:
    """:func:`compute_metrics` per value of ``field_name`` (problems without it: ``""``),
    sorted by value."""
    groups: dict[str, list[ProblemSamples]] = {}
    for problem in problems:
        groups.setdefault(problem.fields.get(field_name, ""), []).append(problem)
    return {value: compute_metrics(groups[value], ks=ks, maj_k=maj_k) for value in sorted(groups)}
