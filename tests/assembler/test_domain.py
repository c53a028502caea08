"""Pure assembler logic: member validity, group building, dynamic sampling, stats identity."""

from __future__ import annotations

import pytest
from assembler_helpers import member, rollout, score

from grpo.errors import ContractError, InvalidArgumentError
from grpo.services.assembler.group import assemble_group, scored_member
from grpo.services.assembler.sampling import DynamicSampler, GroupVerdict, regenerated_group_id
from grpo.services.runtime.accounting import stats_from_counters, stats_identity_gap
from grpo.services.runtime.score_status import is_verdict
from grpo.services.settings.assembler import DynamicSamplingConfig, DynamicSamplingMode
from grpo.v1 import common_pb2


def _group(rewards: list[float | None], round: int = 0) -> common_pb2.Group:
    members = [member(i, r, group_size=len(rewards), round=round) for i, r in enumerate(rewards)]
    return assemble_group(
        reversed(members),
        group_id="p1/e0",
        group_size=len(rewards),
        status=common_pb2.GROUP_STATUS_COMPLETE,
        opened_unix_s=1.0,
        closed_unix_s=3.5,
        straggler_wait_s=2.5,
    )


@pytest.mark.parametrize(
    ("status", "valid"),
    [
        (common_pb2.SCORE_STATUS_OK, True),
        (common_pb2.SCORE_STATUS_NO_ANSWER, True),
        (common_pb2.SCORE_STATUS_PARSE_ERROR, True),
        (common_pb2.SCORE_STATUS_TIMEOUT, True),
        (common_pb2.SCORE_STATUS_RUNTIME_ERROR, True),
        (common_pb2.SCORE_STATUS_INTERNAL, False),
        (common_pb2.SCORE_STATUS_UNSPECIFIED, False),
    ],
)
def test_member_missing_follows_outcome_status(status: int, valid: bool) -> None:
    m = scored_member(rollout(), score(0.0, status))
    assert m.missing is (not valid)
    assert is_verdict(m.outcome) is valid


def test_member_without_score_is_missing_not_zero() -> None:
    m = scored_member(rollout(), None, score(1.0))
    assert m.missing
    assert m.outcome.status == common_pb2.SCORE_STATUS_INTERNAL
    assert m.process.reward == 1.0


def test_assemble_orders_members_by_index() -> None:
    group = _group([1.0, 0.0, None, 1.0])
    assert [m.rollout.index for m in group.members] == [0, 1, 2, 3]
    assert group.prompt_id == "p1" and group.group_size == 4
    assert group.straggler_wait_s == 2.5


def test_assemble_rejects_foreign_and_repeated_members() -> None:
    kwargs = dict(
        group_id="p1/e0",
        group_size=4,
        status=common_pb2.GROUP_STATUS_COMPLETE,
        opened_unix_s=0.0,
        closed_unix_s=0.0,
        straggler_wait_s=0.0,
    )
    with pytest.raises(ContractError, match="index 1 repeated"):
        assemble_group([member(1, 1.0), member(1, 0.0)], **kwargs)  # type: ignore[arg-type]
    other = scored_member(rollout(group_id="p2/e0", prompt_id="p2"), score(1.0))
    with pytest.raises(ContractError, match="inside group"):
        assemble_group([member(0, 1.0), other], **kwargs)  # type: ignore[arg-type]
    with pytest.raises(ContractError, match="no member"):
        assemble_group([], **kwargs)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("rewards", "verdict", "valid", "correct"),
    [
        ([1.0, 0.0, 1.0, 0.0], GroupVerdict.ACCEPTED, 4, 2),
        ([1.0, 1.0, 1.0, 1.0], GroupVerdict.REJECTED_ALL_CORRECT, 4, 4),
        ([0.0, 0.0, 0.0, 0.0], GroupVerdict.REJECTED_ALL_WRONG, 4, 0),
        # Missing members count neither way: the 2 valid ones are both correct.
        ([1.0, None, 1.0, None], GroupVerdict.REJECTED_ALL_CORRECT, 2, 2),
        ([1.0, None, None, None], GroupVerdict.REJECTED_TOO_FEW_VALID, 1, 1),
        ([0.5, 1.0, 0.99, 0.0], GroupVerdict.ACCEPTED, 4, 1),
    ],
)
def test_mixed_mode_verdicts(
    rewards: list[float | None], verdict: GroupVerdict, valid: int, correct: int
) -> None:
    decision = DynamicSampler(DynamicSamplingConfig()).decide(_group(rewards))
    assert (decision.verdict, decision.valid, decision.correct) == (verdict, valid, correct)
    assert decision.regenerate is (verdict is not GroupVerdict.ACCEPTED)
    uniform = verdict in (GroupVerdict.REJECTED_ALL_CORRECT, GroupVerdict.REJECTED_ALL_WRONG)
    assert decision.zero_variance is uniform


