"""Example verifier: the smallest complete verifier, to copy when adding a new one.

``ExactMatchVerifier`` scores 1.0 when the response's last non-empty line equals the task's
gold answer after stripping whitespace and (optionally) case, else 0.0; an empty response is
``NO_ANSWER``. It needs no worker pool because the check is a cheap string comparison — a
verifier that runs sympy, a solver or user code must use ``WorkerPool`` (see
``grpo.verifiers.math.verifier``) or a sandbox. Serve it with
``grpo serve grpo.verifiers.example:SERVICE``: the one line ``SERVICE = verifier_service_spec(...)``
gives it the gRPC service, its settings (``server``, ``scoring``, ``verifier``), health and
metrics. Walk-through: docs/add-a-verifier.md.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk import Verifier, make_score
from grpo.verifiers.sdk.service import verifier_service_spec

__all__ = ["SERVICE", "ExactMatchConfig", "ExactMatchVerifier"]


class ExactMatchConfig(BaseModel):
    """Configuration of the exact-match verifier."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    case_sensitive: bool = Field(default=False, description="Compare letters' case too.")


class ExactMatchVerifier(Verifier):
    """Reward 1.0 when the last non-empty line of the response equals ``task.gold_answer``."""

    name: ClassVar[str] = "exact-match"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("exact",)
    required_task_fields: ClassVar[tuple[str, ...]] = ("gold_answer",)

    def __init__(self, config: ExactMatchConfig | None = None) -> None:
        self.config: ExactMatchConfig = config or ExactMatchConfig()
        super().__init__(self.config)

    def _key(self, text: str) -> str:
        text = " ".join(text.split())
        return text if self.config.case_sensitive else text.casefold()

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        """Compare the last non-empty line of ``response`` with ``task.gold_answer``."""
        lines = [line for line in response.splitlines() if line.strip()]
        if not lines:
            return make_score(common_pb2.SCORE_STATUS_NO_ANSWER, detail="empty response")
        answer = self._key(lines[-1])
        match = answer == self._key(task.gold_answer)
        return make_score(common_pb2.SCORE_STATUS_OK, float(match), extracted=answer)


SERVICE = verifier_service_spec("verifier-exact-match", ExactMatchVerifier, ExactMatchConfig)
"""``grpo serve grpo.verifiers.example:SERVICE``."""
