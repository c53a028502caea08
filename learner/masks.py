"""Response loss masks from generated token ids: EOS handling and truncated responses.

A response's loss tokens are its generated tokens up to and including the first EOS (the
model must learn to emit EOS). Everything after the first EOS is padding. This holds when the
pad id equals the EOS id (Qwen, Llama chat templates): the first EOS is in the mask, the
padding EOS ids after it are not. A response with no EOS was cut at the length limit: it is
flagged ``truncated``; its tokens stay in the loss unless ``mask_truncated`` is set, which
drops the whole response from the loss (DAPO's overlong filtering, Yu et al. 2025 §3.4).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

__all__ = ["ResponseMask", "response_mask"]


@dataclass(frozen=True)
class ResponseMask:
    """Loss mask of a batch of responses.

    Attributes:
        mask: bool Tensor[N, T], True on tokens that enter the loss.
        lengths: int64 Tensor[N], number of real response tokens (EOS included), whether or
            not the response is masked out.
        truncated: bool Tensor[N], True when the response has no EOS (cut at the limit).
    """

    mask: torch.Tensor
    lengths: torch.Tensor
    truncated: torch.Tensor


def response_mask(
    token_ids: torch.Tensor,
    *,
    eos_token_id: int | Sequence[int],
    pad_token_id: int | None = None,
    lengths: torch.Tensor | None = None,
    mask_truncated: bool = False,
) -> ResponseMask:
    """Loss mask, lengths and truncated flags of right-padded generated tokens.

    Args:
        token_ids: int Tensor[N, T], generated tokens only (no prompt), right-padded.
        eos_token_id: the EOS id, or several (e.g. ``<|im_end|>`` and ``<|endoftext|>``).
        pad_token_id: the padding id (may equal an EOS id). Used, when ``lengths`` is None,
            to find where a response without EOS ends; None means no padding id (such a
            response fills all T positions).
        lengths: optional int Tensor[N], the number of tokens the engine really generated
            per response (positions ≥ length are padding whatever their id).
        mask_truncated: drop truncated responses from the loss (their mask is all False).

    Returns:
        :class:`ResponseMask`.

    Raises:
        ValueError: token_ids not 2-D, ``lengths`` of the wrong shape or outside [0, T].
    """
    if token_ids.dim() != 2:
        raise ValueError(f"token_ids must be [N, T]; got {tuple(token_ids.shape)}")
    n, t = token_ids.shape
    eos_ids = [eos_token_id] if isinstance(eos_token_id, int) else list(eos_token_id)
    if not eos_ids:
        raise ValueError("eos_token_id must name at least one token id")
    positions = torch.arange(t, device=token_ids.device).expand(n, t)
    if lengths is not None:
        if lengths.shape != (n,):
            raise ValueError(f"lengths must be [N] = [{n}]; got {tuple(lengths.shape)}")
        if n and (int(lengths.min()) < 0 or int(lengths.max()) > t):
            raise ValueError(f"lengths must lie in [0, {t}]; got {lengths.tolist()}")
        real = positions < lengths.to(token_ids.device).unsqueeze(1)
    elif pad_token_id is not None and pad_token_id not in eos_ids:
        is_pad = token_ids == pad_token_id
        first_pad = torch.where(is_pad.any(1), is_pad.int().argmax(1), t)
        real = positions < first_pad.unsqueeze(1)
    else:
        real = torch.ones(n, t, dtype=torch.bool, device=token_ids.device)
    is_eos = torch.isin(token_ids, torch.tensor(eos_ids, device=token_ids.device)) & real
    finished = is_eos.any(1)
    first_eos = torch.where(finished, is_eos.int().argmax(1), t)
    mask = real & (positions <= first_eos.unsqueeze(1))
    truncated = ~finished
    if mask_truncated:
        mask = mask & finished.unsqueeze(1)
    resp_len = (real & (positions <= first_eos.unsqueeze(1))).sum(1)
    return ResponseMask(mask=mask, lengths=resp_len.to(torch.int64), truncated=truncated)
