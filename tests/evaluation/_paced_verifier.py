"""A verifier that takes a fixed time per item, so a test can interrupt a run mid-way.

``PacedVerifier`` answers OK with reward 1.0 when the response equals ``task.gold_answer``
(else 0.0) after sleeping ``delay_s`` seconds. Served with
``grpo serve _paced_verifier:SERVICE`` (``tests/evaluation`` on ``PYTHONPATH``).
"""

from __future__ import annotations

import time
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk import Verifier, make_score
from grpo.verifiers.sdk.service import verifier_service_spec


class PacedConfig(BaseModel):
    """Pace of the paced verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    delay_s: float = Field(default=0.05, ge=0, description="Seconds spent per item.")


class PacedVerifier(Verifier):
    """Exact match of the response with the gold answer, ``delay_s`` seconds per item."""

    name: ClassVar[str] = "paced"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("paced",)
    required_task_fields: ClassVar[tuple[str, ...]] = ("gold_answer",)

    def __init__(self, config: PacedConfig | None = None) -> None:
        self.config: PacedConfig = config or PacedConfig()
        super().__init__(self.config)

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        time.sleep(self.config.delay_s)
        match = response == task.gold_answer
        return make_score(common_pb2.SCORE_STATUS_OK, float(match), extracted=response)


SERVICE = verifier_service_spec("verifier-paced", PacedVerifier, PacedConfig)
