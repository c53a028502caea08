"""The prompt curriculum (issue 15 item 3): accept probabilities from observed mixed shares,
the feeder's skip decisions over a real Redis, restart, and the assembler's closed-groups
record it reads."""

from __future__ import annotations

import pytest
import redis

from grpo.errors import InvalidArgumentError
from grpo.services.assembler.sampling import GroupVerdict
from grpo.services.assembler.service import ClosedGroupStream
from grpo.services.driver.curriculum import PassRateCurriculum, group_is_mixed
from grpo.services.driver.feeder import PromptFeeder
from grpo.services.runtime.streams import StreamNames, Streams
from grpo.services.tasks.datasets import arith_difficulty, arith_tasks
from grpo.v1 import common_pb2


def _group(prompt_id: str, rewards: list[float | None], gid: str | None = None) -> common_pb2.Group:
    g = common_pb2.Group(group_id=gid or f"{prompt_id}/e0", prompt_id=prompt_id)
    for i, r in enumerate(rewards):
        m = g.members.add(rollout=common_pb2.Rollout(index=i, completion=common_pb2.Completion()))
        if r is None:
            m.missing = True
        else:
            m.outcome.reward = r
            m.rollout.completion.token_ids.extend([1, 2, 3])
    return g


def test_arith_difficulty_counts_carried_columns() -> None:
    assert arith_difficulty(47, 38) == "2-digit 1-carry"  # 7+8=15,4+3+1=8
    assert arith_difficulty(14, 11) == "2-digit 0-carry"  # 4+1=5: a 1 digit is no carry
    assert arith_difficulty(999, 1) == "3-digit 2-carry"
    assert arith_difficulty(52, 17, "-") == "2-digit 1-borrow"
    assert arith_difficulty(47, 38, "*") == "2x2-digit"
    tasks = arith_tasks(50, seed=3)
    assert all(t.metadata["difficulty"].endswith("-carry") for t in tasks)
    with pytest.raises(InvalidArgumentError, match="a >= b"):
        arith_difficulty(1, 2, "-")


def test_mixed_means_both_a_correct_and_a_wrong_valid_reward() -> None:
    assert group_is_mixed(_group("p", [1.0, 0.0, 0.0]), 1.0) is True
    assert group_is_mixed(_group("p", [0.0, 0.0, None]), 1.0) is False
    assert group_is_mixed(_group("p", [1.0, 1.0]), 1.0) is False
    assert group_is_mixed(_group("p", [1.0, None, None]), 1.0) is None  # one valid reward
    assert group_is_mixed(_group("p", [0.6, 0.2]), 0.5) is True  # the threshold decides


def test_observed_groups_are_counted_all_wrong_all_right_or_mixed() -> None:
    cur = PassRateCurriculum(half_life=2.0)
    tasks = {
        "p": common_pb2.Task(id="p", metadata={"difficulty": "b"}),
        "q": common_pb2.Task(id="q"),
    }
    groups = [
        _group("p", [0.0, 0.0, None]),  # all wrong (the missing member is ignored)
        _group("p", [1.0, 1.0, 1.0]),  # all right
        _group("p", [1.0, 0.0, 0.0]),  # mixed
        _group("p", [1.0, None, None]),  # one valid reward: not observed
        _group("q", [0.2, 0.9]),  # no difficulty label: its own bucket; mixed at 0.5
        _group("unknown", [0.0, 0.0]),  # not a training prompt: not observed
    ]
    assert cur.observe_groups(groups, tasks, correct_threshold=0.5) == 4
    b, q = cur.stats()["b"], cur.stats()["q"]
    assert (b["observed"], b["all_wrong"], b["all_right"]) == (3, 1, 1)
    assert b["zero_variance_share"] == pytest.approx(2 / 3, abs=1e-4)
    assert (q["observed"], q["all_wrong"], q["all_right"], q["zero_variance_share"]) == (1, 0, 0, 0)
    # The undecayed counts are the run's whole history; the decayed share weighs recent groups.
    d = 0.5 ** (1 / 2.0)
    mixed, unmixed = 1.0, d + d**2
    assert cur.buckets["b"].mixed_share == pytest.approx((mixed + 1) / (mixed + unmixed + 2))


def test_accept_probability_follows_the_mixed_share_with_a_floor() -> None:
    cur = PassRateCurriculum(min_accept=0.1, power=2.0, half_life=1e9)
    for _ in range(8):
        cur.observe("easy", True)  # m = 9/10
        cur.observe("hard", False)  # m = 1/10
    cur.observe("mid", True)
    cur.observe("mid", False)  # m = 2/4
    assert cur.accept_probability("easy") == 1.0
    assert cur.accept_probability("mid") == pytest.approx((0.5 / 0.9) ** 2)
    assert cur.accept_probability("hard") == 0.1  # (1/9)^2 < floor
    assert cur.accept_probability("never seen") == pytest.approx((0.5 / 0.9) ** 2)
    # Decisions are a pure function of (seed, key) and the estimates; shares match a_b.
    fed = sum(
        cur.decide(common_pb2.Task(id="x", metadata={"difficulty": "mid"}), f"k{i}")
        for i in range(4000)
    )
    assert fed / 4000 == pytest.approx((0.5 / 0.9) ** 2, abs=0.03)
    again = PassRateCurriculum(seed=0, half_life=1e9)
    again.buckets = cur.buckets
    assert [again._draw(f"k{i}") for i in range(5)] == [cur._draw(f"k{i}") for i in range(5)]
    assert cur.stats()["mid"]["fed"] == fed and cur.stats()["mid"]["skipped"] == 4000 - fed


