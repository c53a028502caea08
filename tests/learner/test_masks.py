"""Response masks: EOS inside the loss, padding outside, truncated responses flagged."""

from __future__ import annotations

import torch

from grpo.learner.masks import response_mask

T = torch.tensor
EOS = 2


def test_pad_equal_to_eos_keeps_first_eos_only():
    ids = T([[5, 6, EOS, EOS, EOS], [7, EOS, EOS, EOS, EOS], [5, 6, 7, 8, 9]])
    out = response_mask(ids, eos_token_id=EOS, pad_token_id=EOS)
    assert out.mask.tolist() == [
        [True, True, True, False, False],
        [True, True, False, False, False],
        [True, True, True, True, True],
    ]
    assert out.lengths.tolist() == [3, 2, 5]
    assert out.truncated.tolist() == [False, False, True]


def test_truncated_response_masked_out_when_asked():
    ids = T([[5, 6, EOS, 0], [5, 6, 7, 8]])
    out = response_mask(ids, eos_token_id=EOS, pad_token_id=0, mask_truncated=True)
    assert out.mask.tolist() == [[True, True, True, False], [False] * 4]
    assert out.truncated.tolist() == [False, True]
    assert out.lengths.tolist() == [3, 4]


def test_distinct_pad_and_engine_lengths():
    # no EOS, cut at 3 tokens by the engine, padded with 0 afterwards
    ids = T([[5, 6, 7, 0, 0], [5, EOS, 0, 0, 0]])
    out = response_mask(ids, eos_token_id=EOS, pad_token_id=0)
    assert out.mask.sum(1).tolist() == [3, 2]
    assert out.truncated.tolist() == [True, False]
    # pad == EOS, but the engine says the first row generated only 2 tokens
    ids = T([[5, 6, EOS, EOS], [5, 6, 7, EOS]])
    out = response_mask(ids, eos_token_id=EOS, pad_token_id=EOS, lengths=T([2, 4]))
    assert out.mask.sum(1).tolist() == [2, 4]
    assert out.truncated.tolist() == [True, False]


def test_several_eos_ids():
    ids = T([[5, 9, 2, 2], [5, 2, 9, 9]])
    out = response_mask(ids, eos_token_id=[2, 9], pad_token_id=2)
    assert out.lengths.tolist() == [2, 2]
    assert not out.truncated.any()
