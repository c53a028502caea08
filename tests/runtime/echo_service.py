"""A small grpo.v1.Verifier used to test the service runtime (not a real verifier).

``Score`` behaviour is chosen by ``response``: ``"slow:<s>"`` sleeps s seconds, ``"boom"``
raises a bare exception, ``"missing-route"`` raises NotFoundError, ``"deadline"`` reports
``remaining_s`` in ``detail``; anything else echoes the response as ``extracted_answer``.
Served by the tests in-process and as ``grpo serve echo_service:SERVICE`` in a subprocess.

Its background worker can fail on purpose (the supervisor's tests): ``disk_full_after_s``
makes its loop write to ``/dev/full`` (a real ENOSPC) and die; ``wedge_after_s`` makes its
loop stop advancing (``progress_age_s`` grows) while the process still serves.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from grpo.errors import NotFoundError
from grpo.services.runtime.registry import ServiceParts, ServiceSpec
from grpo.services.runtime.server import ServerSettings, ServiceBinding, remaining_s, require
from grpo.v1 import common_pb2, verifier_pb2, verifier_pb2_grpc


class EchoServicer(verifier_pb2_grpc.VerifierServicer):
    def Describe(self, request: Any, context: Any) -> verifier_pb2.VerifierDescribeResponse:
        return verifier_pb2.VerifierDescribeResponse(name="echo", task_types=["echo"])

    def Score(self, request: Any, context: Any) -> verifier_pb2.ScoreResponse:
        require(request, "task.prompt", "response")
        text = request.response
        if text.startswith("slow:"):
            time.sleep(float(text.split(":", 1)[1]))
        elif text == "boom":
            raise RuntimeError("kaboom")
        elif text == "missing-route":
            raise NotFoundError("no verifier for task type 'echo'")
        elif text == "deadline":
            left = remaining_s(context)
            return verifier_pb2.ScoreResponse(score=common_pb2.Score(detail=str(left)))
        score = common_pb2.Score(status=common_pb2.SCORE_STATUS_OK, extracted_answer=text)
        return verifier_pb2.ScoreResponse(score=score)


def binding() -> ServiceBinding:
    return ServiceBinding(
        "grpo.v1.Verifier", verifier_pb2_grpc.add_VerifierServicer_to_server, EchoServicer()
    )


class EchoSettings(BaseModel):
    """Settings of the echo test service."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    server: ServerSettings = Field(
        default_factory=ServerSettings, description="gRPC server settings."
    )
    greeting: str = Field(default="hi", description="Unused; shows a service's own field.")
    disk_full_after_s: float = Field(
        default=0.0, ge=0, description="> 0: the worker writes to /dev/full then (ENOSPC)."
    )
    wedge_after_s: float = Field(
        default=0.0, ge=0, description="> 0: the worker's loop stops advancing then."
    )


class _Worker:
    def __init__(self, settings: EchoSettings) -> None:
        self.running = False
        self._settings = settings
        self._thread: threading.Thread | None = None
        self._beat = time.monotonic()
        self.failure: BaseException | None = None

    def start(self) -> None:
        self.running = True
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        started = time.monotonic()
        full, wedge = self._settings.disk_full_after_s, self._settings.wedge_after_s
        while self.running:
            now = time.monotonic()
            if not (wedge and now - started >= wedge):
                self._beat = now
            if full and now - started >= full:
                try:
                    with open("/dev/full", "w") as fh:
                        fh.write("x" * 4096)
                        fh.flush()
                except OSError as exc:
                    self.failure = exc
                    return
            time.sleep(0.05)

    def is_alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def progress_age_s(self) -> float:
        return time.monotonic() - self._beat

    def stop(self, timeout_s: float) -> None:
        self.running = False


def _build(settings: EchoSettings) -> ServiceParts:
    return ServiceParts(bindings=[binding()], workers=[_Worker(settings)])


SERVICE = ServiceSpec("echo", EchoSettings, _build)