def test_off_mode_keeps_uniform_groups_but_not_too_few_valid() -> None:
    sampler = DynamicSampler(DynamicSamplingConfig(mode=DynamicSamplingMode.OFF))
    for rewards in ([1.0] * 4, [0.0] * 4, [0.0, None, 0.0]):
        decision = sampler.decide(_group(rewards))
        assert decision.verdict is GroupVerdict.ACCEPTED
        assert decision.zero_variance  # kept, still counted as zero-variance
    assert not sampler.decide(_group([0.0, 1.0, 0.0])).zero_variance
    few = sampler.decide(_group([0.0, None, None]))
    assert few.verdict is GroupVerdict.REJECTED_TOO_FEW_VALID and not few.zero_variance


def test_threshold_defines_correct() -> None:
    sampler = DynamicSampler(DynamicSamplingConfig(correct_threshold=0.5))
    decision = sampler.decide(_group([0.5, 0.7, 0.9, 1.0]))
    assert decision.verdict is GroupVerdict.REJECTED_ALL_CORRECT


def test_regeneration_is_bounded_by_max_rounds() -> None:
    sampler = DynamicSampler(DynamicSamplingConfig(max_rounds=2))
    ids = []
    group = _group([0.0] * 4, round=0)
    for expected_round in (1, 2):
        decision = sampler.decide(group)
        assert decision.regenerate
        job = sampler.regeneration_job(group)
        assert job.round == expected_round and job.group_size == 4
        assert job.task.id == "p1"
        ids.append(job.group_id)
        group = _group([0.0] * 4, round=job.round)
    assert ids == ["p1/e0/r1", "p1/e0/r2"]
    assert not sampler.decide(group).regenerate
    with pytest.raises(InvalidArgumentError, match="max_rounds"):
        sampler.regeneration_job(group)


def test_regeneration_can_be_disabled() -> None:
    sampler = DynamicSampler(DynamicSamplingConfig(regenerate=False))
    assert not sampler.decide(_group([1.0] * 4)).regenerate


def test_regenerated_group_id_is_deterministic() -> None:
    assert regenerated_group_id("a/e3", 1) == "a/e3/r1"
    assert regenerated_group_id("a/e3/r1", 2) == "a/e3/r2"
    assert regenerated_group_id("a/r2x", 1) == "a/r2x/r1"


def test_min_valid_members_below_two_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match=">= 2"):
        DynamicSampler(DynamicSamplingConfig(), min_valid_members=1)


def test_stats_identity_detects_a_lost_group() -> None:
    counters = {
        "groups_opened": 10,
        "groups_accepted": 4,
        "groups_rejected_all_correct": 2,
        "groups_rejected_all_wrong": 1,
        "groups_rejected_too_few_valid": 1,
        "generated_tokens": 99,
    }
    stats = stats_from_counters(counters, groups_pending=2)
    assert stats_identity_gap(stats) == 0
    assert stats.generated_tokens == 99
    assert stats_identity_gap(stats_from_counters(counters, groups_pending=1)) == 1


def test_group_with_an_undecided_member_is_dropped_and_counted() -> None:
    """An UNDECIDED reward is masked (advantage 0, above a wrong answer's): by default a group
    holding one is dropped, so a response cannot escape its 0 by making the verifier undecided;
    a looser max_undecided_frac lets some through."""
    undecided = score(0.0, common_pb2.SCORE_STATUS_UNDECIDED)
    members = [scored_member(rollout(index=i), score(r)) for i, r in enumerate([1.0, 0.0, 0.0])]
    members.append(scored_member(rollout(index=3), undecided))
    group = assemble_group(
        members,
        group_id="p1/e0",
        group_size=4,
        status=common_pb2.GROUP_STATUS_COMPLETE,
        opened_unix_s=0.0,
        closed_unix_s=1.0,
        straggler_wait_s=0.0,
    )
    assert members[3].missing
    strict = DynamicSampler(DynamicSamplingConfig()).decide(group)
    assert strict.verdict is GroupVerdict.REJECTED_TOO_MANY_UNDECIDED and strict.undecided == 1
    loose = DynamicSampler(DynamicSamplingConfig(max_undecided_frac=0.25)).decide(group)
    assert loose.verdict is GroupVerdict.ACCEPTED and loose.valid == 3
