"""The learning-rate schedule of the learner: linear warmup to the peak, then a decay.

One function, :func:`lr_multiplier`, is used by the GRPO trainer (through ``LambdaLR``) and by
the SFT warm start, so both read ``lr`` the same way: **``lr`` is the peak**, reached at the
end of warmup, and the decay starts counting only *after* warmup.

With ``s`` the index of the optimizer update (0 = the first update, ``LambdaLR``'s
convention), W warmup steps, S total steps and m = ``min_lr_ratio``:

* warmup, s < W: factor (s + 1) / W — the W-th update (s = W − 1) runs at exactly ``lr``;
* after warmup, with progress p = min(1, (s − W) / (S − W)):

  - ``constant``: 1;
  - ``linear``: m + (1 − m)·(1 − p);
  - ``cosine``: m + (1 − m)·½(1 + cos(π p))  (Loshchilov & Hutter 2017, SGDR, one cycle
    without restarts; the warmup-then-cosine form of verl's and transformers'
    ``get_cosine_schedule_with_warmup``, with a floor m instead of 0).

So s = W runs at ``lr`` (p = 0) and s ≥ S at m·``lr``. Example: W = 50, S = 100, cosine, m = 0.1
gives factors 0.02 at s = 0, 1.0 at s = 49 and s = 50, 0.55 at s = 75, 0.1 at s = 100.
"""

from __future__ import annotations

import math

from grpo.learner.choices import ScheduleName, names

__all__ = ["SCHEDULES", "Schedule", "lr_multiplier"]

Schedule = ScheduleName  # the name this module has always exported
SCHEDULES: tuple[str, ...] = names(ScheduleName)


def lr_multiplier(
    step: int,
    *,
    warmup_steps: int,
    schedule: str = "constant",
    total_steps: int | None = None,
    min_lr_ratio: float = 0.1,
) -> float:
    """Factor of the peak learning rate for optimizer update ``step`` (dimensionless).

    Args:
        step: index of the update, ≥ 0 (0 = the first update).
        warmup_steps: W ≥ 0 updates of linear warmup; 0 starts at the peak.
        schedule: ``"constant"``, ``"linear"`` or ``"cosine"`` after warmup.
        total_steps: S, the update at which linear/cosine decay reaches ``min_lr_ratio``;
            None (or 0) means no decay is known: the factor stays 1 after warmup.
        min_lr_ratio: m in [0, 1], the final factor of a decaying schedule.

    Returns:
        The factor in (0, 1] (or m at and after S).

    Raises:
        ValueError: negative ``step`` or ``warmup_steps``, an unknown schedule (the message
            lists the valid ones), ``min_lr_ratio`` outside [0, 1], or a decaying schedule
            whose ``total_steps`` ≤ ``warmup_steps`` (the decay would span no update).
    """
    if step < 0 or warmup_steps < 0:
        raise ValueError(f"step and warmup_steps must be >= 0; got {step}, {warmup_steps}")
    if schedule not in SCHEDULES:
        raise ValueError(f"unknown schedule {schedule!r}; valid: {', '.join(SCHEDULES)}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise ValueError(f"min_lr_ratio must lie in [0, 1]; got {min_lr_ratio}")
    if step < warmup_steps:
        return (step + 1) / warmup_steps
    if schedule == "constant" or not total_steps:
        return 1.0
    if total_steps <= warmup_steps:
        raise ValueError(
            f"total_steps={total_steps} must exceed warmup_steps={warmup_steps} for a "
            f"{schedule} decay; raise total_steps or use schedule 'constant'"
        )
    progress = min(1.0, (step - warmup_steps) / (total_steps - warmup_steps))
    cosine = 0.5 * (1.0 + math.cos(math.pi * progress))
    decay = 1.0 - progress if schedule == "linear" else cosine
    return min_lr_ratio + (1.0 - min_lr_ratio) * decay
