"""Process-supervision token credit: step rewards → per-token advantages.

DeepSeekMath (Shao et al. 2024, §4.1.3, "process supervision"): a step reward belongs to the
token that ends the step; step rewards are normalized, and the advantage of token t is the
sum of the normalized rewards of the steps that end at or after t:

    A_t = Σ_{k : end_k ≥ t} r̃_k

Tokens after the last step end get 0. Normalization (``normalization``):

* ``group`` — r̃ = (r − mean)/std over all step rewards of the group's responses (the paper's
  choice), with the same conventions as outcome advantages (:mod:`grpo.learner.advantages`):
  std ``population`` (default) or ``sample``; a group whose valid step rewards are all equal
  (max == min) or whose std ≤ eps gives 0; fewer than 2 valid step rewards gives 0.
* ``response`` — the same statistics over each response's own steps.
* ``none`` — raw rewards.

NaN step rewards (unverifiable or failed steps the caller chose to mark so) are excluded from
the statistics and contribute 0. Outcome and process advantages are combined by
:func:`combine_advantages`.
"""

from __future__ import annotations

import bisect
import sys
from collections.abc import Sequence

import torch

from grpo.learner.advantages import StdConvention, grouped_stats
from grpo.learner.choices import ProcessNormalization, names

__all__ = [
    "PROCESS_NORMALIZATIONS",
    "ProcessNormalization",
    "combine_advantages",
    "process_token_advantages",
    "step_end_tokens",
]

PROCESS_NORMALIZATIONS: tuple[str, ...] = names(ProcessNormalization)


def step_end_tokens(
    char_spans: Sequence[tuple[int, int]],
    token_char_offsets: Sequence[int] | Sequence[tuple[int, int]],
    *,
    text_length: int | None = None,
) -> list[int]:
    """Index of the token that contains each step's last character.

    Args:
        char_spans: per step, the character span ``(start, end)`` of the step in the response
            text, end exclusive (as ``grpo.v1.StepScore.char_start/char_end``).
        token_char_offsets: per token either its start offset (as
            ``grpo.v1.Completion.token_char_offsets``: token i spans [off[i], off[i+1]), the
            last one ends at ``text_length``) or a ``(start, end)`` pair. Zero-width tokens
            (EOS) never contain a character.
        text_length: length of the response text; bounds the last token when offsets are
            starts only.

    Returns:
        One token index per step: the token containing character ``end − 1`` (when a
        tokenizer leaves that character uncovered, the last token starting before it).

    Raises:
        ValueError: an empty or negative span, offsets not sorted, or a step whose last
            character lies outside the tokens (before the first or past the last token).
    """
    starts: list[int] = []
    ends: list[int] = []
    for i, off in enumerate(token_char_offsets):
        if isinstance(off, tuple | list):
            starts.append(int(off[0]))
            ends.append(int(off[1]))
        else:
            starts.append(int(off))  # type: ignore[call-overload]
        if i and starts[-1] < starts[-2]:
            raise ValueError(f"token_char_offsets must be sorted; token {i} starts before {i - 1}")
    if not starts:
        raise ValueError("token_char_offsets is empty: the response has no tokens")
    unbounded = text_length if text_length is not None else sys.maxsize
    last_end = max(ends) if ends else unbounded
    result = []
    for k, (start, end) in enumerate(char_spans):
        if not 0 <= start < end:
            raise ValueError(f"step {k} has an empty or negative char span ({start}, {end})")
        last_char = end - 1
        if last_char >= last_end or last_char < starts[0]:
            raise ValueError(
                f"step {k} ends at char {last_char}, outside the response's tokens "
                f"(chars {starts[0]}..{last_end - 1})"
            )
        index = bisect.bisect_right(starts, last_char) - 1
        result.append(index)
    return result


def _as_list(name: str, values: Sequence[object], n: int) -> None:
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} entries; expected one per response ({n})")


