"""Process credit: step end tokens and cumulative step-indexed token advantages."""

from __future__ import annotations

import pytest
import torch

from grpo.learner.process import (
    combine_advantages,
    process_token_advantages,
    step_end_tokens,
)

T = torch.tensor
TOKENS = ["Step", " 1", ":", " x", "=", "2", ".\n", "Step", " 2", ":", " y", "=", "3", ".\n"]


def _starts(tokens: list[str]) -> list[int]:
    out, pos = [], 0
    for tok in tokens:
        out.append(pos)
        pos += len(tok)
    return out


def test_step_end_tokens_of_the_seed_example():
    text = "".join(TOKENS)
    assert text == "Step 1: x=2.\nStep 2: y=3.\n"
    spans = [(0, 13), (13, 26)]
    assert step_end_tokens(spans, _starts(TOKENS), text_length=len(text)) == [6, 13]
    pairs = [(s, s + len(t)) for s, t in zip(_starts(TOKENS), TOKENS, strict=True)]
    assert step_end_tokens(spans, pairs) == [6, 13]
    # a step ending mid-token maps to the token containing its last character
    assert step_end_tokens([(0, 12)], pairs) == [6]
    assert step_end_tokens([(0, 5)], pairs) == [1]


def test_step_end_tokens_zero_width_eos_and_errors():
    offsets = [*_starts(TOKENS), 26]  # EOS spans zero characters at the end
    assert step_end_tokens([(13, 26)], offsets, text_length=26) == [13]
    with pytest.raises(ValueError, match="outside the response's tokens"):
        step_end_tokens([(13, 30)], offsets, text_length=26)
    with pytest.raises(ValueError, match="empty"):
        step_end_tokens([(4, 4)], offsets, text_length=26)


def test_hand_worked_group_normalization():
    # response 0: 3 steps, rewards [1, −1, 1] ending at tokens 1, 3, 5
    # response 1: 2 steps, rewards [1, 1] ending at tokens 2, 4
    # group mean 0.6, population std 0.8 → normalized 1 → 0.5, −1 → −2
    adv = process_token_advantages(
        [[1.0, -1.0, 1.0], [1.0, 1.0]], [[1, 3, 5], [2, 4]], [6, 6], group_index=[7, 7]
    )
    want = T(
        [
            [0.5 - 2 + 0.5, 0.5 - 2 + 0.5, -2 + 0.5, -2 + 0.5, 0.5, 0.5],
            [1.0, 1.0, 1.0, 0.5, 0.5, 0.0],  # token 5 is after the last step end: 0
        ]
    )
    torch.testing.assert_close(adv, want)


def test_sample_std_response_and_no_normalization():
    rewards, ends = [[1.0, -1.0, 1.0], [1.0, 1.0]], [[1, 3, 5], [2, 4]]
    raw = process_token_advantages(rewards, ends, [6, 5], normalization="none", num_tokens=7)
    torch.testing.assert_close(raw, T([[1.0, 1, 0, 0, 1, 1, 0], [2.0, 2, 2, 1, 1, 0, 0]]))
    per_response = process_token_advantages(rewards, ends, [6, 6], normalization="response")
    # response 1's steps are all equal → zero; response 0: mean 1/3, std √(8/9)
    assert torch.equal(per_response[1], torch.zeros(6))
    hi, lo = (1 - 1 / 3) / (8 / 9) ** 0.5, (-1 - 1 / 3) / (8 / 9) ** 0.5
    torch.testing.assert_close(per_response[0, 4], T(hi))
    torch.testing.assert_close(per_response[0, 0], T(2 * hi + lo))
    sample = process_token_advantages(rewards, ends, [6, 6], group_index=[0, 0], std="sample")
    s = (0.16 * 4 + 2.56) / 4
    torch.testing.assert_close(sample[1, 4], T(0.4 / s**0.5))


def test_groups_are_normalized_separately_and_nan_steps_excluded():
    adv = process_token_advantages(
        [[1.0, 0.0], [0.0, float("nan")], [5.0], [5.0]],
        [[0, 1], [0, 1], [0], [0]],
        [2, 2, 1, 1],
        group_index=[0, 0, 1, 1],
    )
    # group 0 valid steps [1, 0, 0]: mean 1/3, std √2/3; group 1 is constant → 0
    hi, lo = (2 / 3) / (2**0.5 / 3), (-1 / 3) / (2**0.5 / 3)
    torch.testing.assert_close(adv[0], T([hi + lo, lo]))
    torch.testing.assert_close(adv[1], T([lo, 0.0]))
    assert torch.equal(adv[2:], torch.zeros(2, 2))


def test_process_errors():
    with pytest.raises(ValueError, match="beyond the response's 3 tokens"):
        process_token_advantages([[1.0]], [[3]], [3], normalization="none")
    with pytest.raises(ValueError, match="group_index"):
        process_token_advantages([[1.0]], [[0]], [3])
    with pytest.raises(ValueError, match="2 step rewards but 1 step ends"):
        process_token_advantages([[1.0, 2.0]], [[0]], [3], normalization="none")


def test_combine_advantages():
    process = T([[1.0, 0.5, 0.0], [-1.0, 0.0, 0.0]])
    out = combine_advantages(T([2.0, -2.0]), process, outcome_weight=0.5, process_weight=2.0)
    torch.testing.assert_close(out, T([[3.0, 2.0, 1.0], [-3.0, -1.0, -1.0]]))
    with pytest.raises(ValueError, match=">= 0"):
        combine_advantages(T([1.0]), T([[1.0]]), outcome_weight=-1)


def test_groups_and_responses_without_steps_get_zero_not_an_error():
    # group 0: no response has a checkable step; group 1: steps [1] and [0] -> ±1 (population)
    adv = process_token_advantages(
        [[], [], [1.0], [0.0]],
        [[], [], [1], [1]],
        [3, 3, 3, 3],
        group_index=[0, 0, 1, 1],
        normalization="group",
    )
    expected = torch.tensor(
        [[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, 0.0], [-1.0, -1.0, 0.0]],
        dtype=adv.dtype,
    )
    assert torch.equal(adv, expected)
    # per-response normalization: a response with no steps and ones with a single step -> 0
    adv = process_token_advantages(
        [[], [1.0], [0.0]], [[], [1], [1]], [3, 3, 3], normalization="response"
    )
    assert torch.equal(adv, torch.zeros(3, 3, dtype=adv.dtype))
