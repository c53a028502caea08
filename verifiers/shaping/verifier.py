"""Two shaping rewards meant to be combined with a correctness reward (issue 29): a run config
routes, for one task type, ``verifier-math`` (weight 1) + ``verifier-format`` (0.2) +
``verifier-length`` (-0.1), and the assembler trains on ``sum(weight * reward)``
(docs/learner-math.md, "Several rewards").

- :class:`FormatVerifier`: reward 1.0 when the end of the response states its final answer in
  an accepted form (a regular expression searched in the response's last ``tail_chars``
  characters: by default ``\\boxed{...}``, ``#### <number>``, ``the answer is <number>`` or the
  arithmetic tasks' ``:<number>``), else 0.0. An empty response is ``NO_ANSWER`` (reward 0).
- :class:`LengthVerifier`: reward ``min(1, length / max_length)`` with the length in characters
  or whitespace-separated words: the share of a length budget used, so a negative weight is a
  length penalty bounded by the weight.

Both accept every task type (``task_types`` empty) and need nothing from the task. They are
cheap string operations on at most ``tail_chars`` characters (the regular expression never sees
more, so a response cannot make it slow), so they run in the servicer's threads without a
worker pool.
"""

from __future__ import annotations

import re
from typing import ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk.base import Verifier, make_score

__all__ = ["FormatConfig", "FormatVerifier", "LengthConfig", "LengthVerifier"]

DEFAULT_FORMAT = (
    r"(\\boxed\{[^{}]{1,100}\}|####\s*-?[\d,]+(\.\d+)?|answer is:?\s*-?[\d,]+(\.\d+)?"
    r"|:-?\d+)\s*\.?\s*$"
)
"""Accepted final-answer forms at the end of a response (``FormatConfig.pattern``)."""


class FormatConfig(BaseModel):
    """Configuration of the format verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    pattern: str = Field(
        default=DEFAULT_FORMAT,
        min_length=1,
        description="Regular expression (Python re) searched in the response's last tail_chars "
        "characters; a match scores 1.0.",
    )
    tail_chars: int = Field(
        default=200,
        ge=1,
        le=10_000,
        description="How many characters at the end of the response the pattern sees.",
    )

    @field_validator("pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        try:
            re.compile(value)
        except re.error as exc:
            raise ValueError(f"pattern {value!r} is not a regular expression: {exc}") from None
        return value


class FormatVerifier(Verifier):
    """Reward 1.0 when the response ends with its final answer in an accepted form."""

    name: ClassVar[str] = "format"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: FormatConfig | None = None) -> None:
        self.config: FormatConfig = config or FormatConfig()
        super().__init__(self.config)
        self._pattern = re.compile(self.config.pattern)

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """1.0 when ``pattern`` matches in the response's tail, else 0.0 (NO_ANSWER if empty)."""
        tail = response.rstrip()[-self.config.tail_chars :]
        if not tail:
            return make_score(common_pb2.SCORE_STATUS_NO_ANSWER, detail="empty response")
        match = self._pattern.search(tail)
        return make_score(
            common_pb2.SCORE_STATUS_OK,
            1.0 if match else 0.0,
            extracted=match.group(0).strip() if match else "",
            detail="" if match else "no final answer in an accepted form at the end",
        )


class LengthConfig(BaseModel):
    """Configuration of the length verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    unit: Literal["chars", "words"] = Field(
        default="chars", description="Count characters (code points) or whitespace words."
    )
    max_length: int = Field(
        default=512, ge=1, description="Length at which the reward reaches 1.0 (in unit)."
    )


class LengthVerifier(Verifier):
    """Reward = the share of a length budget the response uses, min(1, length / max_length)."""

    name: ClassVar[str] = "length"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ()

    def __init__(self, config: LengthConfig | None = None) -> None:
        self.config: LengthConfig = config or LengthConfig()
        super().__init__(self.config)

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """``min(1, length / max_length)`` with status OK (an empty response scores 0.0)."""
        cfg = self.config
        length = len(response) if cfg.unit == "chars" else len(response.split())
        return make_score(
            common_pb2.SCORE_STATUS_OK,
            min(1.0, length / cfg.max_length),
            extracted=str(length),
            detail=f"{length} {cfg.unit}",
        )
