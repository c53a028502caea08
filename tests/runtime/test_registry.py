"""`serve` exits non-zero when a background worker's loop dies (it must not stay SERVING)."""

from __future__ import annotations

import threading

import pytest
from pydantic import BaseModel, Field

from grpo.errors import InternalError
from grpo.services.runtime.registry import ServiceParts, ServiceSpec, serve
from grpo.services.runtime.server import ServerSettings


class _Settings(BaseModel):
    server: ServerSettings = Field(default_factory=ServerSettings)


class _CrashingWorker:
    """A stream-consumer-like loop that raises after its first iteration."""

    def __init__(self) -> None:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.stopped = False

    def _run(self) -> None:
        raise RuntimeError("consumer loop crashed")

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout_s: float) -> None:
        self.stopped = True
        self._thread.join(timeout_s)

    def is_alive(self) -> bool:
        return self._thread.is_alive()


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_dead_worker_makes_serve_raise_and_stops_workers() -> None:
    worker = _CrashingWorker()
    spec = ServiceSpec("crashy", _Settings, lambda _s: ServiceParts([], [worker]))
    settings = _Settings(server=ServerSettings(port=0, metrics_port=-1, grace_s=0.5))
    with pytest.raises(InternalError, match="background worker died"):
        serve(spec, settings)
    assert worker.stopped
