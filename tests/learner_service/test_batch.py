"""The padded training batch: layout, masks, rewards with the valid mask, step-end tokens."""

from __future__ import annotations

import math

import pytest
import torch

from grpo.errors import ContractError, InvalidArgumentError
from grpo.services.learner.batch import build_batch
from grpo.v1 import common_pb2

PAD, EOS = 0, 1


def _member(
    index,
    prompt,
    resp,
    *,
    reward=1.0,
    status=common_pb2.SCORE_STATUS_OK,
    finish=common_pb2.FINISH_REASON_STOP,
    missing=False,
    steps=(),
    text=None,
):
    text = text if text is not None else "x" * sum(1 for t in resp if t != EOS)
    offsets, pos = [], 0
    for t in resp:
        offsets.append(pos)
        pos += 0 if t == EOS else 1
    return common_pb2.ScoredRollout(
        rollout=common_pb2.Rollout(
            index=index,
            prompt_token_ids=prompt,
            task=common_pb2.Task(type="arith", metadata={"difficulty": "2"}),
            completion=common_pb2.Completion(
                text=text,
                token_ids=resp,
                behavior_logprobs=[-0.5 - i for i in range(len(resp))],
                token_char_offsets=offsets,
                finish_reason=finish,
                policy_version=3,
            ),
        ),
        outcome=common_pb2.Score(status=status, reward=reward),
        process=common_pb2.Score(
            status=common_pb2.SCORE_STATUS_OK,
            steps=[common_pb2.StepScore(char_start=a, char_end=b, reward=r) for a, b, r in steps],
        ),
        missing=missing,
    )


def _groups():
    g0 = common_pb2.Group(
        group_id="g0",
        group_size=3,
        straggler_wait_s=0.5,
        members=[
            _member(0, [5, 6, 7], [10, 11, EOS], steps=[(0, 1, 1.0), (1, 2, -1.0)]),
            _member(1, [5, 6, 7], [12, EOS, EOS, EOS], reward=0.0),  # padding EOS after EOS
            _member(2, [5, 6, 7], [13, 14, 15, 16], finish=common_pb2.FINISH_REASON_LENGTH),
        ],
    )
    g1 = common_pb2.Group(
        group_id="g1",
        group_size=3,
        members=[  # member 1 never arrived; member 2's verifier failed
            _member(0, [8], [20, EOS], reward=float("nan")),
            _member(2, [8], [21, 22, EOS], status=common_pb2.SCORE_STATUS_INTERNAL),
        ],
    )
    return [g0, g1]


def test_layout_masks_and_rewards() -> None:
    b = build_batch(_groups(), pad_token_id=PAD, eos_token_id=EOS)
    assert (b.num_rows, b.num_groups, b.group_size, b.prompt_len) == (5, 2, 3, 3)
    # Prompts are left-padded; responses start at column 3.
    assert b.input_ids[3].tolist() == [PAD, PAD, 8, 20, EOS, PAD, PAD]
    assert b.attention_mask[3].tolist() == [0, 0, 1, 1, 1, 0, 0]
    assert b.position_ids[3, 2:5].tolist() == [0, 1, 2]
    assert b.input_ids[0, :6].tolist() == [5, 6, 7, 10, 11, EOS]
    # First EOS inside the mask, EOS padding after it outside; truncated flagged, kept.
    assert b.response_mask.tolist() == [
        [True, True, True, False],
        [True, True, False, False],
        [True, True, True, True],
        [True, True, False, False],
        [True, True, True, False],
    ]
    assert b.truncated.tolist() == [False, False, True, False, False]
    assert b.behavior_logprobs[0, :3].tolist() == [-0.5, -1.5, -2.5]
    # Missing rewards stay NaN with valid False; never 0.
    assert b.rewards[0].tolist() == [1.0, 0.0, 1.0]
    assert b.reward_valid.tolist() == [[True, True, True], [False, False, False]]
    assert math.isnan(b.rewards[1, 1]) and math.isnan(b.rewards[1, 0])
    assert b.row_prompt.tolist() == [0, 0, 0, 1, 1] and b.row_slot.tolist() == [0, 1, 2, 0, 2]
    assert b.row_valid.tolist() == [True, True, True, False, False]
    # Process steps: spans (0,1) and (1,2) end on tokens 0 and 1.
    assert b.step_ends[0] == [0, 1] and b.step_rewards[0] == [1.0, -1.0]
    assert b.step_ends[1] == [] and b.has_process_rewards
    assert b.group_metadata[0] == {"difficulty": "2"} and b.task_types == ["arith", "arith"]
    assert b.straggler_wait_s.tolist() == [0.5, 0.0]


def test_mask_truncated_drops_cut_responses() -> None:
    b = build_batch(_groups(), pad_token_id=PAD, eos_token_id=EOS, mask_truncated=True)
    assert not b.response_mask[2].any() and b.response_mask[0].sum() == 3


def test_bad_input_is_named() -> None:
    with pytest.raises(InvalidArgumentError, match="at least one group"):
        build_batch([], pad_token_id=PAD, eos_token_id=EOS)
    g = _groups()[0]
    del g.members[0].rollout.completion.behavior_logprobs[-1]
    with pytest.raises(ContractError, match="'g0' member 0: 2 behavior_logprobs for 3 token_ids"):
        build_batch([g], pad_token_id=PAD, eos_token_id=EOS)
    g = _groups()[0]
    g.members[0].rollout.index = 7
    with pytest.raises(ContractError, match="member index 7 is outside group size 3"):
        build_batch([g], pad_token_id=PAD, eos_token_id=EOS)


def test_to_moves_tensors() -> None:
    b = build_batch(_groups(), pad_token_id=PAD, eos_token_id=EOS).to("cpu")
    assert isinstance(b.rewards, torch.Tensor) and b.group_ids == ["g0", "g1"]


@pytest.mark.parametrize(
    ("status", "valid"),
    [
        (common_pb2.SCORE_STATUS_OK, True),
        (common_pb2.SCORE_STATUS_NO_ANSWER, True),
        (common_pb2.SCORE_STATUS_PARSE_ERROR, True),
        (common_pb2.SCORE_STATUS_TIMEOUT, True),  # a looping program scores 0, not "missing"
        (common_pb2.SCORE_STATUS_RUNTIME_ERROR, True),
        (common_pb2.SCORE_STATUS_INTERNAL, False),
        (common_pb2.SCORE_STATUS_UNSPECIFIED, False),
    ],
)
def test_reward_counts_for_every_verdict_status(status: int, valid: bool) -> None:
    group = common_pb2.Group(
        group_id="g",
        group_size=2,
        members=[_member(0, [5], [10, EOS]), _member(1, [5], [11, EOS], reward=0.0, status=status)],
    )
    b = build_batch([group], pad_token_id=PAD, eos_token_id=EOS)
    assert b.reward_valid[0].tolist() == [True, valid]
    if valid:
        assert b.rewards[0, 1].item() == 0.0