def test_old_observations_decay_so_an_improved_bucket_comes_back() -> None:
    cur = PassRateCurriculum(half_life=4.0)
    for _ in range(20):
        cur.observe("b", False)
    low = cur.buckets["b"].mixed_share
    for _ in range(8):  # the policy now gets this bucket's groups mixed
        cur.observe("b", True)
    d = 0.5 ** (1 / 4)
    mixed, unmixed = sum(d**k for k in range(8)), sum(d**k for k in range(20)) * d**8
    assert low < 0.2 and cur.buckets["b"].mixed_share == pytest.approx(
        (mixed + 1) / (mixed + unmixed + 2)
    )
    assert cur.buckets["b"].mixed_share > 0.65  # without decay it would be 9/30
    with pytest.raises(InvalidArgumentError, match="min_accept"):
        PassRateCurriculum(min_accept=0)
    with pytest.raises(InvalidArgumentError, match="half_life"):
        PassRateCurriculum(half_life=0)


def test_feeder_skips_unmixed_buckets_and_resumes_after_its_decisions(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    names = StreamNames(redis_namespace)
    streams = Streams(redis_client)
    streams.ensure_group(names.prompts, "workers")
    tasks = [
        common_pb2.Task(
            id=f"t{i}", type="arith", metadata={"difficulty": "hard" if i % 2 else "easy"}
        )
        for i in range(40)
    ]
    record = ClosedGroupStream(streams, names)
    # What the assembler wrote: hard prompts all wrong, easy ones mixed.
    for i in range(0, 40, 2):
        record(_group(f"t{i}", [1.0, 0.0, 0.0, 1.0], gid=f"t{i}/old"), GroupVerdict.ACCEPTED)
        record(_group(f"t{i + 1}", [0.0] * 4, gid=f"t{i + 1}/old"), GroupVerdict.REJECTED_ALL_WRONG)
    record(_group("t1", [0.0] * 4, gid="t1/old"), GroupVerdict.REJECTED_ALL_WRONG)  # replay: once
    assert redis_client.xlen(names.closed) == 40

    def feeder() -> PromptFeeder:
        return PromptFeeder(
            streams,
            names,
            tasks,
            group_size=4,
            prompts_ahead=1000,
            groups_ahead=10,
            worker_group="workers",
            learner_group="learner",
            seed=1,
            repeats=1,
            curriculum=PassRateCurriculum(seed=1, min_accept=0.1, half_life=1e9),
        )

    f = feeder()
    written = f.pump(limit=10)
    assert f.curriculum is not None and f.curriculum.buckets["hard"].observed == 20
    stats = f.curriculum.stats()
    assert stats["easy"]["accept_probability"] == 1.0 and stats["hard"]["accept_probability"] == 0.1
    # Where the waste went: every hard group all wrong, no easy group zero-variance.
    assert (stats["hard"]["all_wrong"], stats["hard"]["all_right"]) == (20, 0)
    assert stats["hard"]["zero_variance_share"] == 1.0 and stats["easy"]["zero_variance_share"] == 0
    assert written == 10 and f.skipped > 0
    raw = redis_client.xrange(names.prompts)
    fed = [common_pb2.PromptJob.FromString(fields[b"pb"]).task for _i, fields in raw]  # type: ignore[union-attr]
    assert sum(t.metadata["difficulty"] == "easy" for t in fed) >= 8
    decided = f.fed + f.skipped
    # A restarted feeder finds every decided position (written or skipped) and goes on after it.
    again = feeder()
    assert again.resumed_at == decided
    again.pump(limit=1000)
    assert again.exhausted
    raw = redis_client.xrange(names.prompts)
    ids = [common_pb2.PromptJob.FromString(fields[b"pb"]).group_id for _i, fields in raw]  # type: ignore[union-attr]
    assert len(ids) == len(set(ids))  # nothing fed twice
    skipped = {
        k.decode().rsplit(":", 1)[-1] for k in redis_client.scan_iter(f"{names.prompts}:skipped:*")
    }
    assert not skipped & set(ids) and len(skipped) + len(ids) == 40  # every prompt decided once
    assert sum(i.startswith("t") and int(i[1:].split("/")[0]) % 2 == 1 for i in ids) < 8


def test_closed_group_record_keeps_index_and_outcome_only(
    redis_client: redis.Redis, redis_namespace: str
) -> None:
    names = StreamNames(redis_namespace)
    g = _group("p", [1.0, None, 0.0])
    g.members[0].rollout.completion.text = "long text the curriculum does not need"
    ClosedGroupStream(Streams(redis_client), names)(g, GroupVerdict.ACCEPTED)
    ((_id, fields),) = redis_client.xrange(names.closed)
    rec = common_pb2.Group.FromString(fields[b"pb"])
    assert [m.rollout.index for m in rec.members] == [0, 1, 2]
    assert [m.missing for m in rec.members] == [False, True, False]
    assert rec.members[0].outcome.reward == 1.0 and not rec.members[0].rollout.completion.text
    assert fields[b"verdict"] == b"accepted" and fields[b"tokens"] == b"6"
