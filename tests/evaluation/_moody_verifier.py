"""A verifier that cannot decide some responses until told it can, to test ``--resume``.

``MoodyVerifier`` answers OK (reward 1.0 when the response equals ``task.gold_answer``, else
0.0), except for the responses in ``MoodyVerifier.undecided`` (UNDECIDED) and
``MoodyVerifier.broken`` (INTERNAL). The two sets are class attributes, not config, so a test
changes them between two runs of the same verifier (same ``Describe``) in this process.
"""

from __future__ import annotations

from typing import ClassVar

from grpo.v1 import common_pb2, verifier_pb2
from grpo.verifiers.sdk import Verifier, make_score
from grpo.verifiers.sdk.service import verifier_service_spec


class MoodyVerifier(Verifier):
    """Exact match, but UNDECIDED / INTERNAL for the responses listed in the class sets."""

    name: ClassVar[str] = "moody"
    kind: ClassVar[int] = verifier_pb2.VERIFIER_KIND_OUTCOME
    task_types: ClassVar[tuple[str, ...]] = ("moody",)
    undecided: ClassVar[set[str]] = set()
    broken: ClassVar[set[str]] = set()

    def score(self, task: common_pb2.Task, response: str) -> common_pb2.Score:
        if response in self.undecided:
            return make_score(common_pb2.SCORE_STATUS_UNDECIDED, detail="cannot decide yet")
        if response in self.broken:
            return make_score(common_pb2.SCORE_STATUS_INTERNAL, detail="broke")
        return make_score(
            common_pb2.SCORE_STATUS_OK, float(response == task.gold_answer), extracted=response
        )


SERVICE = verifier_service_spec("verifier-moody", MoodyVerifier)
