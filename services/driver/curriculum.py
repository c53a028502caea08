"""Prompt selection by recent pass rate: feed the prompts whose groups are likely to be mixed.

A group teaches GRPO something only when its rewards differ: a group that is all wrong or all
right has advantage 0 for every member and its tokens are wasted generation. Which prompts give
mixed groups moves as the policy learns (hard ones at first all wrong, easy ones later all
right), so the feeder asks this curriculum, for each prompt in its seeded order, whether to
feed it now.

Rule (one *bucket* per difficulty label, ``Task.metadata[bucket_field]``, or per task id when
the task has no such label). For every closed group of a bucket (read from the assembler's
closed-groups stream, ``StreamNames.closed``) the curriculum keeps an exponentially decayed
count of mixed and of unmixed (all wrong or all right) groups, with half-life ``half_life``
groups of that bucket, and the bucket's mixed share

    m_b = (mixed_b + 1) / (mixed_b + unmixed_b + 2)      (Laplace prior: 1/2 before any group)

A prompt of bucket b is fed with probability

    a_b = max(min_accept, (m_b / max_c m_c) ** power)

(the best bucket is always fed; ``power`` > 1 sharpens the preference) and skipped otherwise;
a skipped prompt comes back in the next pass over the prompts. ``min_accept`` > 0 keeps every
difficulty in the feed, so a bucket whose estimate is stale (the policy improved on it) is
re-measured and the retained difficulty distribution cannot collapse onto one bucket. The
draw is a pure function of (seed, group id), so a decision never depends on thread timing.

The cost stays visible: a skipped prompt generates nothing (no token is spent on it), and the
assembler's counters (accepted, rejected, generated and kept tokens) count every group that
was generated, as without a curriculum. ``stats()`` reports per bucket what was fed, skipped
and observed, and how many observed groups were all wrong and all right: where the run's
wasted generation went (``summary.json`` ``curriculum``).

This is the online difficulty filtering of e.g. Kimi k1.5 (curriculum + prioritized sampling)
and DAPO's motivation for dynamic sampling (§3.2), done before generation instead of after.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass

from grpo.errors import InvalidArgumentError
from grpo.v1 import common_pb2

__all__ = ["BucketStats", "PassRateCurriculum", "group_is_mixed"]


def group_is_mixed(group: common_pb2.Group, correct_threshold: float) -> bool | None:
    """Whether a closed group's valid outcome rewards hold both a correct and a wrong one.

    Args:
        group: a closed group (members' ``outcome.reward``; ``missing`` members are ignored).
        correct_threshold: a valid reward >= this is correct (the assembler's
            ``dynamic_sampling.correct_threshold``).

    Returns:
        True (mixed), False (all correct or all wrong), or None when fewer than 2 members have
        a valid reward (the group says nothing about the bucket).
    """
    counts = _correct_of_valid(group, correct_threshold)
    return None if counts is None else 0 < counts[0] < counts[1]


def _correct_of_valid(group: common_pb2.Group, correct_threshold: float) -> tuple[int, int] | None:
    """(correct, valid) reward counts of a closed group; None with fewer than 2 valid."""
    rewards = [m.outcome.reward for m in group.members if not m.missing]
    if len(rewards) < 2:
        return None
    return sum(1 for r in rewards if r >= correct_threshold), len(rewards)


@dataclass
class BucketStats:
    """Counters of one bucket (decayed counts are group counts, possibly fractional).

    Attributes:
        mixed, unmixed: decayed counts of observed mixed and all-wrong/all-right groups.
        observed: groups observed (not decayed).
        all_wrong, all_right: of the observed groups, those whose valid rewards are all
            below / all at or above the correct threshold (not decayed). With binary rewards
            these are the bucket's zero-variance groups, whose generation taught nothing.
        fed, skipped: prompts of this bucket the feeder fed and skipped.
    """

    mixed: float = 0.0
    unmixed: float = 0.0
    observed: int = 0
    all_wrong: int = 0
    all_right: int = 0
    fed: int = 0
    skipped: int = 0

    @property
    def mixed_share(self) -> float:
        """Laplace-smoothed decayed mixed share m_b in (0, 1)."""
        return (self.mixed + 1.0) / (self.mixed + self.unmixed + 2.0)


class PassRateCurriculum:
    """Decides which prompts to feed from their bucket's recent mixed-group share (module
    docstring).

    Args:
        seed: seed of the accept/skip draws.
        min_accept: floor of the accept probability, in (0, 1].
        power: sharpness exponent (> 0) of the accept probability.
        half_life: groups of a bucket after which an observation weighs half (> 0).
        bucket_field: task metadata key of the bucket; tasks without it are their own bucket.

    Raises:
        InvalidArgumentError: a parameter out of its range.
    """

    def __init__(
        self,
        *,
        seed: int = 0,
        min_accept: float = 0.1,
        power: float = 2.0,
        half_life: float = 16.0,
        bucket_field: str = "difficulty",
    ) -> None:
        if not 0 < min_accept <= 1:
            raise InvalidArgumentError(f"min_accept must lie in (0, 1], got {min_accept}")
        if not power > 0 or not half_life > 0:
            raise InvalidArgumentError(
                f"power and half_life must be > 0, got power={power}, half_life={half_life}"
            )
        self.seed = seed
        self.min_accept = min_accept
        self.power = power
        self.decay = 0.5 ** (1.0 / half_life)
        self.bucket_field = bucket_field
        self.buckets: dict[str, BucketStats] = {}

    def bucket(self, task: common_pb2.Task) -> str:
        """The bucket of ``task``: its ``bucket_field`` label, else its id."""
        return task.metadata.get(self.bucket_field) or task.id

    def _stats(self, bucket: str) -> BucketStats:
        return self.buckets.setdefault(bucket, BucketStats())

    def observe(self, bucket: str, mixed: bool, *, all_right: bool = False) -> None:
        """Count one closed group of ``bucket`` (older observations decay by ``half_life``);
        ``all_right`` tells an unmixed group all right (True) from all wrong (False, the
        default); it is ignored when ``mixed``."""
        s = self._stats(bucket)
        s.mixed *= self.decay
        s.unmixed *= self.decay
        if mixed:
            s.mixed += 1.0
        else:
            s.unmixed += 1.0
            if all_right:
                s.all_right += 1
            else:
                s.all_wrong += 1
        s.observed += 1

    def observe_groups(
        self,
        groups: Iterable[common_pb2.Group],
        tasks_by_id: dict[str, common_pb2.Task],
        correct_threshold: float,
    ) -> int:
        """Observe closed groups (see ``group_is_mixed``); a group of a prompt not in
        ``tasks_by_id`` or without 2 valid rewards is ignored.

        Returns:
            Groups observed.
        """
        seen = 0
        for group in groups:
            task = tasks_by_id.get(group.prompt_id)
            counts = _correct_of_valid(group, correct_threshold)
            if task is None or counts is None:
                continue
            correct, valid = counts
            self.observe(self.bucket(task), 0 < correct < valid, all_right=correct == valid)
            seen += 1
        return seen

    def accept_probability(self, bucket: str) -> float:
        """a_b = max(min_accept, (m_b / max_c m_c) ** power), 1 for the best bucket; a bucket
        never observed has m_b = 1/2."""
        share = self._stats(bucket).mixed_share
        best = max(s.mixed_share for s in self.buckets.values())
        return max(self.min_accept, min(1.0, (share / best) ** self.power))

    def _draw(self, key: str) -> float:
        """A uniform number in [0, 1) fixed by (seed, key)."""
        digest = hashlib.blake2b(f"{self.seed}:{key}".encode(), digest_size=8).digest()
        return int.from_bytes(digest, "big") / 2.0**64

    def decide(self, task: common_pb2.Task, key: str) -> bool:
        """Whether to feed ``task`` now (``key``: its job's group id, fixing the draw); counts
        the decision in the bucket's ``fed`` or ``skipped``."""
        bucket = self.bucket(task)
        accept = self._draw(key) < self.accept_probability(bucket)
        s = self._stats(bucket)
        if accept:
            s.fed += 1
        else:
            s.skipped += 1
        return accept

    def stats(self) -> dict[str, dict[str, float]]:
        """Per bucket: fed, skipped, observed, of those all wrong and all right, their
        zero-variance share (undecayed, over the whole run), the decayed mixed share and the
        accept probability."""
        return {
            name: {
                "fed": s.fed,
                "skipped": s.skipped,
                "observed": s.observed,
                "all_wrong": s.all_wrong,
                "all_right": s.all_right,
                "zero_variance_share": round((s.all_wrong + s.all_right) / max(s.observed, 1), 4),
                "mixed_share": round(s.mixed_share, 4),
                "accept_probability": round(self.accept_probability(name), 4),
            }
            for name, s in sorted(self.buckets.items())
        }