def process_token_advantages(
    step_rewards: Sequence[Sequence[float]],
    step_ends: Sequence[Sequence[int]],
    response_lengths: Sequence[int] | torch.Tensor,
    *,
    group_index: Sequence[int] | torch.Tensor | None = None,
    num_tokens: int | None = None,
    normalization: ProcessNormalization = "group",
    std: StdConvention = "population",
    eps: float = 1e-6,
    dtype: torch.dtype = torch.float32,
) -> torch.Tensor:
    """Token advantages from step rewards: A_t = Σ of normalized rewards of steps ending ≥ t.

    Args:
        step_rewards: per response (N), its step rewards (NaN = excluded, contributes 0).
        step_ends: per response, the token index at which each step ends (same lengths as
            ``step_rewards``; e.g. from :func:`step_end_tokens`). Several steps may end at
            the same token; their rewards add.
        response_lengths: per response, its number of tokens; each step end must be below it.
        group_index: per response, its group (prompt) id, any ints; required by
            ``normalization="group"``.
        num_tokens: T, the width of the output (default max(response_lengths)).
        normalization: ``"group"``, ``"response"`` or ``"none"`` (module docstring).
        std: ``"population"`` or ``"sample"`` for the normalization's std.
        eps: a normalization set with std ≤ eps yields 0.
        dtype: output dtype.

    Returns:
        Tensor[N, T] of token advantages; 0 after each response's last step end.

    Raises:
        ValueError: list lengths disagree, a step end is negative or ≥ the response length,
            a response is longer than ``num_tokens``, unknown normalization, or ``group``
            normalization without ``group_index``.
    """
    if normalization not in PROCESS_NORMALIZATIONS:
        raise ValueError(
            f"unknown process normalization {normalization!r}; valid: "
            f"{', '.join(PROCESS_NORMALIZATIONS)}"
        )
    n = len(step_rewards)
    _as_list("step_ends", step_ends, n)
    lengths = [int(x) for x in response_lengths]
    _as_list("response_lengths", lengths, n)
    width = num_tokens if num_tokens is not None else max(lengths, default=0)
    rows: list[int] = []
    cols: list[int] = []
    values: list[float] = []
    for i, (rewards_i, ends_i) in enumerate(zip(step_rewards, step_ends, strict=True)):
        if len(rewards_i) != len(ends_i):
            raise ValueError(
                f"response {i}: {len(rewards_i)} step rewards but {len(ends_i)} step ends"
            )
        if lengths[i] > width:
            raise ValueError(f"response {i} has {lengths[i]} tokens > num_tokens={width}")
        for k, end in enumerate(ends_i):
            if not 0 <= int(end) < lengths[i]:
                raise ValueError(
                    f"response {i} step {k} ends at token {end}, beyond the response's "
                    f"{lengths[i]} tokens"
                )
            rows.append(i)
            cols.append(int(end))
            values.append(float(rewards_i[k]))
    out = torch.zeros(n, width, dtype=torch.float64)
    if not values:
        return out.to(dtype)
    r = torch.tensor(values, dtype=torch.float64)
    normalized = _normalize(r, torch.tensor(rows), normalization, group_index, n, std, eps)
    out.index_put_((torch.tensor(rows), torch.tensor(cols)), normalized, accumulate=True)
    # reverse cumulative sum over tokens: A_t = Σ_{t' ≥ t} (reward ending at t')
    return out.flip(1).cumsum(1).flip(1).to(dtype)


def _normalize(
    r: torch.Tensor,
    rows: torch.Tensor,
    normalization: str,
    group_index: Sequence[int] | torch.Tensor | None,
    n: int,
    std: StdConvention,
    eps: float,
) -> torch.Tensor:
    """Normalized step rewards (float64 [S]); NaN rewards become 0."""
    ok = torch.isfinite(r)
    if normalization == "none":
        return torch.where(ok, r, 0)
    if normalization == "group":
        if group_index is None:
            raise ValueError("normalization='group' needs group_index (one group id per response)")
        groups = [int(g) for g in group_index]
        _as_list("group_index", groups, n)
        _, dense = torch.unique(torch.tensor(groups), return_inverse=True)
        step_group = dense[rows]
    else:
        step_group = rows
    num = int(step_group.max()) + 1
    # A set with one step, or none at all (a group or response without checkable steps), is
    # allowed here and just yields 0, unlike an outcome group: two invalid (NaN) entries per
    # set lift every set past the group-size check without touching any statistic.
    padded_r = torch.cat([r, torch.full((2 * num,), float("nan"), dtype=torch.float64)])
    padded_g = torch.cat([step_group, torch.arange(num).repeat(2)])
    stats = grouped_stats(padded_r, padded_g, num, std=std, eps=eps, valid=None, distributed=False)
    drop = (stats.too_few_valid | stats.zero_variance)[step_group]
    sd = torch.where(drop, 1.0, stats.std[step_group])
    return torch.where(ok & ~drop, (r - stats.mean[step_group]) / sd, 0)


def combine_advantages(
    outcome_advantages: torch.Tensor,
    process_advantages: torch.Tensor,
    *,
    outcome_weight: float = 1.0,
    process_weight: float = 1.0,
) -> torch.Tensor:
    """Weighted sum of outcome advantages (broadcast to tokens) and process advantages.

    A_{i,t} = outcome_weight · A_i + process_weight · A^process_{i,t}.

    Args:
        outcome_advantages: Tensor[N] (one per response) or Tensor[N, T].
        process_advantages: Tensor[N, T].
        outcome_weight, process_weight: weights ≥ 0.

    Returns:
        Tensor[N, T] (masking is the loss's job).

    Raises:
        ValueError: shapes disagree or a weight is negative.
    """
    if outcome_weight < 0 or process_weight < 0:
        raise ValueError(
            f"advantage weights must be >= 0; got outcome {outcome_weight}, "
            f"process {process_weight}"
        )
    if process_advantages.dim() != 2 or outcome_advantages.shape not in (
        process_advantages.shape,
        process_advantages.shape[:1],
    ):
        raise ValueError(
            f"outcome_advantages {tuple(outcome_advantages.shape)} must be [N] or [N, T] and "
            f"process_advantages [N, T]; got process {tuple(process_advantages.shape)}"
        )
    outcome = outcome_advantages
    if outcome.dim() == 1:
        outcome = outcome.unsqueeze(1)
    return outcome_weight * outcome + process_weight * process_advantages
